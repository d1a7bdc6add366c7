package harness

import (
	"testing"
	"time"

	"github.com/fairq/fairq/config"
)

// TestFaults checks every fault, long and short, validates and writes a
// configuration fairq accepts, with the worker and Redis settings the
// fault asks for.
func TestFaults(t *testing.T) {
	for _, name := range FaultNames {
		for _, short := range []bool{false, true} {
			f, err := NewFault(name, short)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := f.Validate(); err != nil {
				t.Errorf("%s (short %t): %v", name, short, err)
			}
			if f.Repeat == 0 && f.Duration > time.Minute*3 || short && f.Duration > 15*time.Second {
				t.Errorf("%s (short %t): load of %v", name, short, f.Duration)
			}
			sc := f.scenario()
			c := systemConfig{scenario: sc, mode: ModeFull, backend: backendSQS, prefix: "cx01234567",
				services: Services{SQSEndpoint: "http://127.0.0.1:9324", RedisAddr: "127.0.0.1:6379"},
				pushURL:  "http://127.0.0.1:9999/", creds: newCredentials(sc.Tenants)}
			cfg, err := config.Parse(c.yaml(), func(string) string { return "" })
			if err != nil {
				t.Fatalf("%s: fairq rejects the configuration: %v\n%s", name, err, c.yaml())
			}
			if cfg.Redis.FailOpen == f.FailClosed || cfg.Worker.InactivityTimeout != f.Inactivity ||
				cfg.Worker.VisibilityTimeout != f.Visibility || cfg.Worker.Connections != f.Connections {
				t.Errorf("%s: redis.fail_open %t, worker %+v; want the fault's settings %+v", name, cfg.Redis.FailOpen, cfg.Worker, f)
			}
			_, attacker := sc.Tenant(attackTenant)
			if attacker != (f.Attackers > 0) || len(f.load(sc)) != f.Tenants {
				t.Errorf("%s: tenants %v, load of %d tenants: want %d, and the attacker only with attackers", name, sc.Tenants, len(f.load(sc)), f.Tenants)
			}
		}
	}
	if _, err := NewFault("flood", false); err == nil {
		t.Error("NewFault accepted an unknown name")
	}
	bad, _ := NewFault(FaultWorkerKill, true)
	bad.At = bad.Duration
	if err := bad.Validate(); err == nil {
		t.Error("a fault that outlasts its load validates")
	}
}
