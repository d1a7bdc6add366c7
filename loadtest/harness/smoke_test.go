package harness

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// TestSmoke runs the short version of every scenario in full mode against
// the real fairq binary, the outage on the SQS emulator with Redis, and
// checks the accounting: every accepted message processed or
// dead-lettered, none lost.
func TestSmoke(t *testing.T) {
	ctx := t.Context()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Build(ctx, root, t.TempDir(), raceEnabled)
	if err != nil {
		t.Fatal(err)
	}
	burner, err := BuildBurner(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ScenarioNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, err := NewScenario(name, true)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Scenario: sc, Mode: ModeFull, Binary: bin, Dir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
			if sc.Outage.For > 0 {
				o.Backend = backendSQS
				o.Services = Services{SQSEndpoint: testenv.SQSEndpoint(t), RedisAddr: testenv.RedisAddr(t)}
			}
			if name == ScenarioSlow {
				// A contention control's burn process, lightly.
				o.Burn, o.Burner = smokeBurn, burner
			}
			res, err := Run(ctx, o)
			if err != nil {
				dumpLogs(t, o.Dir)
				t.Fatalf("Run: %v", err)
			}
			a := res.Accounting
			t.Logf("accepted %d, processed %d, dead-lettered %d, lost %d, duplicates %d; quiet p95 %v",
				a.Accepted, a.Processed, a.DeadLettered, a.Lost, a.Duplicates, res.Quiet.Latency.P95)
			if a.Accepted == 0 || a.Processed == 0 {
				t.Errorf("accepted %d, processed %d: the load did not go through", a.Accepted, a.Processed)
			}
			if !res.Drained || !a.Balanced() {
				dumpLogs(t, o.Dir)
				t.Errorf("accounting does not balance (drained %t, %d left): %+v", res.Drained, res.Leftover, a)
			}
			switch name {
			case ScenarioPoison:
				if a.PoisonAccepted == 0 || a.DeadLettered != a.PoisonAccepted || res.DLQDepth != a.PoisonAccepted {
					t.Errorf("poison accepted %d, dead-lettered %d, dead-letter queue %d: want all equal and not 0",
						a.PoisonAccepted, a.DeadLettered, res.DLQDepth)
				}
			case ScenarioSlow:
				if u := res.CPUUse; res.Burn != smokeBurn || (runtime.GOOS == "linux" && (u == nil || u.ByRole[roleBurner] <= 0)) {
					t.Errorf("burn %g, CPU use %+v: want %g asked and the burn process's CPU counted", res.Burn, u, smokeBurn)
				}
			case ScenarioOutage:
				rc := res.Recovery
				if rc == nil || res.OutageStart.IsZero() || rc.BacklogCleared < 0 {
					t.Errorf("outage not measured: recovery %+v", rc)
				}
				// The workers stopped and started again in the load are
				// all counted, as the gateway is.
				if u := res.CPUUse; runtime.GOOS == "linux" && (u == nil || u.ByRole[roleWorkers] <= 0 || u.ByRole[roleGateways] <= 0) {
					t.Errorf("CPU use %+v: want the workers' and the gateway's", u)
				}
			}
		})
	}
}

// smokeBurn is the CPU the slow scenario's smoke run burns beside it.
const smokeBurn = 0.1

// dumpLogs logs the tail of every fairq log of a run.
func dumpLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		s := string(data)
		if len(s) > 3000 {
			s = "…" + s[len(s)-3000:]
		}
		t.Logf("%s:\n%s", filepath.Base(l), strings.TrimSpace(s))
	}
}
