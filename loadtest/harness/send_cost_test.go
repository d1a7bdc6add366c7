package harness

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
)

// TestSendCost runs the real fairq binary on the SQS emulator, every call
// held 10 ms by the proxy, at 200 single messages a second from one tenant
// (its shard of two queues sees 100 a second each), without a send window
// and with one of 50 ms, and checks what each cost: every message accepted
// and processed, every SQS call through the proxy, and the window sending
// at most half the calls. Without the window a message goes alone unless
// others are handed over at the same moment; with it, a batch gathers
// about five.
func TestSendCost(t *testing.T) {
	endpoint := testenv.SQSEndpoint(t)
	ctx := t.Context()
	root, err := ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Build(ctx, root, t.TempDir(), raceEnabled)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cost := map[time.Duration]float64{}
	for _, window := range []time.Duration{0, 50 * time.Millisecond} {
		o := SendCostOptions{
			Binary: bin, Dir: filepath.Join(dir, window.String()), SQSEndpoint: endpoint,
			Window: window, Delay: 10 * time.Millisecond,
			Rate: 200, Tenants: 1, Duration: 3 * time.Second, Warmup: time.Second,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		res, err := RunSendCost(ctx, o)
		if err != nil {
			dumpLogs(t, o.Dir)
			t.Fatalf("window %v: %v", window, err)
		}
		var total float64
		for _, n := range res.Requests {
			total += n
		}
		t.Logf("window %v: accepted %d of %d, processed %d; SendMessageBatch %.3f, all %.3f per message; %v calls, %d through the proxy; p50 %v, p99 %v",
			window, res.Accepted, res.Sent, res.Processed, res.SendPerMessage(), res.PerMessage(), total, res.Proxied, res.Latency.P50, res.Latency.P99)
		if res.Accepted != res.Sent || res.Sent < 500 || res.Processed < res.Accepted {
			t.Errorf("window %v: sent %d, accepted %d, processed %d: want every one of about 600 accepted and processed", window, res.Sent, res.Accepted, res.Processed)
		}
		if float64(res.Proxied) < total {
			t.Errorf("window %v: %d calls passed the proxy, fewer than the %v fairq made: some went around the delay", window, res.Proxied, total)
		}
		if res.Requests[opSend] < 1 || res.Latency.N == 0 {
			t.Errorf("window %v: nothing measured: %+v", window, res)
		}
		cost[window] = res.SendPerMessage()
	}
	if w0, w50 := cost[0], cost[50*time.Millisecond]; w50 > w0/2 {
		t.Errorf("SendMessageBatch per message %.3f with the window, %.3f without: want at most half", w50, w0)
	}
}
