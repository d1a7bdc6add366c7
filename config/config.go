package config

import (
	"time"

	"github.com/fairq/fairq/tenant"
)

// Config is the whole configuration of a fairq process. The YAML keys are
// a contract (the README's configuration table); every scalar key can be overridden by an
// environment variable FAIRQ_ + the upper-cased path joined with "_" (see
// the package comment). Build one with Default, Load or Parse; the zero
// Config is not valid.
type Config struct {
	// Listen is the host:port of the HTTP server.
	Listen string `yaml:"listen"`
	Admin  Admin  `yaml:"admin"`
	// Backend is the queue backend: "memory" (in-process, keeps nothing
	// across restarts) or "sqs".
	Backend string `yaml:"backend"`
	SQS     SQS    `yaml:"sqs"`
	Redis   Redis  `yaml:"redis"`
	Pool    Pool   `yaml:"pool"`
	// Defaults are the limits of a tenant that sets none; every field is
	// set in a valid Config.
	Defaults tenant.Limits `yaml:"defaults"`
	// Tenants are the tenants defined in the file. They cannot be set from
	// the environment; more can be added at run time through the admin API.
	Tenants []Tenant `yaml:"tenants"`
	Worker  Worker   `yaml:"worker"`
	Gateway Gateway  `yaml:"gateway"`
	Log     Log      `yaml:"log"`
}

// Log configures the structured logs on stderr.
type Log struct {
	// Level is the lowest level logged: debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is json or text; empty is text for `fairq dev` and json for
	// everything else.
	Format string `yaml:"format"`
}

// Admin configures the /admin API.
type Admin struct {
	// TokenSHA256 is the sha256 of the admin bearer token as 64 lowercase
	// hex digits; empty disables /admin.
	TokenSHA256 string `yaml:"token_sha256"`
	// NoisyInFlightShare and NoisyMinInFlight are the overview's noisy
	// rule: a tenant is noisy while its share of the fleet's messages in
	// flight, or of its processing time, is above the share and the fleet
	// has at least the minimum in flight.
	NoisyInFlightShare float64 `yaml:"noisy_in_flight_share"`
	NoisyMinInFlight   int     `yaml:"noisy_min_in_flight"`
}

// SQS configures the Amazon SQS backend.
type SQS struct {
	// Region is the AWS region of the queues.
	Region string `yaml:"region"`
	// Endpoint is the SDK's BaseEndpoint, for emulators; empty uses AWS.
	Endpoint string `yaml:"endpoint"`
	// QueuePrefix starts every queue name (a contract, see queue.Names). It also names the
	// queues of the memory backend.
	QueuePrefix string `yaml:"queue_prefix"`
	// MessageGroupID is what each message's SQS MessageGroupId is: ""
	// sends none; MessageGroupTenant sends the message's tenant, which
	// turns on SQS fair queues on the standard queues (a message of no
	// tenant, such as a periodic task, is sent in no group). It applies
	// to the memory backend too, which keeps the group without acting on
	// it.
	MessageGroupID string `yaml:"message_group_id"`
}

// Redis configures the optional shared state of a fleet.
type Redis struct {
	// Mode is how Redis is deployed: "single" (one node, or a primary
	// behind one address), "cluster" (Redis Cluster, e.g. ElastiCache in
	// cluster mode) or "sentinel" (a primary found through Sentinels).
	Mode string `yaml:"mode"`
	// Addr is the host:port of a single node: the shorthand of Addrs for
	// mode single. Empty, with Addrs empty too, means no Redis: every
	// limit is local to the process.
	Addr string `yaml:"addr"`
	// Addrs are the cluster's seed nodes (mode cluster), or the Sentinels
	// (mode sentinel), as host:port; from the environment, comma-separated.
	Addrs []string `yaml:"addrs"`
	// MasterName is the name of the primary the Sentinels watch (mode
	// sentinel).
	MasterName string `yaml:"master_name"`
	// FailOpen keeps admitting and dispatching under local limits while
	// Redis is unreachable; false refuses instead.
	FailOpen bool `yaml:"fail_open"`
	// Username and Password authenticate to Redis (AUTH); set the password
	// through FAIRQ_REDIS_PASSWORD rather than in the file.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// TLS connects to Redis over TLS, verifying its certificate against
	// the system's roots.
	TLS bool `yaml:"tls"`
}

// Pool sizes the shuffle-sharded pool of live queues.
type Pool struct {
	// Queues is the number of live queues, 1–1000.
	Queues int `yaml:"queues"`
	// ShardSize is the number of live queues of each tenant, 1–Queues.
	ShardSize int `yaml:"shard_size"`
}

// Tenant is a tenant defined in the configuration file.
type Tenant struct {
	// ID names the tenant: 1–64 letters, digits, '-', '_' or '.'.
	ID string `yaml:"id"`
	// APIKeys are the hashes of the tenant's API keys, each
	// "sha256:<64 lowercase hex>" as `fairq keys hash` prints it.
	APIKeys []string `yaml:"api_keys"`
	// Limits override Config.Defaults field by field.
	tenant.Limits `yaml:",inline"`
}

// Worker configures the consumer daemon, with aws-sqsd's names and defaults.
type Worker struct {
	// PushURL is the http or https URL each message is POSTed to.
	PushURL string `yaml:"push_url"`
	// MimeType is the Content-Type of the POST.
	MimeType string `yaml:"mime_type"`
	// Connections is the number of messages dispatched at once by one
	// worker, 1–100.
	Connections int `yaml:"connections"`
	// ConnectTimeout bounds connecting to the application.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// InactivityTimeout bounds waiting for the application's answer;
	// heartbeats stop there.
	InactivityTimeout time.Duration `yaml:"inactivity_timeout"`
	// VisibilityTimeout is the visibility of a received message, extended
	// by heartbeats while the application works; 0–12h.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`
	// ErrorVisibilityTimeout caps the backoff after a failed attempt; 0–12h.
	ErrorVisibilityTimeout time.Duration `yaml:"error_visibility_timeout"`
	// MaxRetries is the attempts before a message goes to the dead-letter
	// queue, 1–100.
	MaxRetries int `yaml:"max_retries"`
	// BacklogAge is the age past which a message moves to the backlog
	// queue.
	BacklogAge time.Duration `yaml:"backlog_age"`
	// DropAge is the age past which a message is dropped; 0 never drops.
	DropAge time.Duration `yaml:"drop_age"`
	// CronFile is an Elastic Beanstalk cron.yaml of periodic tasks; empty
	// runs none.
	CronFile string `yaml:"cron_file"`
	// AcceptableLatency is how long a message may wait for a worker; the
	// autoscaling target fairq_backlog_target_per_instance is this ÷ the
	// mean processing time per worker.
	AcceptableLatency time.Duration `yaml:"acceptable_latency"`
	// DedupeWindow is how long a worker remembers the id of a message it
	// delivered, so that another copy of it (a send the gateway retried,
	// SQS's at-least-once) is deleted without a push. With Redis it holds
	// across the fleet.
	DedupeWindow time.Duration `yaml:"dedupe_window"`
	// WatchersPerQueue is how many workers of the fleet receive from each
	// live queue; each worker watches the queues it ranks among the first
	// this many for (rendezvous hashing of queue and worker), so that an
	// idle fleet makes about this many long polls per queue rather than
	// one per worker. 0, or as many as the fleet has workers, makes every
	// worker watch every queue.
	WatchersPerQueue int `yaml:"watchers_per_queue"`
}

// Gateway configures the front door beyond the contract's keys.
type Gateway struct {
	// MaxMessageSize is the largest message accepted, counted as SQS counts
	// it (body plus attribute names, types and values); 1 KiB–1 MiB.
	MaxMessageSize int `yaml:"max_message_size"`
	// IdempotencyWindow is how long an Idempotency-Key is remembered.
	IdempotencyWindow time.Duration `yaml:"idempotency_window"`
	// SendTimeout bounds the send of a message to SQS, every attempt
	// together; past it the client gets 503 unavailable.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// SendWindow is the longest a message may wait for others going to the
	// same queue before its SendMessageBatch call goes, 0–1s. It waits
	// only while the queue's recent rate makes others likely within it,
	// and a full batch goes at once; 0 sends every message at once.
	SendWindow time.Duration `yaml:"send_window"`
	// MaxInflightBytes bounds the request body bytes the gateway holds at
	// once; past it requests get 503 before their body is read.
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`
	// MaxTenantInflightBytes is one tenant's share of MaxInflightBytes;
	// past it the tenant's requests get 429 before their body is read.
	MaxTenantInflightBytes int64 `yaml:"max_tenant_inflight_bytes"`
}

// Default returns the configuration with every default, as fairq.example.yaml lists them, and
// no tenants.
func Default() Config {
	return Config{
		Listen:   "127.0.0.1:8080",
		Backend:  BackendMemory,
		SQS:      SQS{Region: "us-east-1", QueuePrefix: "fairq"},
		Admin:    Admin{NoisyInFlightShare: 0.10, NoisyMinInFlight: 30},
		Redis:    Redis{Mode: RedisSingle, FailOpen: true},
		Pool:     Pool{Queues: 8, ShardSize: 2},
		Defaults: tenant.LimitsDefault.Limits(),
		Worker: Worker{
			PushURL:                "http://127.0.0.1:80/",
			MimeType:               "application/json",
			Connections:            50,
			ConnectTimeout:         5 * time.Second,
			InactivityTimeout:      180 * time.Second,
			VisibilityTimeout:      30 * time.Second,
			ErrorVisibilityTimeout: 300 * time.Second,
			MaxRetries:             10,
			BacklogAge:             5 * time.Minute,
			DropAge:                0,
			CronFile:               "",
			AcceptableLatency:      10 * time.Second,
			DedupeWindow:           time.Hour,
			WatchersPerQueue:       2,
		},
		Gateway: Gateway{
			MaxMessageSize:         256 << 10,
			IdempotencyWindow:      24 * time.Hour,
			SendTimeout:            3 * time.Second,
			SendWindow:             10 * time.Millisecond,
			MaxInflightBytes:       64 << 20,
			MaxTenantInflightBytes: 16 << 20,
		},
		Log: Log{Level: "info"},
	}
}

// The Redis modes.
const (
	RedisSingle   = "single"
	RedisCluster  = "cluster"
	RedisSentinel = "sentinel"
)

// Configured reports whether a Redis is configured at all.
func (r Redis) Configured() bool { return r.Addr != "" || len(r.Addrs) > 0 }

// Endpoints returns the addresses to connect to: Addr, or Addrs.
func (r Redis) Endpoints() []string {
	if r.Addr != "" {
		return []string{r.Addr}
	}
	return r.Addrs
}

// The values of sqs.message_group_id.
const (
	MessageGroupNone   = ""
	MessageGroupTenant = "tenant"
)

// The backends.
const (
	BackendMemory = "memory"
	BackendSQS    = "sqs"
)
