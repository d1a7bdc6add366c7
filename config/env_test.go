package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/tenant"
)

func TestEnvVars(t *testing.T) {
	t.Parallel()
	got := EnvVars()
	want := []string{
		"FAIRQ_LISTEN",
		"FAIRQ_ADMIN_TOKEN_SHA256", "FAIRQ_ADMIN_NOISY_IN_FLIGHT_SHARE", "FAIRQ_ADMIN_NOISY_MIN_IN_FLIGHT",
		"FAIRQ_BACKEND",
		"FAIRQ_SQS_REGION", "FAIRQ_SQS_ENDPOINT", "FAIRQ_SQS_QUEUE_PREFIX", "FAIRQ_SQS_MESSAGE_GROUP_ID",
		"FAIRQ_REDIS_MODE", "FAIRQ_REDIS_ADDR", "FAIRQ_REDIS_ADDRS", "FAIRQ_REDIS_MASTER_NAME", "FAIRQ_REDIS_FAIL_OPEN", "FAIRQ_REDIS_USERNAME", "FAIRQ_REDIS_PASSWORD", "FAIRQ_REDIS_TLS",
		"FAIRQ_POOL_QUEUES", "FAIRQ_POOL_SHARD_SIZE",
		"FAIRQ_DEFAULTS_INGEST_RATE", "FAIRQ_DEFAULTS_INGEST_BURST",
		"FAIRQ_DEFAULTS_PROCESS_RATE", "FAIRQ_DEFAULTS_PROCESS_BURST",
		"FAIRQ_DEFAULTS_CONCURRENCY", "FAIRQ_DEFAULTS_SOFT_BACKLOG", "FAIRQ_DEFAULTS_MAX_BACKLOG",
		"FAIRQ_DEFAULTS_DROP_AGE",
		"FAIRQ_WORKER_PUSH_URL", "FAIRQ_WORKER_MIME_TYPE", "FAIRQ_WORKER_CONNECTIONS",
		"FAIRQ_WORKER_CONNECT_TIMEOUT", "FAIRQ_WORKER_INACTIVITY_TIMEOUT",
		"FAIRQ_WORKER_VISIBILITY_TIMEOUT", "FAIRQ_WORKER_ERROR_VISIBILITY_TIMEOUT",
		"FAIRQ_WORKER_MAX_RETRIES", "FAIRQ_WORKER_BACKLOG_AGE", "FAIRQ_WORKER_DROP_AGE",
		"FAIRQ_WORKER_CRON_FILE", "FAIRQ_WORKER_ACCEPTABLE_LATENCY", "FAIRQ_WORKER_DEDUPE_WINDOW",
		"FAIRQ_WORKER_WATCHERS_PER_QUEUE",
		"FAIRQ_GATEWAY_MAX_MESSAGE_SIZE", "FAIRQ_GATEWAY_IDEMPOTENCY_WINDOW", "FAIRQ_GATEWAY_SEND_TIMEOUT",
		"FAIRQ_GATEWAY_SEND_WINDOW", "FAIRQ_GATEWAY_MAX_INFLIGHT_BYTES", "FAIRQ_GATEWAY_MAX_TENANT_INFLIGHT_BYTES",
		"FAIRQ_LOG_LEVEL", "FAIRQ_LOG_FORMAT",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EnvVars() (-want +got):\n%s", diff)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(got) {
		t.Errorf("EnvVars() has a name twice: %v", got)
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		edit func(c *Config)
	}{
		{"nothing set", nil, func(*Config) {}},
		{"empty value is unset", map[string]string{"FAIRQ_LISTEN": "", "FAIRQ_POOL_QUEUES": ""}, func(*Config) {}},
		{"strings", map[string]string{
			"FAIRQ_LISTEN":               "[::]:9090",
			"FAIRQ_BACKEND":              "sqs",
			"FAIRQ_ADMIN_TOKEN_SHA256":   strings.Repeat("0f", 32),
			"FAIRQ_SQS_QUEUE_PREFIX":     "prod_q",
			"FAIRQ_SQS_ENDPOINT":         "http://127.0.0.1:4566",
			"FAIRQ_SQS_MESSAGE_GROUP_ID": "tenant",
			"FAIRQ_REDIS_ADDR":           "10.0.0.1:6379",
			"FAIRQ_WORKER_PUSH_URL":      "http://app:8000/jobs",
			"FAIRQ_WORKER_CRON_FILE":     "/etc/cron.yaml",
		}, func(c *Config) {
			c.Listen = "[::]:9090"
			c.Backend = "sqs"
			c.Admin.TokenSHA256 = strings.Repeat("0f", 32)
			c.SQS.QueuePrefix = "prod_q"
			c.SQS.Endpoint = "http://127.0.0.1:4566"
			c.SQS.MessageGroupID = "tenant"
			c.Redis.Addr = "10.0.0.1:6379"
			c.Worker.PushURL = "http://app:8000/jobs"
			c.Worker.CronFile = "/etc/cron.yaml"
		}},
		{"a list of strings, comma-separated", map[string]string{
			"FAIRQ_REDIS_MODE":  "cluster",
			"FAIRQ_REDIS_ADDRS": "10.0.0.1:6379, 10.0.0.2:6379,,10.0.0.3:6379",
		}, func(c *Config) {
			c.Redis.Mode = "cluster"
			c.Redis.Addrs = []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}
		}},
		{"numbers, booleans and durations", map[string]string{
			"FAIRQ_REDIS_FAIL_OPEN":            "false",
			"FAIRQ_POOL_QUEUES":                "32",
			"FAIRQ_POOL_SHARD_SIZE":            "4",
			"FAIRQ_DEFAULTS_INGEST_RATE":       "12.5",
			"FAIRQ_DEFAULTS_MAX_BACKLOG":       "20000",
			"FAIRQ_WORKER_VISIBILITY_TIMEOUT":  "1m30s",
			"FAIRQ_WORKER_DROP_AGE":            "0",
			"FAIRQ_GATEWAY_IDEMPOTENCY_WINDOW": "1h",
			"FAIRQ_GATEWAY_SEND_WINDOW":        "0",
		}, func(c *Config) {
			c.Redis.FailOpen = false
			c.Pool = Pool{Queues: 32, ShardSize: 4}
			c.Defaults.IngestRate = ptr(12.5)
			c.Defaults.MaxBacklog = ptr(20000)
			c.Worker.VisibilityTimeout = 90 * time.Second
			c.Gateway.IdempotencyWindow = time.Hour
			c.Gateway.SendWindow = 0
		}},
		{"lower-case names are not read", map[string]string{"fairq_listen": ":1", "FAIRQ_listen": ":1"}, func(*Config) {}},
		{"tenants are not read", map[string]string{"FAIRQ_TENANTS": "acme", "FAIRQ_TENANTS_0_ID": "acme"}, func(*Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(nil, env(tt.env))
			if err != nil {
				t.Fatalf("Parse error: %v", err)
			}
			want := Default()
			tt.edit(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvOverridesFile(t *testing.T) {
	t.Parallel()
	data := "listen: :1\nworker:\n  connections: 5\n  push_url: http://file/\ntenants: [{id: a, concurrency: 2}]\n"
	got, err := Parse([]byte(data), env(map[string]string{
		"FAIRQ_WORKER_CONNECTIONS":        "7",
		"FAIRQ_DEFAULTS_CONCURRENCY":      "3",
		"FAIRQ_WORKER_WATCHERS_PER_QUEUE": "0",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Listen = ":1"                                                             // file
	want.Worker.Connections = 7                                                    // environment over file
	want.Worker.PushURL = "http://file/"                                           // file
	want.Defaults.Concurrency = ptr(3)                                             // environment over default
	want.Worker.WatchersPerQueue = 0                                               // environment over default
	want.Tenants = []Tenant{{ID: "a", Limits: tenant.Limits{Concurrency: ptr(2)}}} // a tenant's own limit stays
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if r := tenant.Resolve(got.Defaults, got.Tenants[0].Limits); r.Concurrency != 2 || r.IngestRate != 100 {
		t.Errorf("resolved limits = %+v, want concurrency 2, ingest rate 100", r)
	}
}

func TestEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want []KeyError // Reason is a substring
	}{
		{"bad integer", map[string]string{"FAIRQ_WORKER_CONNECTIONS": "many"}, []KeyError{{"FAIRQ_WORKER_CONNECTIONS", 0, `invalid integer "many"`}}},
		{"fractional integer", map[string]string{"FAIRQ_POOL_QUEUES": "1.5"}, []KeyError{{"FAIRQ_POOL_QUEUES", 0, `invalid integer "1.5"`}}},
		{"integer with spaces", map[string]string{"FAIRQ_POOL_QUEUES": " 8"}, []KeyError{{"FAIRQ_POOL_QUEUES", 0, "invalid integer"}}},
		{"bad number", map[string]string{"FAIRQ_DEFAULTS_INGEST_RATE": "fast"}, []KeyError{{"FAIRQ_DEFAULTS_INGEST_RATE", 0, `invalid number "fast"`}}},
		{"NaN", map[string]string{"FAIRQ_DEFAULTS_PROCESS_RATE": "NaN"}, []KeyError{{"FAIRQ_DEFAULTS_PROCESS_RATE", 0, "invalid number"}}},
		{"infinity", map[string]string{"FAIRQ_DEFAULTS_PROCESS_RATE": "+Inf"}, []KeyError{{"FAIRQ_DEFAULTS_PROCESS_RATE", 0, "invalid number"}}},
		{"bad boolean", map[string]string{"FAIRQ_REDIS_FAIL_OPEN": "yes"}, []KeyError{{"FAIRQ_REDIS_FAIL_OPEN", 0, `invalid boolean "yes"`}}},
		{"duration without unit", map[string]string{"FAIRQ_WORKER_BACKLOG_AGE": "300"}, []KeyError{{"FAIRQ_WORKER_BACKLOG_AGE", 0, `invalid duration "300"`}}},
		{"every bad variable", map[string]string{
			"FAIRQ_POOL_QUEUES":                "x",
			"FAIRQ_WORKER_DROP_AGE":            "y",
			"FAIRQ_GATEWAY_IDEMPOTENCY_WINDOW": "z",
		}, []KeyError{
			{"FAIRQ_POOL_QUEUES", 0, "invalid integer"},
			{"FAIRQ_WORKER_DROP_AGE", 0, "invalid duration"},
			{"FAIRQ_GATEWAY_IDEMPOTENCY_WINDOW", 0, "invalid duration"},
		}},
		{"valid type, invalid value", map[string]string{"FAIRQ_WORKER_CONNECTIONS": "500"}, []KeyError{{"worker.connections", 0, "must be 1–100, got 500"}}},
		{"invalid value for a key", map[string]string{"FAIRQ_BACKEND": "kafka"}, []KeyError{{"backend", 0, "unknown backend"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(nil, env(tt.env))
			got := problemsOf(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("Parse = %v, want %d problems", err, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Key != w.Key || g.Line != w.Line || !strings.Contains(g.Reason, w.Reason) {
					t.Errorf("problem %d = %#v, want key %q, line %d, reason containing %q", i, *g, w.Key, w.Line, w.Reason)
				}
			}
		})
	}
}

func TestEnvWithFileErrors(t *testing.T) {
	t.Parallel()
	// Problems of the file and of the environment come together.
	_, err := Parse([]byte("lisen: x\n"), env(map[string]string{"FAIRQ_POOL_QUEUES": "x"}))
	if diff := cmp.Diff([]string{"lisen", "FAIRQ_POOL_QUEUES"}, keysOfErr(t, err)); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}
