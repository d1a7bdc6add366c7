package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/tenant"
)

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for name, data := range map[string]string{
		"nil":           "",
		"blank":         "\n\n",
		"comments only": "# nothing here\n   # still nothing\n",
		"null document": "~\n",
		"empty mapping": "{}\n",
		"explicit doc":  "---\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(data), nil)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", data, err)
			}
			if diff := cmp.Diff(Default(), got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", data, diff)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		edit func(c *Config) // applied to Default() to give the want
	}{
		{
			name: "scalars of every type",
			yaml: `
listen: 0.0.0.0:9000
backend: sqs
redis: {addr: "redis:6379", fail_open: false}
pool: {queues: 16, shard_size: 3}
defaults: {ingest_rate: 2.5, ingest_burst: 5}
worker:
  connect_timeout: 1.5s
  drop_age: 72h
  max_retries: 3
gateway: {max_message_size: 1048576}
`,
			edit: func(c *Config) {
				c.Listen = "0.0.0.0:9000"
				c.Backend = "sqs"
				c.Redis = Redis{Mode: RedisSingle, Addr: "redis:6379", FailOpen: false}
				c.Pool = Pool{Queues: 16, ShardSize: 3}
				c.Defaults.IngestRate = ptr(2.5)
				c.Defaults.IngestBurst = ptr(5)
				c.Worker.ConnectTimeout = 1500 * time.Millisecond
				c.Worker.DropAge = 72 * time.Hour
				c.Worker.MaxRetries = 3
				c.Gateway.MaxMessageSize = 1 << 20
			},
		},
		{
			name: "integer rate and bare zero duration",
			yaml: "defaults: {process_rate: 7}\nworker: {drop_age: 0, error_visibility_timeout: \"0\"}\n",
			edit: func(c *Config) { c.Defaults.ProcessRate = ptr(7.0); c.Worker.ErrorVisibilityTimeout = 0 },
		},
		{
			name: "a key with no value keeps its default",
			yaml: "listen:\nworker:\n  push_url: ~\ndefaults:\n  concurrency: null\n",
			edit: func(*Config) {},
		},
		{
			name: "numbers are read as strings",
			yaml: "worker: {cron_file: 123}\nsqs: {queue_prefix: \"42\"}\n",
			edit: func(c *Config) { c.Worker.CronFile = "123"; c.SQS.QueuePrefix = "42" },
		},
		{
			name: "tenants with unset limits",
			yaml: `
tenants:
  - id: acme
    api_keys: ["` + hashA + `"]
    ingest_rate: 500
  - id: b
    concurrency: 2
`,
			edit: func(c *Config) {
				c.Tenants = []Tenant{
					{ID: "acme", APIKeys: []string{hashA}, Limits: tenant.Limits{IngestRate: ptr(500.0)}},
					{ID: "b", Limits: tenant.Limits{Concurrency: ptr(2)}},
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.yaml), nil)
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

func TestParseMerge(t *testing.T) {
	t.Parallel()
	data := `
defaults: &defaults
  concurrency: 4
tenants:
  - &small {id: small, concurrency: 1, max_backlog: 1000, soft_backlog: 10}
  - &fast {id: fast, ingest_rate: 900, concurrency: 5}
  - {id: a, <<: *small}
  - {id: b, <<: [*fast, *small]}
  - {concurrency: 3, <<: *small, id: c}
  - {<<: *defaults, id: d}
`
	got, err := Parse([]byte(data), nil)
	if err != nil {
		t.Fatalf("Parse error: %v", err)
	}
	small := tenant.Limits{Concurrency: ptr(1), MaxBacklog: ptr(1000), SoftBacklog: ptr(10)}
	fast := tenant.Limits{IngestRate: ptr(900.0), Concurrency: ptr(5)}
	want := Default()
	want.Defaults.Concurrency = ptr(4)
	want.Tenants = []Tenant{
		{ID: "small", Limits: small},
		{ID: "fast", Limits: fast},
		{ID: "a", Limits: small},
		// Among merged mappings the first listed wins (fast's concurrency).
		{ID: "b", Limits: tenant.Limits{IngestRate: ptr(900.0), Concurrency: ptr(5), MaxBacklog: ptr(1000), SoftBacklog: ptr(10)}},
		// Keys written in the mapping win, wherever the merge key stands.
		{ID: "c", Limits: tenant.Limits{Concurrency: ptr(3), MaxBacklog: ptr(1000), SoftBacklog: ptr(10)}},
		{ID: "d", Limits: tenant.Limits{Concurrency: ptr(4)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []KeyError // Reason is a substring of the reason
	}{
		{"unknown key", "lisen: x\n", []KeyError{{"lisen", 1, "unknown key"}}},
		{"unknown nested key", "worker:\n  mime_type: text/plain\n  push_ur: http://x/\n", []KeyError{{"worker.push_ur", 3, "unknown key"}}},
		{"unknown tenant key", "tenants:\n  - id: a\n    ingest: 5\n", []KeyError{{"tenants[0].ingest", 3, "unknown key"}}},
		{"keys are case sensitive", "Listen: a:1\n", []KeyError{{"Listen", 1, "unknown key"}}},
		{"go field names are not keys", "worker: {PushURL: http://x/}\n", []KeyError{{"worker.PushURL", 1, "unknown key"}}},
		{"every unknown key", "a: 1\nworker:\n  b: 2\npool: {c: 3}\n", []KeyError{
			{"a", 1, "unknown key"}, {"worker.b", 3, "unknown key"}, {"pool.c", 4, "unknown key"},
		}},
		{"repeated key", "listen: a:1\nbackend: sqs\nlisten: b:2\n", []KeyError{{"listen", 3, "repeated (first at line 1)"}}},

		{"bad duration", "worker:\n  connect_timeout: 5 seconds\n", []KeyError{{"worker.connect_timeout", 2, `invalid duration "5 seconds"`}}},
		{"duration without unit", "worker: {backlog_age: 30}\n", []KeyError{{"worker.backlog_age", 1, `invalid duration "30"`}}},
		{"bad tenant duration", "tenants:\n  - id: a\n    drop_age: 3 days\n", []KeyError{{"tenants[0].drop_age", 3, `invalid duration "3 days"`}}},
		{"duration as a list", "gateway:\n  idempotency_window: [1h]\n", []KeyError{{"gateway.idempotency_window", 2, "want a duration such as 30s, got a list"}}},
		{"bad integer", "pool: {queues: many}\n", []KeyError{{"pool.queues", 1, `invalid integer "many"`}}},
		{"fractional integer", "pool: {queues: 1.5}\n", []KeyError{{"pool.queues", 1, `invalid integer "1.5"`}}},
		{"quoted integer", "pool: {queues: \"8\"}\n", []KeyError{{"pool.queues", 1, `invalid integer "8"`}}},
		{"integer overflow", "worker: {connections: 99999999999999999999}\n", []KeyError{{"worker.connections", 1, "invalid integer"}}},
		{"bad number", "defaults: {ingest_rate: fast}\n", []KeyError{{"defaults.ingest_rate", 1, `invalid number "fast"`}}},
		{"bad tenant number", "tenants:\n- id: a\n  process_rate: '5'\n", []KeyError{{"tenants[0].process_rate", 3, `invalid number "5"`}}},
		{"bad boolean", "redis: {fail_open: maybe}\n", []KeyError{{"redis.fail_open", 1, `invalid boolean (true or false) "maybe"`}}},
		{"string as mapping", "listen: {host: a}\n", []KeyError{{"listen", 1, "want string, got a mapping"}}},
		{"mapping as string", "worker: fast\n", []KeyError{{"worker", 1, "want a mapping of keys, got a single value"}}},
		{"mapping as boolean", "redis: true\n", []KeyError{{"redis", 1, "want a mapping of keys, got a boolean"}}},
		{"list as string", "tenants: acme\n", []KeyError{{"tenants", 1, "want a list, got a single value"}}},
		{"api keys as string", "tenants: [{id: a, api_keys: k}]\n", []KeyError{{"tenants[0].api_keys", 1, "want a list"}}},
		{"tenant as list", "tenants:\n  - [a]\n", []KeyError{{"tenants[0]", 2, "want a mapping of keys, got a list"}}},
		{"root as list", "- a\n- b\n", []KeyError{{"(root)", 1, "want a mapping of keys, got a list"}}},
		{"root as scalar", "hello\n", []KeyError{{"(root)", 1, "want a mapping of keys, got a single value"}}},
		{"key as list", "? [a]\n: b\n", []KeyError{{"(root)", 1, "keys must be plain names, got a list"}}},
		{"merge of a scalar", "tenants:\n  - {id: a, <<: 5}\n", []KeyError{{"tenants[0].<<", 2, "can merge only mappings, got an integer"}}},
		{"merge of itself", "tenants:\n  - &a {id: x, <<: *a}\n", []KeyError{{"tenants[0].<<", 2, "merges nested deeper than 16"}}},
		{"file errors come before validation", "worker: {connections: 0, max_retries: x}\n", []KeyError{{"worker.max_retries", 1, "invalid integer"}}},
		{"validation names the line", "worker:\n  connections: 0\n", []KeyError{{"worker.connections", 2, "must be 1–100, got 0"}}},
		{"message group names the line", "sqs:\n  region: eu-west-1\n  message_group_id: tenant_id\n", []KeyError{{"sqs.message_group_id", 3, `unknown value "tenant_id"`}}},
		{"validation names tenant lines", "tenants:\n  - id: a\n    api_keys:\n      - sha256:x\n  - id: a\n", []KeyError{
			{"tenants[0].api_keys[0]", 4, "want sha256:"}, {"tenants[1].id", 5, "already defined"},
		}},
		{"validation of a default has no line", "worker: {max_retries: 3}\npool: {queues: 1}\n", []KeyError{{"pool.shard_size", 0, "got 2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.yaml), nil)
			got := problemsOf(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("Parse(%q) = %v, want %d problems", tt.yaml, err, len(tt.want))
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

func TestParseErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("worker:\n  push_ur: x\n  connect_timeout: 5 seconds\n"), nil)
	want := "line 2: worker.push_ur: unknown key\n" +
		`line 3: worker.connect_timeout: invalid duration "5 seconds": want a Go duration such as 30s or 5m`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error =\n%v\nwant\n%s", err, want)
	}
}

func TestParseSyntax(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unclosed flow", "listen: [\n", "line"},
		{"tab indent", "worker:\n\tpush_url: x\n", "line 2"},
		{"two documents", "listen: a:1\n---\nlisten: b:2\n", "line 2: a second YAML document"},
		{"bad second document", "listen: a:1\n---\n[\n", "yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.yaml), nil)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) = %v, want ErrInvalid", tt.yaml, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) = %q, want it to contain %q", tt.yaml, err, tt.want)
			}
		})
	}
}

func TestParseAliasBomb(t *testing.T) {
	t.Parallel()
	// Each tenant merges the previous one ten times: 10^8 merges unbounded.
	var b strings.Builder
	b.WriteString("tenants:\n  - &t0 {id: t0, concurrency: 1}\n")
	for i := 1; i <= 8; i++ {
		b.WriteString("  - &t" + string(rune('0'+i)) + " {id: t" + string(rune('0'+i)) + ", <<: [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*t" + string(rune('0'+i-1)))
		}
		b.WriteString("]}\n")
	}
	_, err := Parse([]byte(b.String()), nil)
	if err == nil || !strings.Contains(err.Error(), "more than 100000 nodes") {
		t.Errorf("Parse(alias bomb) = %v, want the node limit", err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	t.Run("no file", func(t *testing.T) {
		got, err := Load("", env(map[string]string{"FAIRQ_LISTEN": ":1"}))
		if err != nil {
			t.Fatal(err)
		}
		if got.Listen != ":1" {
			t.Errorf("Listen = %q, want :1", got.Listen)
		}
	})
	t.Run("file then environment", func(t *testing.T) {
		path := write("ok.yaml", "listen: :2\nbackend: sqs\n")
		got, err := Load(path, env(map[string]string{"FAIRQ_LISTEN": ":3"}))
		if err != nil {
			t.Fatal(err)
		}
		if got.Listen != ":3" || got.Backend != "sqs" {
			t.Errorf("Listen, Backend = %q, %q; want :3, sqs", got.Listen, got.Backend)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "none.yaml"), nil)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
		}
		if errors.Is(err, ErrInvalid) {
			t.Errorf("Load(missing) = %v, should not match ErrInvalid", err)
		}
	})
	t.Run("bad file names the file", func(t *testing.T) {
		path := write("bad.yaml", "lisen: x\n")
		_, err := Load(path, nil)
		want := "config " + path + ": line 1: lisen: unknown key"
		if err == nil || err.Error() != want {
			t.Errorf("Load(bad) = %v, want %q", err, want)
		}
		if diff := cmp.Diff([]string{"lisen"}, keysOfErr(t, err)); diff != "" {
			t.Errorf("keys (-want +got):\n%s", diff)
		}
	})
}

func TestParseErrorLines(t *testing.T) {
	t.Parallel()
	// A key the environment overrides is no longer the file's: no line.
	_, err := Parse([]byte("listen: :1\nworker:\n  connections: 0\n"), env(map[string]string{"FAIRQ_WORKER_CONNECTIONS": "101"}))
	got := problemsOf(t, err)
	if len(got) != 1 || got[0].Key != "worker.connections" || got[0].Line != 0 {
		t.Errorf("Parse = %v, want worker.connections with no line", err)
	}
}

func TestParseDoesNotEchoKeys(t *testing.T) {
	t.Parallel()
	const raw = "fq_live_s3cr3tk3yvalue0123456789"
	for _, data := range []string{
		"tenants: [{id: a, api_keys: " + raw + "}]\n",
		"tenants: [{id: a, api_keys: [" + raw + "]}]\n",
		"admin: " + raw + "\n",
		"admin: {token_sha256: " + raw + "}\n",
	} {
		_, err := Parse([]byte(data), nil)
		if err == nil {
			t.Fatalf("Parse(%q) accepted a raw key", data)
		}
		if strings.Contains(err.Error(), raw) {
			t.Errorf("Parse error %q quotes the key", err)
		}
	}
}
