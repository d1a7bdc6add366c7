// Package config loads and validates the YAML configuration
// and its FAIRQ_ environment overrides. Only cmd/fairq calls Load; every
// other package takes its own Config, built by cmd from this one.
//
// # Precedence
//
// A value comes from, in rising order: Default, the YAML file, the
// environment. Load (from a path) and Parse (from bytes) apply all three
// and then Validate. A file may be empty, or hold comments only; a key
// written with no value (`listen:` or `listen: null`) keeps its default.
//
// # The file
//
// The file holds one YAML document whose keys are those of the README's
// configuration table (every key, with its default, in fairq.example.yaml);
// fairq.example.yaml at the root of the repository lists every key with
// its default and a comment, and a test keeps it in step with Default.
// Decoding is strict: an unknown key (keys are case sensitive), a key
// written twice, a value of the wrong type (a quoted "8" or a 1.5 where an
// integer is wanted) or a second document is an error naming the key's
// full path and its line, such as
//
//	line 3: worker.push_ur: unknown key
//
// Durations are Go durations ("30s", "5m", "1h30m"); a bare 0 is accepted,
// any other number without a unit is an error naming the key and the
// value. Anchors, aliases and merge keys ("<<: *base") work as in YAML, so
// tenants can share limits; keys written in a mapping win over merged
// ones. The file is walked by reflection over the yaml struct tags rather
// than by yaml's own decoder, to name the full path in every message and
// to report every problem at once.
//
// # The environment
//
// Every scalar key can be overridden by a variable FAIRQ_ + its path in
// upper case with "." replaced by "_":
//
//	listen                  FAIRQ_LISTEN
//	admin.token_sha256      FAIRQ_ADMIN_TOKEN_SHA256
//	sqs.queue_prefix        FAIRQ_SQS_QUEUE_PREFIX
//	sqs.message_group_id    FAIRQ_SQS_MESSAGE_GROUP_ID
//	redis.addr              FAIRQ_REDIS_ADDR
//	defaults.ingest_rate    FAIRQ_DEFAULTS_INGEST_RATE
//	worker.push_url         FAIRQ_WORKER_PUSH_URL
//
// EnvVars lists them all. The names are built from the known keys, not
// split apart, since keys hold "_" themselves. Values are parsed as Go
// does: integers by strconv.ParseInt, numbers by strconv.ParseFloat
// (finite), booleans by strconv.ParseBool (true, false, 1, 0, …),
// durations by time.ParseDuration. A variable that is empty counts as
// unset, so the environment cannot set a key to "" (leave it out of the
// file instead). A bad value is an error naming the variable.
//
// Tenants are a list and cannot be set from the environment: they come
// from the file, or from the admin API at run time. Load and Parse never
// read the process environment themselves; they take a getenv function
// (os.Getenv in cmd, a map in tests).
//
// # Validation
//
// Validate checks every rule and returns every problem, joined with
// errors.Join, each a *KeyError naming the key's path (tenants[1].api_keys[0])
// and matching ErrInvalid; through Load and Parse, a problem with a key
// the file set (and the environment did not override) names its line too.
// The ranges follow SQS and aws-sqsd where they
// have one: worker.connections and worker.max_retries 1–100, visibility
// timeouts 0–12h, gateway.max_message_size 1 KiB–1 MiB, queue names of at
// most 80 letters, digits, '-' and '_' (so sqs.queue_prefix is at most 71
// characters, the length of "-overflow" less). worker.inactivity_timeout
// is at most 12h because a message's visibility cannot be extended past
// 12h from its receive. soft_backlog may be 0 (admission shrinks from the
// first message) but not above max_backlog, checked on each tenant's
// resolved limits.
//
// # Limits
//
// The limits of Config.Defaults and of each tenant are package tenant's
// Limits, which the file writes inline: they hold pointers so that an
// unset limit differs from 0, and tenant.Resolve turns them into concrete
// values over Config.Defaults. Validate checks them with
// tenant.ValidateLimits, the rules the admin API applies to the limits it
// stores.
package config
