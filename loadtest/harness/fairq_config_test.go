package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/tenant"
)

func TestSystemConfigYAML(t *testing.T) {
	sc, err := NewScenario(ScenarioNoisy, false)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		queues, shard int
		processRate   float64
		concurrency   int
		backlogAge    time.Duration
	}
	tests := []struct {
		mode    Mode
		backend string
		want    want
	}{
		{ModeSingle, backendMemory, want{1, 1, unlimited, unlimited, 0}},
		{ModeShuffle, backendMemory, want{8, 2, unlimited, unlimited, 0}},
		{ModeFull, backendMemory, want{8, 2, sc.Limits.ProcessRate, sc.Limits.Concurrency, sc.BacklogAge}},
		{ModeFull, backendSQS, want{8, 2, sc.Limits.ProcessRate, sc.Limits.Concurrency, sc.BacklogAge}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+tt.backend, func(t *testing.T) {
			c := systemConfig{scenario: sc, mode: tt.mode, backend: tt.backend, prefix: "lt0123abcd",
				services: Services{SQSEndpoint: "http://127.0.0.1:9324", RedisAddr: "127.0.0.1:6379"},
				pushURL:  "http://127.0.0.1:9999/", creds: newCredentials(sc.Tenants)}
			cfg, err := config.Parse(c.yaml(), func(string) string { return "" })
			if err != nil {
				t.Fatalf("fairq rejects the generated configuration: %v\n%s", err, c.yaml())
			}
			d := tenant.Resolve(cfg.Defaults, tenant.Limits{})
			got := want{cfg.Pool.Queues, cfg.Pool.ShardSize, d.ProcessRate, d.Concurrency, cfg.Worker.BacklogAge}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("mode settings (-want +got):\n%s", diff)
			}
			if cfg.Backend != tt.backend || cfg.Worker.PushURL != c.pushURL || cfg.Worker.Connections != sc.Connections {
				t.Errorf("backend %q, push URL %q, connections %d", cfg.Backend, cfg.Worker.PushURL, cfg.Worker.Connections)
			}
			if tt.backend == backendSQS && cfg.Redis.Addr != c.services.RedisAddr {
				t.Errorf("redis %q, want %q", cfg.Redis.Addr, c.services.RedisAddr)
			}
			if len(cfg.Tenants) != len(sc.Tenants) {
				t.Fatalf("%d tenants, want %d", len(cfg.Tenants), len(sc.Tenants))
			}
			for i, ct := range cfg.Tenants {
				if ct.ID != sc.Tenants[i].ID || len(ct.APIKeys) != 1 || ct.APIKeys[0] != tenant.HashKey(c.creds.keys[ct.ID]) {
					t.Errorf("tenant %d: %+v does not carry the hash of its key", i, ct)
				}
			}
			if d.MaxBacklog != sc.MaxBacklog || d.SoftBacklog != sc.SoftBacklog || d.IngestRate != unlimited {
				t.Errorf("front door %+v, want the scenario's backpressure and no rate limit", d)
			}
		})
	}
}

func TestScenarios(t *testing.T) {
	for _, name := range ScenarioNames {
		for _, short := range []bool{false, true} {
			sc, err := NewScenario(name, short)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := sc.validate(); err != nil {
				t.Errorf("%s (short %t): %v", name, short, err)
			}
			if len(sc.Quiet()) == 0 {
				t.Errorf("%s: no quiet tenants", name)
			}
			b := sc.WithoutOthers()
			for _, ten := range b.Tenants {
				if ten.Role != RoleQuiet || ten.PoisonEvery != 0 {
					t.Errorf("%s baseline keeps %+v", name, ten)
				}
			}
		}
	}
	if _, err := NewScenario("nope", false); err == nil {
		t.Error("NewScenario accepted an unknown name")
	}
}

func TestParseModes(t *testing.T) {
	tests := []struct {
		in      string
		want    []Mode
		wantErr bool
	}{
		{"all", Modes, false},
		{"", Modes, false},
		{"full", []Mode{ModeFull}, false},
		{"single, shuffle", []Mode{ModeSingle, ModeShuffle}, false},
		{"fleet", []Mode{ModeFleet}, false},
		{"full,fleet", []Mode{ModeFull, ModeFleet}, false},
		{"fair", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseModes(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("modes (-want +got):\n%s", diff)
			}
		})
	}
}
