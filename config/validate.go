package config

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/fairq/fairq/tenant"
)

// Bounds checked by Validate. The package imports nothing of fairq but
// package tenant, whose limits and ids a tenant of the file has, so the
// SQS limits that package queue also holds are repeated here.
const (
	maxQueues         = 1000 // live queues in the pool
	maxQueueName      = 80   // SQS's limit on a queue name
	minMaxMessageSize = 1 << 10
	maxMaxMessageSize = 1 << 20        // the largest message SQS takes
	maxVisibility     = 12 * time.Hour // SQS's longest visibility timeout
)

// longestSuffix is the longest suffix of a queue name of a deployment with
// at most maxQueues live queues ("-live-999" is as long).
const longestSuffix = "-overflow"

var (
	sha256Hex     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	apiKeyHash    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	queueNameChar = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// Validate checks c against the rules of each key (see the field
// comments) and returns every problem, joined, each a *KeyError naming
// the key's path.
func (c Config) Validate() error {
	var p problems
	c.checkServer(&p)
	c.checkQueues(&p)
	c.checkDefaults(&p)
	c.checkTenants(&p)
	c.checkWorker(&p)
	c.checkSendWindow(&p)
	return p.err()
}

// maxSendWindow bounds gateway.send_window: every message a window holds
// has a client waiting for its 202, and a second already gathers two
// messages at a queue that sees one a second, where a window saves
// nothing worth the wait.
const maxSendWindow = time.Second

func (c Config) checkSendWindow(p *problems) {
	if w := c.Gateway.SendWindow; w < 0 || w > maxSendWindow {
		p.add("gateway.send_window", 0, "must be 0–%v, got %v", maxSendWindow, w)
	}
}

func (c Config) checkRedis(p *problems) {
	r := c.Redis
	if r.Addr != "" {
		checkHostPort(p, "redis.addr", r.Addr, false)
	}
	for i, a := range r.Addrs {
		checkHostPort(p, fmt.Sprintf("redis.addrs[%d]", i), a, false)
	}
	if r.Addr != "" && len(r.Addrs) > 0 {
		p.add("redis.addr", 0, "set redis.addr (one node) or redis.addrs (a cluster's seeds, or Sentinels), not both")
	}
	switch r.Mode {
	case RedisSingle:
		if len(r.Addrs) > 1 {
			p.add("redis.addrs", 0, "mode single takes one address, got %d: set redis.mode to cluster or sentinel", len(r.Addrs))
		}
		if r.MasterName != "" {
			p.add("redis.master_name", 0, "is for mode sentinel")
		}
	case RedisCluster:
		if r.MasterName != "" {
			p.add("redis.master_name", 0, "is for mode sentinel")
		}
	case RedisSentinel:
		if r.MasterName == "" && r.Configured() {
			p.add("redis.master_name", 0, "is required in mode sentinel: the name of the primary the Sentinels watch")
		}
	default:
		p.add("redis.mode", 0, "unknown mode %q: want %q, %q or %q", r.Mode, RedisSingle, RedisCluster, RedisSentinel)
	}
}

func (c Config) checkServer(p *problems) {
	checkHostPort(p, "listen", c.Listen, true)
	switch c.Backend {
	case BackendMemory, BackendSQS:
	default:
		p.add("backend", 0, "unknown backend %q: want %q or %q", c.Backend, BackendMemory, BackendSQS)
	}
	if c.Admin.TokenSHA256 != "" && !sha256Hex.MatchString(c.Admin.TokenSHA256) {
		p.add("admin.token_sha256", 0, "want the sha256 of the token as 64 lowercase hex digits, or empty to disable /admin")
	}
	c.checkRedis(p)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", 0, "unknown level %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "json", "text":
	default:
		p.add("log.format", 0, "unknown format %q: want json, text, or empty for the command's default", c.Log.Format)
	}
	if c.Gateway.MaxMessageSize < minMaxMessageSize || c.Gateway.MaxMessageSize > maxMaxMessageSize {
		p.add("gateway.max_message_size", 0, "must be %d–%d bytes, got %d", minMaxMessageSize, maxMaxMessageSize, c.Gateway.MaxMessageSize)
	}
	if c.Gateway.SendTimeout < 100*time.Millisecond || c.Gateway.SendTimeout > time.Minute {
		p.add("gateway.send_timeout", 0, "must be 100ms–1m, got %v", c.Gateway.SendTimeout)
	}
	if c.Gateway.MaxInflightBytes < int64(c.Gateway.MaxMessageSize)*4 {
		p.add("gateway.max_inflight_bytes", 0, "must hold at least four messages of max_message_size (%d bytes), got %d", 4*c.Gateway.MaxMessageSize, c.Gateway.MaxInflightBytes)
	}
	if c.Gateway.MaxTenantInflightBytes < int64(c.Gateway.MaxMessageSize)*4 || c.Gateway.MaxTenantInflightBytes > c.Gateway.MaxInflightBytes {
		p.add("gateway.max_tenant_inflight_bytes", 0, "must be from four messages of max_message_size (%d bytes) to max_inflight_bytes (%d), got %d",
			4*c.Gateway.MaxMessageSize, c.Gateway.MaxInflightBytes, c.Gateway.MaxTenantInflightBytes)
	}
	if c.Admin.NoisyInFlightShare <= 0 || c.Admin.NoisyInFlightShare > 1 {
		p.add("admin.noisy_in_flight_share", 0, "must be above 0 and at most 1, got %v", c.Admin.NoisyInFlightShare)
	}
	if c.Admin.NoisyMinInFlight < 1 {
		p.add("admin.noisy_min_in_flight", 0, "must be at least 1, got %d", c.Admin.NoisyMinInFlight)
	}
	if c.Worker.DedupeWindow < 0 {
		p.add("worker.dedupe_window", 0, "must not be negative, got %v", c.Worker.DedupeWindow)
	}
	if c.Worker.WatchersPerQueue < 0 {
		p.add("worker.watchers_per_queue", 0, "must not be negative (0: every worker watches every queue), got %d", c.Worker.WatchersPerQueue)
	}
	if c.Gateway.IdempotencyWindow < time.Second {
		p.add("gateway.idempotency_window", 0, "must be at least 1s, got %v", c.Gateway.IdempotencyWindow)
	}
}

// checkHostPort checks a host:port address; the host may be empty (all
// interfaces) only where a server listens.
func checkHostPort(p *problems, key, addr string, listen bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(key, 0, "want host:port, got %q", addr)
		return
	}
	if host == "" && !listen {
		p.add(key, 0, "want host:port, got %q with no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(key, 0, "port must be a number 0–65535, got %q", port)
	}
}

func (c Config) checkQueues(p *problems) {
	if c.SQS.Region == "" {
		p.add("sqs.region", 0, "must be set")
	}
	if c.SQS.Endpoint != "" {
		checkURL(p, "sqs.endpoint", c.SQS.Endpoint)
	}
	switch prefix := c.SQS.QueuePrefix; {
	case prefix == "":
		p.add("sqs.queue_prefix", 0, "must be set")
	case !queueNameChar.MatchString(prefix):
		p.add("sqs.queue_prefix", 0, "%q may hold only letters, digits, '-' and '_', as SQS queue names do", prefix)
	case len(prefix)+len(longestSuffix) > maxQueueName:
		p.add("sqs.queue_prefix", 0, "too long: queue %s%s would exceed SQS's %d characters", prefix, longestSuffix, maxQueueName)
	}
	switch c.SQS.MessageGroupID {
	case MessageGroupNone, MessageGroupTenant:
	default:
		p.add("sqs.message_group_id", 0, "unknown value %q: want %q (each message in its tenant's group: SQS fair queues) or empty (no group)", c.SQS.MessageGroupID, MessageGroupTenant)
	}
	if c.Pool.Queues < 1 || c.Pool.Queues > maxQueues {
		p.add("pool.queues", 0, "must be 1–%d, got %d", maxQueues, c.Pool.Queues)
	}
	if c.Pool.ShardSize < 1 || c.Pool.ShardSize > max(1, c.Pool.Queues) {
		p.add("pool.shard_size", 0, "must be 1–pool.queues (%d), got %d", c.Pool.Queues, c.Pool.ShardSize)
	}
}

// checkURL checks an http or https URL with a host.
func checkURL(p *problems, key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.add(key, 0, "invalid URL %q", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		p.add(key, 0, "want an http or https URL, got %q", raw)
	case u.Host == "":
		p.add(key, 0, "URL %q has no host", raw)
	}
}

func (c Config) checkDefaults(p *problems) {
	d := c.Defaults
	for _, f := range []struct {
		key string
		set bool
	}{
		{"ingest_rate", d.IngestRate != nil},
		{"ingest_burst", d.IngestBurst != nil},
		{"process_rate", d.ProcessRate != nil},
		{"process_burst", d.ProcessBurst != nil},
		{"concurrency", d.Concurrency != nil},
		{"soft_backlog", d.SoftBacklog != nil},
		{"max_backlog", d.MaxBacklog != nil},
	} {
		if !f.set {
			p.add("defaults."+f.key, 0, "must be set")
		}
	}
	c.checkLimits(p, "defaults.", d)
}

// checkLimits adds the problems of a tenant's limits l (tenant.ValidateLimits
// against c.Defaults), naming keys prefix+name.
func (c Config) checkLimits(p *problems, prefix string, l tenant.Limits) {
	err := tenant.ValidateLimits(c.Defaults, l)
	if err == nil {
		return
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *tenant.LimitError
		if errors.As(e, &le) {
			p.add(prefix+le.Key, 0, "%s", le.Reason)
		}
	}
}

func (c Config) checkTenants(p *problems) {
	ids := map[string]int{}  // tenant id → index
	keys := map[string]int{} // key hash → tenant index
	for i, t := range c.Tenants {
		path := fmt.Sprintf("tenants[%d]", i)
		switch first, dup := ids[t.ID]; {
		case t.ID == "":
			p.add(path+".id", 0, "must be set")
		case !tenant.ValidID(t.ID):
			p.add(path+".id", 0, "%q: want 1–%d letters, digits, '-', '_' or '.'", t.ID, tenant.MaxIDLength)
		case dup:
			p.add(path+".id", 0, "tenant %q is already defined by tenants[%d]", t.ID, first)
		default:
			ids[t.ID] = i
		}
		for j, k := range t.APIKeys {
			kpath := fmt.Sprintf("%s.api_keys[%d]", path, j)
			if !apiKeyHash.MatchString(k) {
				p.add(kpath, 0, "want sha256:<64 lowercase hex digits> as `fairq keys hash` prints it")
				continue
			}
			if first, dup := keys[k]; dup {
				if first == i {
					p.add(kpath, 0, "key listed twice")
				} else {
					p.add(kpath, 0, "key already belongs to tenants[%d]", first)
				}
				continue
			}
			keys[k] = i
		}
		c.checkLimits(p, path+".", t.Limits)
	}
}

func (c Config) checkWorker(p *problems) {
	w := c.Worker
	checkURL(p, "worker.push_url", w.PushURL)
	if _, _, err := mime.ParseMediaType(w.MimeType); err != nil {
		p.add("worker.mime_type", 0, "invalid media type %q", w.MimeType)
	}
	if w.Connections < 1 || w.Connections > 100 {
		p.add("worker.connections", 0, "must be 1–100, got %d", w.Connections)
	}
	if w.MaxRetries < 1 || w.MaxRetries > 100 {
		p.add("worker.max_retries", 0, "must be 1–100, got %d", w.MaxRetries)
	}
	between := func(key string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			p.add(key, 0, "must be %v–%v, got %v", lo, hi, d)
		}
	}
	// A message's visibility cannot be extended past 12h from its receive,
	// so waiting longer for an answer would only see it delivered twice.
	between("worker.connect_timeout", w.ConnectTimeout, time.Millisecond, maxVisibility)
	between("worker.inactivity_timeout", w.InactivityTimeout, time.Millisecond, maxVisibility)
	// The worker heartbeats every third of it: SQS counts whole seconds.
	between("worker.visibility_timeout", w.VisibilityTimeout, time.Second, maxVisibility)
	between("worker.error_visibility_timeout", w.ErrorVisibilityTimeout, 0, maxVisibility)
	if w.BacklogAge < 0 {
		p.add("worker.backlog_age", 0, "must not be negative, got %v", w.BacklogAge)
	}
	if w.DropAge < 0 {
		p.add("worker.drop_age", 0, "must not be negative, got %v", w.DropAge)
	}
	between("worker.acceptable_latency", w.AcceptableLatency, time.Millisecond, maxVisibility)
}
