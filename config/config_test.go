package config

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/fairq/fairq/tenant"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	// The values of the documented defaults, written out again so that a change to
	// Default shows here.
	want := Config{
		Listen:  "127.0.0.1:8080",
		Backend: "memory",
		Admin:   Admin{NoisyInFlightShare: 0.1, NoisyMinInFlight: 30},
		SQS:     SQS{Region: "us-east-1", QueuePrefix: "fairq"},
		Redis:   Redis{Mode: "single", FailOpen: true},
		Pool:    Pool{Queues: 8, ShardSize: 2},
		Defaults: tenant.Limits{
			IngestRate: ptr(100.0), IngestBurst: ptr(200),
			ProcessRate: ptr(100.0), ProcessBurst: ptr(100),
			Concurrency: ptr(10), SoftBacklog: ptr(1000), MaxBacklog: ptr(10000),
			DropAge: ptr(tenant.Duration(0)),
		},
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
			AcceptableLatency:      10 * time.Second,
			DedupeWindow:           time.Hour,
			WatchersPerQueue:       2,
		},
		Gateway: Gateway{MaxMessageSize: 262144, IdempotencyWindow: 24 * time.Hour, SendTimeout: 3 * time.Second,
			SendWindow: 10 * time.Millisecond, MaxInflightBytes: 64 << 20, MaxTenantInflightBytes: 16 << 20},
		Log: Log{Level: "info"},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Default() (-want +got):\n%s", diff)
	}
}

func TestDefaultIsFresh(t *testing.T) {
	t.Parallel()
	a := Default()
	*a.Defaults.IngestRate = 1
	if b := Default(); *b.Defaults.IngestRate != 100 {
		t.Errorf("changing one Default() changed another: ingest rate %v", *b.Defaults.IngestRate)
	}
}

// TestExampleFile keeps the documented example at the repository root in
// step with Default: it must set every key to its default.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	got, err := Load("../fairq.example.yaml", nil)
	if err != nil {
		t.Fatalf("Load(example) = %v", err)
	}
	want := Default()
	want.Tenants = []Tenant{
		{
			ID:      "acme",
			APIKeys: []string{"sha256:17f5be860f87d948cde6f12382a03d5c215d5ec965720e80f2844fdb4041d20f"},
			Limits:  tenant.Limits{IngestRate: ptr(500.0)},
		},
		{
			ID:      "batch.reports",
			APIKeys: []string{"sha256:d087fb7c0adf270f5be1f4c015f22c2955a1fef05021230ff13df4cd9c3bef39"},
			Limits:  tenant.Limits{Concurrency: ptr(2), ProcessRate: ptr(5.5), MaxBacklog: ptr(500), SoftBacklog: ptr(100)},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("example (-want +got):\n%s", diff)
	}
}

// TestExampleFileSetsEveryKey checks that the example writes out every
// key, so that a key added to Config must be documented there.
func TestExampleFileSetsEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../fairq.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var written []string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			switch {
			case k == "tenants":
			case v.Kind == yaml.MappingNode:
				walk(v, joinPath(path, k))
			default:
				written = append(written, joinPath(path, k))
			}
		}
	}
	walk(doc.Content[0], "")
	var keys []string
	for _, k := range envKeys() {
		keys = append(keys, k.path)
	}
	if diff := cmp.Diff(keys, written); diff != "" {
		t.Errorf("keys of fairq.example.yaml (-Config +file):\n%s", diff)
	}
}
