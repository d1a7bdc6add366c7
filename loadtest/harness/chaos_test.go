package harness

import (
	"log/slog"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// TestChaosShort runs the short form of every fault against the real fairq
// binary, redis-server and the SQS emulator (started for each fault), and
// asserts that nothing accepted is lost, the expectations of the faults
// whose expectations are enforced, and that each fault did happen.
func TestChaosShort(t *testing.T) {
	// Each run starts its own services; these only decide, as for every
	// test, whether they can be had: skip without them, or fail under
	// FAIRQ_REQUIRE_SERVICES=1.
	testenv.RedisAddr(t)
	testenv.SQSEndpoint(t)
	ctx := t.Context()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// fairq without the race detector (TestSmoke runs it with): under
	// it, memory is several times what users see, and the slow-body
	// attack would take gigabytes of it.
	bin, err := Build(ctx, root, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range FaultNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := NewFault(name, true)
			if err != nil {
				t.Fatal(err)
			}
			o := ChaosOptions{Fault: f, Binary: bin, Root: root, Dir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
			res, err := RunChaos(ctx, o)
			if err != nil {
				dumpLogs(t, o.Dir)
				t.Fatalf("RunChaos: %v", err)
			}
			t.Logf("accepted %d, delivered %d, lost %d, duplicates %d (%d of %d retried), 5xx %d, failed pushes %d, split msgid %d; gateway %s",
				res.Accepted, res.Delivered, res.Lost, res.Duplicates, res.RetriedDuplicates, res.Retried, res.Answers5xx,
				res.FailedPushes, res.SplitMsgid, fmtPeak(res.Memory["gateway"]))
			for _, c := range res.Checks {
				t.Logf("check %s %s: %s, pass %t", c.Name, c.Bound, c.Measured, c.Pass)
			}
			for _, c := range res.Asserted() {
				if !c.Pass {
					dumpLogs(t, o.Dir)
					t.Errorf("%s: want %s, measured %s", c.Name, c.Bound, c.Measured)
				}
			}
			if res.Accepted == 0 || res.Delivered == 0 {
				t.Errorf("accepted %d, delivered %d: the load did not go through", res.Accepted, res.Delivered)
			}
			if why := faultMissed(res); why != "" {
				t.Errorf("the fault did not happen: %s", why)
			}
		})
	}
}

// faultMissed returns why a run shows no sign of its fault, or "": a
// fault that leaves no trace tests nothing.
func faultMissed(r *ChaosResult) string {
	switch r.Fault.Name {
	case FaultRedisClosed:
		if r.Answers["503"] == 0 {
			return "no 503 while Redis was away with fail_open false"
		}
	case FaultSQSDown:
		if r.Answers["503"] == 0 && r.Retried == 0 {
			return "no 503 and no retried send while SQS was unreachable"
		}
	case FaultSQSStall:
		if r.SlowestAnswer < r.Fault.For/2 {
			return "no send held up by the stall"
		}
	case FaultApp500, FaultAppHang:
		if r.FailedPushes == 0 {
			return "every push answered 2xx"
		}
	case FaultGatewayKill:
		if r.Answers["transport"] == 0 {
			return "no send failed in transport while the gateway was down"
		}
	case FaultWorkerKill, FaultWorkerTerm:
		if r.FaultEnd-r.FaultStart < r.Fault.For {
			return "the worker was back before the fault's length"
		}
	case FaultSlowBody:
		if r.SlowBody == nil || r.SlowBody.Opened == 0 {
			return "no slow connection opened"
		}
	case FaultRestartSend:
		if len(r.Trials) != r.Fault.Repeat {
			return "rounds missing"
		}
	}
	return ""
}
