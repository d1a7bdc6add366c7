package config

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/tenant"
)

const (
	hashA = "sha256:" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(c *Config)
		want   []string // keys named, in order; nil means valid
		reason string   // a substring of the first reason
	}{
		{name: "defaults", edit: func(*Config) {}},
		{name: "backend sqs", edit: func(c *Config) { c.Backend = "sqs" }},
		{name: "unknown backend", edit: func(c *Config) { c.Backend = "kafka" }, want: []string{"backend"}, reason: `unknown backend "kafka"`},
		{name: "empty backend", edit: func(c *Config) { c.Backend = "" }, want: []string{"backend"}},

		{name: "listen all interfaces", edit: func(c *Config) { c.Listen = ":8080" }},
		{name: "listen ipv6", edit: func(c *Config) { c.Listen = "[::1]:0" }},
		{name: "listen no port", edit: func(c *Config) { c.Listen = "localhost" }, want: []string{"listen"}, reason: "want host:port"},
		{name: "listen named port", edit: func(c *Config) { c.Listen = "localhost:http" }, want: []string{"listen"}, reason: "port must be a number"},
		{name: "listen port too big", edit: func(c *Config) { c.Listen = "localhost:65536" }, want: []string{"listen"}},
		{name: "listen empty", edit: func(c *Config) { c.Listen = "" }, want: []string{"listen"}},

		{name: "admin token", edit: func(c *Config) { c.Admin.TokenSHA256 = strings.Repeat("ab", 32) }},
		{name: "admin token short", edit: func(c *Config) { c.Admin.TokenSHA256 = "abc" }, want: []string{"admin.token_sha256"}},
		{name: "admin token upper case", edit: func(c *Config) { c.Admin.TokenSHA256 = strings.Repeat("AB", 32) }, want: []string{"admin.token_sha256"}},
		{name: "admin token with prefix", edit: func(c *Config) { c.Admin.TokenSHA256 = hashA }, want: []string{"admin.token_sha256"}},

		{name: "redis addr", edit: func(c *Config) { c.Redis.Addr = "redis:6379" }},
		{name: "redis addr no port", edit: func(c *Config) { c.Redis.Addr = "redis" }, want: []string{"redis.addr"}},
		{name: "redis addr no host", edit: func(c *Config) { c.Redis.Addr = ":6379" }, want: []string{"redis.addr"}, reason: "no host"},
		{name: "redis cluster", edit: func(c *Config) {
			c.Redis = Redis{Mode: RedisCluster, Addrs: []string{"a:6379", "b:6379"}, FailOpen: true}
		}},
		{name: "redis cluster from one seed", edit: func(c *Config) { c.Redis = Redis{Mode: RedisCluster, Addr: "cfg.cache.amazonaws.com:6379"} }},
		{name: "redis sentinel", edit: func(c *Config) {
			c.Redis = Redis{Mode: RedisSentinel, Addrs: []string{"s1:26379", "s2:26379", "s3:26379"}, MasterName: "fairq"}
		}},
		{name: "redis sentinel without a master name", edit: func(c *Config) { c.Redis = Redis{Mode: RedisSentinel, Addrs: []string{"s1:26379"}} },
			want: []string{"redis.master_name"}, reason: "required in mode sentinel"},
		{name: "redis single with two addresses", edit: func(c *Config) { c.Redis = Redis{Mode: RedisSingle, Addrs: []string{"a:1", "b:1"}} },
			want: []string{"redis.addrs"}, reason: "mode single takes one address"},
		{name: "redis addr and addrs", edit: func(c *Config) { c.Redis = Redis{Mode: RedisCluster, Addr: "a:1", Addrs: []string{"b:1"}} },
			want: []string{"redis.addr"}, reason: "not both"},
		{name: "redis addrs bad", edit: func(c *Config) { c.Redis = Redis{Mode: RedisCluster, Addrs: []string{"a:1", "b"}} },
			want: []string{"redis.addrs[1]"}},
		{name: "redis unknown mode", edit: func(c *Config) { c.Redis.Mode = "ring" }, want: []string{"redis.mode"}, reason: `unknown mode "ring"`},
		{name: "acceptable latency zero", edit: func(c *Config) { c.Worker.AcceptableLatency = 0 }, want: []string{"worker.acceptable_latency"}},
		{name: "log level", edit: func(c *Config) { c.Log.Level = "verbose" }, want: []string{"log.level"}, reason: "unknown level"},
		{name: "log format", edit: func(c *Config) { c.Log.Format = "xml" }, want: []string{"log.format"}, reason: "unknown format"},
		{name: "log text debug", edit: func(c *Config) { c.Log = Log{Level: "debug", Format: "text"} }},

		{name: "sqs endpoint", edit: func(c *Config) { c.SQS.Endpoint = "http://127.0.0.1:4566" }},
		{name: "sqs endpoint no scheme", edit: func(c *Config) { c.SQS.Endpoint = "127.0.0.1:4566" }, want: []string{"sqs.endpoint"}},
		{name: "sqs endpoint no host", edit: func(c *Config) { c.SQS.Endpoint = "https://" }, want: []string{"sqs.endpoint"}, reason: "no host"},
		{name: "sqs region empty", edit: func(c *Config) { c.SQS.Region = "" }, want: []string{"sqs.region"}},
		{name: "message group tenant", edit: func(c *Config) { c.SQS.MessageGroupID = "tenant" }},
		{name: "message group unknown", edit: func(c *Config) { c.SQS.MessageGroupID = "queue" }, want: []string{"sqs.message_group_id"}, reason: `unknown value "queue"`},
		{name: "message group case", edit: func(c *Config) { c.SQS.MessageGroupID = "Tenant" }, want: []string{"sqs.message_group_id"}},
		{name: "queue prefix empty", edit: func(c *Config) { c.SQS.QueuePrefix = "" }, want: []string{"sqs.queue_prefix"}},
		{name: "queue prefix dot", edit: func(c *Config) { c.SQS.QueuePrefix = "my.app" }, want: []string{"sqs.queue_prefix"}},
		{name: "queue prefix space", edit: func(c *Config) { c.SQS.QueuePrefix = "my app" }, want: []string{"sqs.queue_prefix"}},
		{name: "queue prefix longest", edit: func(c *Config) { c.SQS.QueuePrefix = strings.Repeat("p", 71) }},
		{name: "queue prefix too long", edit: func(c *Config) { c.SQS.QueuePrefix = strings.Repeat("p", 72) }, want: []string{"sqs.queue_prefix"}, reason: "-overflow would exceed"},

		{name: "pool 1 of 1", edit: func(c *Config) { c.Pool = Pool{Queues: 1, ShardSize: 1} }},
		{name: "pool 1000", edit: func(c *Config) { c.Pool = Pool{Queues: 1000, ShardSize: 1000} }},
		{name: "pool 0 queues", edit: func(c *Config) { c.Pool = Pool{Queues: 0, ShardSize: 1} }, want: []string{"pool.queues"}},
		{name: "pool too many queues", edit: func(c *Config) { c.Pool.Queues = 1001 }, want: []string{"pool.queues"}},
		{name: "shard size 0", edit: func(c *Config) { c.Pool.ShardSize = 0 }, want: []string{"pool.shard_size"}},
		{name: "shard size over queues", edit: func(c *Config) { c.Pool.ShardSize = 9 }, want: []string{"pool.shard_size"}},

		{name: "defaults unset", edit: func(c *Config) { c.Defaults.Concurrency = nil }, want: []string{"defaults.concurrency"}, reason: "must be set"},
		{name: "defaults zero rate", edit: func(c *Config) { c.Defaults.IngestRate = ptr(0.0) }, want: []string{"defaults.ingest_rate"}},
		{name: "defaults negative rate", edit: func(c *Config) { c.Defaults.ProcessRate = ptr(-1.0) }, want: []string{"defaults.process_rate"}},
		{name: "defaults NaN rate", edit: func(c *Config) { c.Defaults.ProcessRate = ptr(math.NaN()) }, want: []string{"defaults.process_rate"}},
		{name: "defaults infinite rate", edit: func(c *Config) { c.Defaults.IngestRate = ptr(math.Inf(1)) }, want: []string{"defaults.ingest_rate"}},
		{name: "defaults fractional rate", edit: func(c *Config) { c.Defaults.IngestRate = ptr(0.5) }},
		{name: "defaults zero burst", edit: func(c *Config) { c.Defaults.IngestBurst = ptr(0) }, want: []string{"defaults.ingest_burst"}},
		{name: "defaults zero process burst", edit: func(c *Config) { c.Defaults.ProcessBurst = ptr(0) }, want: []string{"defaults.process_burst"}},
		{name: "defaults zero concurrency", edit: func(c *Config) { c.Defaults.Concurrency = ptr(0) }, want: []string{"defaults.concurrency"}},
		{name: "defaults zero soft backlog", edit: func(c *Config) { c.Defaults.SoftBacklog = ptr(0) }},
		{name: "defaults negative soft backlog", edit: func(c *Config) { c.Defaults.SoftBacklog = ptr(-1) }, want: []string{"defaults.soft_backlog"}},
		{name: "defaults zero max backlog", edit: func(c *Config) { c.Defaults.MaxBacklog = ptr(0) }, want: []string{"defaults.max_backlog", "defaults.soft_backlog"}},
		{name: "defaults soft over max", edit: func(c *Config) { c.Defaults.SoftBacklog = ptr(20000) }, want: []string{"defaults.soft_backlog"}, reason: "exceeds max_backlog 10000"},
		{name: "defaults soft equals max", edit: func(c *Config) { c.Defaults.SoftBacklog = ptr(10000) }},

		{name: "tenant", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "acme.eu-1_x", APIKeys: []string{hashA, hashB}}, {ID: "B"}}
		}},
		{name: "tenant id empty", edit: func(c *Config) { c.Tenants = []Tenant{{ID: ""}} }, want: []string{"tenants[0].id"}, reason: "must be set"},
		{name: "tenant id slash", edit: func(c *Config) { c.Tenants = []Tenant{{ID: "a/b"}} }, want: []string{"tenants[0].id"}},
		{name: "tenant id space", edit: func(c *Config) { c.Tenants = []Tenant{{ID: "a b"}} }, want: []string{"tenants[0].id"}},
		{name: "tenant id 64", edit: func(c *Config) { c.Tenants = []Tenant{{ID: strings.Repeat("t", 64)}} }},
		{name: "tenant id 65", edit: func(c *Config) { c.Tenants = []Tenant{{ID: strings.Repeat("t", 65)}} }, want: []string{"tenants[0].id"}},
		{name: "tenant id repeated", edit: func(c *Config) { c.Tenants = []Tenant{{ID: "a"}, {ID: "b"}, {ID: "a"}} }, want: []string{"tenants[2].id"}, reason: "already defined by tenants[0]"},
		{name: "api key without prefix", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", APIKeys: []string{strings.TrimPrefix(hashA, "sha256:")}}}
		}, want: []string{"tenants[0].api_keys[0]"}},
		{name: "api key upper case", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", APIKeys: []string{strings.ToUpper(hashA)}}}
		}, want: []string{"tenants[0].api_keys[0]"}},
		{name: "api key short", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", APIKeys: []string{hashA[:len(hashA)-1]}}}
		}, want: []string{"tenants[0].api_keys[0]"}},
		{name: "api key plain text", edit: func(c *Config) { c.Tenants = []Tenant{{ID: "a", APIKeys: []string{"secret"}}} }, want: []string{"tenants[0].api_keys[0]"}},
		{name: "api key twice in a tenant", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", APIKeys: []string{hashA, hashB, hashA}}}
		}, want: []string{"tenants[0].api_keys[2]"}, reason: "listed twice"},
		{name: "api key on two tenants", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", APIKeys: []string{hashA}}, {ID: "b", APIKeys: []string{hashB, hashA}}}
		}, want: []string{"tenants[1].api_keys[1]"}, reason: "belongs to tenants[0]"},
		{name: "tenant limits", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", Limits: tenant.Limits{IngestRate: ptr(1e6), MaxBacklog: ptr(5), SoftBacklog: ptr(5)}}}
		}},
		{name: "tenant bad limits", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", Limits: tenant.Limits{IngestRate: ptr(0.0), IngestBurst: ptr(-1), ProcessRate: ptr(-2.0), ProcessBurst: ptr(0), Concurrency: ptr(0)}}}
		}, want: []string{"tenants[0].ingest_rate", "tenants[0].ingest_burst", "tenants[0].process_rate", "tenants[0].process_burst", "tenants[0].concurrency"}},
		{name: "tenant max under default soft", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", Limits: tenant.Limits{MaxBacklog: ptr(500)}}}
		}, want: []string{"tenants[0].soft_backlog"}, reason: "1000 exceeds max_backlog 500"},
		{name: "tenant soft over default max", edit: func(c *Config) {
			c.Tenants = []Tenant{{ID: "a", Limits: tenant.Limits{SoftBacklog: ptr(10001)}}}
		}, want: []string{"tenants[0].soft_backlog"}},

		{name: "push url https", edit: func(c *Config) { c.Worker.PushURL = "https://app.internal/jobs?x=1" }},
		{name: "push url no scheme", edit: func(c *Config) { c.Worker.PushURL = "127.0.0.1:80/" }, want: []string{"worker.push_url"}},
		{name: "push url ftp", edit: func(c *Config) { c.Worker.PushURL = "ftp://host/" }, want: []string{"worker.push_url"}, reason: "http or https"},
		{name: "push url no host", edit: func(c *Config) { c.Worker.PushURL = "http:///path" }, want: []string{"worker.push_url"}},
		{name: "push url empty", edit: func(c *Config) { c.Worker.PushURL = "" }, want: []string{"worker.push_url"}},
		{name: "push url unparsable", edit: func(c *Config) { c.Worker.PushURL = "http://[::1" }, want: []string{"worker.push_url"}},
		{name: "mime type with params", edit: func(c *Config) { c.Worker.MimeType = "text/plain; charset=utf-8" }},
		{name: "mime type empty", edit: func(c *Config) { c.Worker.MimeType = "" }, want: []string{"worker.mime_type"}},
		{name: "mime type junk", edit: func(c *Config) { c.Worker.MimeType = "a b" }, want: []string{"worker.mime_type"}},
		{name: "connections 1", edit: func(c *Config) { c.Worker.Connections = 1 }},
		{name: "connections 100", edit: func(c *Config) { c.Worker.Connections = 100 }},
		{name: "connections 0", edit: func(c *Config) { c.Worker.Connections = 0 }, want: []string{"worker.connections"}},
		{name: "connections 101", edit: func(c *Config) { c.Worker.Connections = 101 }, want: []string{"worker.connections"}},
		{name: "watchers per queue 0: every queue", edit: func(c *Config) { c.Worker.WatchersPerQueue = 0 }},
		{name: "watchers per queue 1", edit: func(c *Config) { c.Worker.WatchersPerQueue = 1 }},
		{name: "watchers per queue above any fleet", edit: func(c *Config) { c.Worker.WatchersPerQueue = 1000 }},
		{name: "watchers per queue negative", edit: func(c *Config) { c.Worker.WatchersPerQueue = -1 }, want: []string{"worker.watchers_per_queue"}, reason: "must not be negative"},
		{name: "max retries 1", edit: func(c *Config) { c.Worker.MaxRetries = 1 }},
		{name: "max retries 100", edit: func(c *Config) { c.Worker.MaxRetries = 100 }},
		{name: "max retries 0", edit: func(c *Config) { c.Worker.MaxRetries = 0 }, want: []string{"worker.max_retries"}},
		{name: "max retries 101", edit: func(c *Config) { c.Worker.MaxRetries = 101 }, want: []string{"worker.max_retries"}},
		{name: "connect timeout 0", edit: func(c *Config) { c.Worker.ConnectTimeout = 0 }, want: []string{"worker.connect_timeout"}},
		{name: "inactivity timeout 0", edit: func(c *Config) { c.Worker.InactivityTimeout = 0 }, want: []string{"worker.inactivity_timeout"}},
		{name: "inactivity timeout 12h", edit: func(c *Config) { c.Worker.InactivityTimeout = 12 * time.Hour }},
		{name: "inactivity timeout over 12h", edit: func(c *Config) { c.Worker.InactivityTimeout = 13 * time.Hour }, want: []string{"worker.inactivity_timeout"}},
		{name: "visibility 0", edit: func(c *Config) { c.Worker.VisibilityTimeout = 0 }, want: []string{"worker.visibility_timeout"}, reason: "must be 1s–12h0m0s"},
		{name: "visibility 1s", edit: func(c *Config) { c.Worker.VisibilityTimeout = time.Second }},
		{name: "visibility 12h", edit: func(c *Config) { c.Worker.VisibilityTimeout = 12 * time.Hour }},
		{name: "visibility over 12h", edit: func(c *Config) { c.Worker.VisibilityTimeout = 12*time.Hour + time.Second }, want: []string{"worker.visibility_timeout"}, reason: "must be 1s–12h0m0s"},
		{name: "visibility negative", edit: func(c *Config) { c.Worker.VisibilityTimeout = -time.Second }, want: []string{"worker.visibility_timeout"}},
		{name: "error visibility 0", edit: func(c *Config) { c.Worker.ErrorVisibilityTimeout = 0 }},
		{name: "error visibility over 12h", edit: func(c *Config) { c.Worker.ErrorVisibilityTimeout = 13 * time.Hour }, want: []string{"worker.error_visibility_timeout"}},
		{name: "error visibility negative", edit: func(c *Config) { c.Worker.ErrorVisibilityTimeout = -1 }, want: []string{"worker.error_visibility_timeout"}},
		{name: "backlog age 0", edit: func(c *Config) { c.Worker.BacklogAge = 0 }},
		{name: "backlog age negative", edit: func(c *Config) { c.Worker.BacklogAge = -time.Minute }, want: []string{"worker.backlog_age"}},
		{name: "drop age", edit: func(c *Config) { c.Worker.DropAge = 72 * time.Hour }},
		{name: "drop age negative", edit: func(c *Config) { c.Worker.DropAge = -time.Minute }, want: []string{"worker.drop_age"}},

		{name: "max message size bounds", edit: func(c *Config) { c.Gateway.MaxMessageSize = 1024 }},
		{name: "max message size 1MiB", edit: func(c *Config) { c.Gateway.MaxMessageSize = 1 << 20 }},
		{name: "max message size small", edit: func(c *Config) { c.Gateway.MaxMessageSize = 1023 }, want: []string{"gateway.max_message_size"}},
		{name: "max message size big", edit: func(c *Config) { c.Gateway.MaxMessageSize = 1<<20 + 1 }, want: []string{"gateway.max_message_size"}},
		{name: "idempotency window 0", edit: func(c *Config) { c.Gateway.IdempotencyWindow = 0 }, want: []string{"gateway.idempotency_window"}},
		{name: "idempotency window under 1s", edit: func(c *Config) { c.Gateway.IdempotencyWindow = time.Millisecond }, want: []string{"gateway.idempotency_window"}},
		{name: "send window 0", edit: func(c *Config) { c.Gateway.SendWindow = 0 }},
		{name: "send window 1s", edit: func(c *Config) { c.Gateway.SendWindow = time.Second }},
		{name: "send window over 1s", edit: func(c *Config) { c.Gateway.SendWindow = time.Second + time.Millisecond }, want: []string{"gateway.send_window"}},
		{name: "send window negative", edit: func(c *Config) { c.Gateway.SendWindow = -time.Millisecond }, want: []string{"gateway.send_window"}},

		{name: "every problem reported", edit: func(c *Config) {
			c.Listen = "x"
			c.Backend = "x"
			c.Worker.Connections = 0
			c.Tenants = []Tenant{{ID: ""}}
		}, want: []string{"listen", "backend", "tenants[0].id", "worker.connections"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.edit(&c)
			err := c.Validate()
			if diff := cmp.Diff(tt.want, keysOfErr(t, err)); diff != "" {
				t.Fatalf("Validate() keys (-want +got):\n%s\nerror: %v", diff, err)
			}
			if tt.reason != "" {
				if got := problemsOf(t, err)[0].Reason; !strings.Contains(got, tt.reason) {
					t.Errorf("reason = %q, want it to contain %q", got, tt.reason)
				}
			}
		})
	}
}
