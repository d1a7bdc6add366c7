package sim

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"image/png"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/sharding"
)

// small is an experiment of the headline shape, short enough for a test:
// seed 7 gives one quiet tenant the noisy tenant's whole shard at N=8.
func small() Config {
	return Config{Seed: 7, Duration: 2 * time.Minute}
}

var cmpResult = cmp.Options{
	cmp.Comparer(func(a, b *big.Rat) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b sharding.Shard) bool { return a == b }),
	cmp.Comparer(func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }),
}

func TestRunDeterministic(t *testing.T) {
	t.Parallel()
	cfg := small()
	cfg.Duration = 30 * time.Second
	a, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b, cmpResult); diff != "" {
		t.Errorf("two runs of one seed differ (-first +second):\n%s", diff)
	}
	cfg.Seed++
	c, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(a.Runs, c.Runs, cmpResult) {
		t.Error("seeds 7 and 8 gave the same result")
	}
}

// TestIsolation checks the claims of the README at the headline shape: 20
// quiet tenants, one at 100× a quiet tenant's rate, consumers at 2× the
// quiet total, N=8, k=2.
func TestIsolation(t *testing.T) {
	t.Parallel()
	res, err := Run(t.Context(), small())
	if err != nil {
		t.Fatal(err)
	}
	noisy := res.Tenants[len(res.Tenants)-1]
	for _, run := range res.Runs {
		t.Run(run.Strategy.String(), func(t *testing.T) {
			if got := run.Messages; got < 100_000 {
				t.Fatalf("messages = %d, want the noisy tenant's load (about 144,000)", got)
			}
			for i, l := range run.quiet() {
				q := res.Tenants[i]
				if l.Completed != l.Messages {
					t.Errorf("%s: %d of %d messages served; the run drains every queue", q.ID, l.Completed, l.Messages)
				}
				ratio := l.P99 / l.BaselineP99
				switch run.Strategy {
				case Shared:
					// Behind an unbounded backlog, latency grows with the time
					// of sending: a message sent twice as late waits twice as
					// long.
					if l.P99SecondHalf < 1.5*l.P99FirstHalf {
						t.Errorf("%s: p99 %v in the first half, %v in the second; want growth", q.ID, l.P99FirstHalf, l.P99SecondHalf)
					}
					if !l.Hurt {
						t.Errorf("%s: not hurt on the shared queue (p99 ratio %.2f)", q.ID, ratio)
					}
				case Hash:
					if want := q.Queue == noisy.Queue; l.Hurt != want || l.Whole != want {
						t.Errorf("%s on queue %d (noisy on %d): hurt %v, whole %v (p99 ratio %.2f)", q.ID, q.Queue, noisy.Queue, l.Hurt, l.Whole, ratio)
					}
				case ShardRandom:
					if want := l.Common > 0; l.Hurt != want {
						t.Errorf("%s, shard %v (noisy %v): hurt = %v, want %v (p99 ratio %.2f)", q.ID, q.Shard, noisy.Shard, l.Hurt, want, ratio)
					}
				case ShardShallowest:
					whole := q.Shard == noisy.Shard
					if whole != l.Whole {
						t.Errorf("%s: Whole = %v, want %v", q.ID, l.Whole, whole)
					}
					if !whole && ratio > 1.2 {
						t.Errorf("%s, shard %v (noisy %v): p99 %.3fs = %.2f× its baseline %.3fs, want ≤ 1.2×", q.ID, q.Shard, noisy.Shard, l.P99, ratio, l.BaselineP99)
					}
					if whole && !l.Hurt {
						t.Errorf("%s shares the noisy tenant's whole shard but is not hurt", q.ID)
					}
				}
			}
		})
	}
	shallowest := res.Runs[len(res.Runs)-1]
	if shallowest.QuietWhole != 1 || shallowest.QuietHurt != 1 {
		t.Errorf("shard-shallowest: %d whole, %d hurt; want the one tenant seed 7 gives the noisy shard", shallowest.QuietWhole, shallowest.QuietHurt)
	}
	shared := res.Runs[0]
	for w := 1; w < len(shared.WindowP99); w++ {
		if shared.WindowP99[w] <= shared.WindowP99[w-1] {
			t.Errorf("shared queue: window p99 %v does not grow with time", shared.WindowP99)
			break
		}
	}
}

// TestIsolationLargePool: at N=100, k=2 (seed 3 gives two quiet tenants one
// queue of the noisy shard) random picks hurt exactly those two, shallowest
// picks nobody.
func TestIsolationLargePool(t *testing.T) {
	t.Parallel()
	cfg := small()
	cfg.Seed, cfg.Queues = 3, 100
	cfg.Strategies = []Strategy{ShardRandom, ShardShallowest}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	random, shallowest := res.Runs[0], res.Runs[1]
	if random.QuietHurt != 2 || res.Odds[1].Observed != 2 {
		t.Errorf("shard-random hurt %d, %d share a queue; want 2 and 2", random.QuietHurt, res.Odds[1].Observed)
	}
	if shallowest.QuietHurt != 0 {
		t.Errorf("shard-shallowest hurt %d, want 0", shallowest.QuietHurt)
	}
	for i, l := range shallowest.quiet() {
		if r := l.P99 / l.BaselineP99; r > 1.2 {
			t.Errorf("%s: p99 ratio %.2f, want ≤ 1.2", res.Tenants[i].ID, r)
		}
	}
}

// TestSeveralNoisyTenants: with four noisy tenants, each sending more than
// the consumers can serve, a quiet tenant is hurt under shallowest picking
// exactly when the noisy tenants' shards together hold all its queues, and
// under random picking when they hold any of them.
func TestSeveralNoisyTenants(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 1, Queues: 16, Quiet: 200, Noisy: 4, NoisyFactor: 500, Duration: 10 * time.Second,
		Strategies: []Strategy{ShardRandom, ShardShallowest}}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Tenants); got != 204 {
		t.Fatalf("%d tenants, want 204", got)
	}
	for _, tn := range res.Tenants[200:] {
		if !tn.Noisy || !strings.HasPrefix(tn.ID, "s1-noisy-") {
			t.Errorf("tenant %+v, want a noisy one named s1-noisy-i", tn)
		}
	}
	for i, o := range res.Odds {
		if want := sharding.Covered(16, 2, 4, i); o.Exact.Cmp(want) != 0 {
			t.Errorf("Odds[%d].Exact = %s, want %s", i, o.Exact.RatString(), want.RatString())
		}
	}
	random, shallowest := res.Runs[0], res.Runs[1]
	if got, want := shallowest.ExpectedHurt, sharding.Covered(16, 2, 4, 2); got.Cmp(want) != 0 {
		t.Errorf("shard-shallowest expected hurt %s, want %s", got.RatString(), want.RatString())
	}
	if got, want := len(shallowest.quiet()), 200; got != want {
		t.Fatalf("%d quiet tenants' latencies, want %d", got, want)
	}
	whole := 0
	for i, l := range shallowest.quiet() {
		if l.Whole {
			whole++
		}
		if l.Hurt != l.Whole {
			t.Errorf("shard-shallowest, %s with %d queues among the noisy tenants': hurt = %v (p99 ratio %.2f)", res.Tenants[i].ID, l.Common, l.Hurt, l.P99/l.BaselineP99)
		}
		if r := random.quiet()[i]; r.Hurt != (r.Common > 0) {
			t.Errorf("shard-random, %s with %d queues among the noisy tenants': hurt = %v (p99 ratio %.2f)", res.Tenants[i].ID, r.Common, r.Hurt, r.P99/r.BaselineP99)
		}
	}
	// The check above means something only if some are covered and some
	// are not.
	if whole == 0 || whole == 200 || whole != res.Odds[2].Observed || whole != shallowest.QuietHurt {
		t.Errorf("%d quiet tenants covered, %d observed, %d hurt: want the same count, neither 0 nor all", whole, res.Odds[2].Observed, shallowest.QuietHurt)
	}
}

// TestOverlapOdds: the exact odds, and the shards the hash draws against
// them, at the pool sizes of the README.
func TestOverlapOdds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n     int
		whole string
	}{{8, "1/28"}, {100, "1/4950"}} {
		cfg := Config{Seed: 1, Queues: c.n, Quiet: 1000, QuietRate: 0.01, Duration: time.Second, Strategies: []Strategy{Hash}}
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Odds[2].Exact.RatString(); got != c.whole {
			t.Errorf("N=%d: whole-shard odds %s, want %s", c.n, got, c.whole)
		}
		sum := 0
		for _, o := range res.Odds {
			p, _ := o.Exact.Float64()
			if math.Abs(o.Expected-p*1000) > 1e-9 {
				t.Errorf("N=%d, j=%d: expected %v of 1000, want %v", c.n, o.J, o.Expected, p*1000)
			}
			// The quiet tenants' overlaps with the noisy one are binomial;
			// the pairs' shares are over a million samples. Both within 5
			// standard deviations.
			if sd := math.Sqrt(1000 * p * (1 - p)); math.Abs(float64(o.Observed)-o.Expected) > 5*sd+1 {
				t.Errorf("N=%d, j=%d: %d quiet tenants, expected %.1f ± %.1f", c.n, o.J, o.Observed, o.Expected, sd)
			}
			if sd := math.Sqrt(p * (1 - p) / float64(res.PairsSampled)); math.Abs(o.PairShare-p) > 5*sd {
				t.Errorf("N=%d, j=%d: pair share %.6f, want %.6f ± %.6f", c.n, o.J, o.PairShare, p, sd)
			}
			sum += o.Observed
		}
		if sum != 1000 {
			t.Errorf("N=%d: observed counts sum to %d, want 1000", c.n, sum)
		}
	}
}

// TestRoundRobin: with every queue backlogged, the consumers serve them in
// turn, so each gets the same share.
func TestRoundRobin(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 1, Queues: 8, ShardSize: 8, Duration: time.Minute}.withDefaults()
	pool, _ := sharding.NewPool(cfg.Queues, cfg.ShardSize)
	shards := make([]sharding.Shard, cfg.Quiet+1)
	rates := make([]float64, cfg.Quiet+1)
	for i := range shards {
		shards[i] = pool.Shard("t")
		rates[i] = cfg.QuietRate
	}
	rates[cfg.Quiet] *= cfg.NoisyFactor
	e := newEngine(cfg, ShardRandom, shards, rates, true)
	if err := e.run(t.Context()); err != nil {
		t.Fatal(err)
	}
	lo, hi := e.served[0], e.served[0]
	for _, n := range e.served {
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo < 1000 || hi-lo > lo/200 {
		t.Errorf("served by queue = %v, want equal shares", e.served)
	}
	if got, want := sum(e.completed), sum(e.messages); got != want {
		t.Errorf("completed %d of %d messages after the drain", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"shard larger than pool", Config{Queues: 4, ShardSize: 5}},
		{"negative quiet", Config{Quiet: -1}},
		{"negative rate", Config{QuietRate: -1}},
		{"negative noisy factor", Config{NoisyFactor: -1}},
		{"negative noisy tenants", Config{Noisy: -1}},
		{"no consumer", Config{Capacity: 0.001}},
		{"service distribution", Config{ServiceDist: "pareto"}},
		{"one window", Config{Windows: 1}},
		{"too many messages", Config{Duration: 1000 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(t.Context(), tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Run: err = %v, want %v", err, ErrInvalidConfig)
			}
		})
	}
}

func TestParseStrategies(t *testing.T) {
	t.Parallel()
	got, err := ParseStrategies("shared, shard-shallowest")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Strategy{Shared, ShardShallowest}, got); diff != "" {
		t.Errorf("ParseStrategies (-want +got):\n%s", diff)
	}
	if _, err := ParseStrategies("shared,fastest"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown strategy: err = %v, want %v", err, ErrInvalidConfig)
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, small()); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: err = %v, want %v", err, context.Canceled)
	}
}

func TestWriters(t *testing.T) {
	t.Parallel()
	cfg := small()
	cfg.Duration = 20 * time.Second
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1/28 = 3.57%", "shuffle shard, shallowest queue", "s7-quiet-19", "whole shard in common"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	for name, c := range map[string]struct {
		write      func(*bytes.Buffer) error
		rows, cols int
	}{
		"tenants": {func(b *bytes.Buffer) error { return res.WriteTenantsCSV(b) }, 1 + 4*21, 18},
		"summary": {func(b *bytes.Buffer) error { return res.WriteSummaryCSV(b) }, 1 + 4, 16},
		"windows": {func(b *bytes.Buffer) error { return res.WriteWindowsCSV(b) }, 1 + 4*10, 5},
	} {
		var b bytes.Buffer
		if err := c.write(&b); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&b).ReadAll()
		if err != nil {
			t.Fatalf("%s.csv: %v", name, err)
		}
		if len(rows) != c.rows || len(rows[0]) != c.cols {
			t.Errorf("%s.csv: %d rows of %d columns, want %d of %d", name, len(rows), len(rows[0]), c.rows, c.cols)
		}
	}
	var img bytes.Buffer
	if err := res.WritePNG(&img); err != nil {
		t.Fatal(err)
	}
	decoded, err := png.Decode(&img)
	if err != nil {
		t.Fatal(err)
	}
	if b := decoded.Bounds(); b.Dx() < 1000 || b.Dy() < 500 {
		t.Errorf("chart is %v, want at least 1000×500", b)
	}
}

// BenchmarkRun measures one strategy of the headline experiment, with and
// without the noisy tenant: about 840,000 messages.
func BenchmarkRun(b *testing.B) {
	cfg := Config{Strategies: []Strategy{ShardShallowest}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Messages), "messages/op")
	}
}
