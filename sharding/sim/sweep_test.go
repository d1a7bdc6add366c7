package sim

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/sharding"
)

func TestShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		x    float64
		want string
	}{
		{1.0 / 4950, "0.0202%"}, // N=100, k=2, one noisy tenant
		{1.0 / 28, "3.57%"},
		{0.001, "0.1%"},
		{0.01, "1%"},
		{2.4e-5, "0.0024%"},
		{1.0 / 635376, "0.000157%"},
		{0.2203, "22%"},
		{1, "100%"},
		{0, "0%"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := share(tt.x); got != tt.want {
				t.Errorf("share(%v) = %q, want %q", tt.x, got, tt.want)
			}
		})
	}
}

func TestFreeShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		n, k, noisy int
		want        float64
	}{
		{"one noisy tenant takes k of N", 13, 6, 1, 7.0 / 13},
		{"N=100, k=2, one noisy", 100, 2, 1, 0.98},
		{"two noisy, each queue escapes both", 8, 2, 2, 0.75 * 0.75},
		{"a shard of the whole pool", 8, 8, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := FreeShare(tt.n, tt.k, tt.noisy); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("FreeShare(%d, %d, %d) = %v, want %v", tt.n, tt.k, tt.noisy, got, tt.want)
			}
		})
	}
	// Against the shards drawn: the mean share of 8 queues that two random
	// 2-shards leave free, over every pair of shards.
	shards := subsetsOf(8, 2)
	free := 0
	for _, a := range shards {
		for _, b := range shards {
			free += 8 - bits.OnesCount(a|b)
		}
	}
	if got, want := float64(free)/float64(8*len(shards)*len(shards)), FreeShare(8, 2, 2); math.Abs(got-want) > 1e-12 {
		t.Errorf("mean free share over every pair of shards %v, FreeShare %v", got, want)
	}
}

// subsetsOf returns every k-subset of n items as a bit set.
func subsetsOf(n, k int) []uint {
	var out []uint
	for s := uint(0); s < 1<<n; s++ {
		if bits.OnesCount(s) == k {
			out = append(out, s)
		}
	}
	return out
}

func TestNoisyCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tenants int
		share   float64
		want    int
	}{
		{"1% of 100", 100, 0.01, 1},
		{"1% of 1000", 1000, 0.01, 10},
		{"0.1% of 100: at least one", 100, 0.001, 1},
		{"1.25% of 1000: nearest", 1000, 0.0125, 13},
		{"99% of 10: one stays quiet", 10, 0.99, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NoisyCount(tt.tenants, tt.share); got != tt.want {
				t.Errorf("NoisyCount(%d, %v) = %d, want %d", tt.tenants, tt.share, got, tt.want)
			}
		})
	}
}

// TestCoveredFallsWithN is what Fewest's bisection rests on: with the
// shard size and the noisy tenants fixed, more queues never raise the
// expected share hurt.
func TestCoveredFallsWithN(t *testing.T) {
	t.Parallel()
	for _, m := range []int{1, 2, 5, 20} {
		for k := 1; k <= 5; k++ {
			prev := sharding.Covered(k, k, m, k)
			for n := k + 1; n <= 150; n++ {
				p := sharding.Covered(n, k, m, k)
				if p.Cmp(prev) > 0 {
					t.Errorf("m=%d, k=%d: share %s at N=%d above %s at N=%d", m, k, p.FloatString(8), n, prev.FloatString(8), n-1)
				}
				prev = p
			}
		}
	}
}

// fewestScan is Fewest by trying every N in turn: the oracle of the
// bisection.
func fewestScan(noisy int, tolerance *big.Rat, maxQueues, maxShardSize int) []Sizing {
	var out []Sizing
	for k := 1; k <= maxShardSize; k++ {
		for n := k; n <= maxQueues; n++ {
			if p := sharding.Covered(n, k, noisy, k); p.Cmp(tolerance) <= 0 {
				out = append(out, Sizing{Queues: n, ShardSize: k, Expected: p})
				break
			}
		}
	}
	return out
}

func TestFewest(t *testing.T) {
	t.Parallel()
	ratCmp := cmp.Comparer(func(a, b *big.Rat) bool { return a.Cmp(b) == 0 })
	tests := []struct {
		name                    string
		noisy                   int
		tolerance               *big.Rat
		maxQueues, maxShardSize int
		want                    *Sizing // nil: the scan is the only oracle
		none                    bool    // no pool within the tolerance
	}{
		// A pool of 100 queues with shards of 2, one noisy tenant: 1 in
		// C(100,2) = 4950 quiet tenants hurt, 0.0202%. Hash to one queue
		// would need 4950 queues.
		{"one noisy, k ≤ 2, at most 1/4950", 1, big.NewRat(1, 4950), 1000, 2, &Sizing{100, 2, big.NewRat(1, 4950)}, false},
		{"one noisy, k ≤ 2, at most 1/28", 1, big.NewRat(1, 28), 100, 2, &Sizing{8, 2, big.NewRat(1, 28)}, false},
		// C(13,6) = C(13,7) = 1716 ≥ 1000, and no shard of 12 queues has
		// 1000 shards (C(12,6) = 924).
		{"one noisy, at most 0.1%", 1, big.NewRat(1, 1000), 1000, 8, &Sizing{13, 6, big.NewRat(1, 1716)}, false},
		{"ten noisy, at most 1%", 10, big.NewRat(1, 100), 1000, 8, nil, false},
		{"ten noisy, at most 0.1%", 10, big.NewRat(1, 1000), 1000, 8, nil, false},
		{"hundred noisy, at most 0.1%: out of reach", 100, big.NewRat(1, 1000), 1000, 8, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Fewest(tt.noisy, tt.tolerance, tt.maxQueues, tt.maxShardSize)
			if diff := cmp.Diff(fewestScan(tt.noisy, tt.tolerance, tt.maxQueues, tt.maxShardSize), got, ratCmp); diff != "" {
				t.Errorf("Fewest against trying every N (-scan +bisection):\n%s", diff)
			}
			best, ok := Cheapest(got)
			switch {
			case tt.none:
				if ok || len(got) > 0 {
					t.Errorf("Cheapest = %v, %v of %v, want none within %s", best, ok, got, tt.tolerance.RatString())
				}
			case tt.want != nil:
				if diff := cmp.Diff(*tt.want, best, ratCmp); !ok || diff != "" {
					t.Errorf("Cheapest = %v, %v (-want +got):\n%s", best, ok, diff)
				}
			default:
				// The scan above is the oracle; the cheapest must be
				// within the tolerance and have the fewest queues.
				if !ok || best.Expected.Cmp(tt.tolerance) > 0 {
					t.Fatalf("Cheapest = %v, %v, want a pool within %s", best, ok, tt.tolerance.RatString())
				}
				for _, s := range got {
					if s.Queues < best.Queues {
						t.Errorf("Cheapest %v, but %v has fewer queues", best, s)
					}
				}
			}
		})
	}
}

func TestSweepValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      SweepConfig
		simulate bool
	}{
		// Checked before the first simulation runs: this one would take
		// hours.
		{"too many messages", SweepConfig{Tenants: []int{100, 1_000_000}, Duration: time.Hour}, true},
		{"no quiet rate", SweepConfig{QuietRate: -1}, true},
		{"no queue", SweepConfig{Queues: []int{0}}, false},
		{"shard too large", SweepConfig{ShardSizes: []int{sharding.MaxShardSize + 1}}, false},
		{"one tenant", SweepConfig{Tenants: []int{1}}, false},
		{"no noisy share", SweepConfig{NoisyShares: []float64{-0.01}}, false},
		{"all noisy", SweepConfig{NoisyShares: []float64{1}}, false},
		{"tolerance of 100%", SweepConfig{Tolerance: 1}, false},
		{"too many queues to search", SweepConfig{MaxQueues: sharding.MaxQueues + 1}, false},
		{"too large a shard to search", SweepConfig{MaxShardSize: sharding.MaxShardSize + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.NoSimulation = !tt.simulate
			if _, err := Sweep(t.Context(), tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Sweep: err = %v, want %v", err, ErrInvalidConfig)
			}
		})
	}
}

// TestSweepTable: the combinatorics of a sweep and the way the table shows
// them, without simulating.
func TestSweepTable(t *testing.T) {
	t.Parallel()
	res, err := Sweep(t.Context(), SweepConfig{
		Queues: []int{8, 100}, ShardSizes: []int{2, 3}, Tenants: []int{100, 1000}, NoisyShares: []float64{0.001, 0.01},
		Tolerance: 0.000203, MaxShardSize: 2, NoSimulation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		tenants, noisy, n, k int
		expected             string
	}
	var got []row
	for _, g := range res.Groups {
		for _, p := range g.Pools {
			if p.Hurt != -1 || p.Drawn != -1 {
				t.Errorf("N=%d, k=%d: hurt %d, drawn %d without simulation, want -1", p.Queues, p.ShardSize, p.Hurt, p.Drawn)
			}
			got = append(got, row{g.Tenants, g.Noisy, p.Queues, p.ShardSize, p.Expected.RatString()})
		}
	}
	// 0.1% and 1% of 100 tenants are both one noisy tenant: one group.
	c := func(n, k, m int) string { return sharding.Covered(n, k, m, k).RatString() }
	want := []row{
		{100, 1, 8, 2, "1/28"}, {100, 1, 8, 3, "1/56"}, {100, 1, 100, 2, "1/4950"}, {100, 1, 100, 3, "1/161700"},
		{1000, 1, 8, 2, "1/28"}, {1000, 1, 8, 3, "1/56"}, {1000, 1, 100, 2, "1/4950"}, {1000, 1, 100, 3, "1/161700"},
		{1000, 10, 8, 2, c(8, 2, 10)}, {1000, 10, 8, 3, c(8, 3, 10)}, {1000, 10, 100, 2, c(100, 2, 10)}, {1000, 10, 100, 3, c(100, 3, 10)},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if res.Messages != 0 {
		t.Errorf("%d messages simulated, want none", res.Messages)
	}

	var b bytes.Buffer
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, want := range []string{
		"100 tenants, 1 noisy (1%):",
		"1000 tenants, 10 noisy (1%):",
		"  100   2   4,950           0.0202% (0.02 of 99)",
		"  8     2   28              3.57% (3.5 of 99)",
		"recommended: N=100, k=2, 0.0202% expected; the noisy tenants leave 98% of its queues free, so the consumers need\n  1.02× the quiet load or more; the fewest queues for each k: k=2 N=100\n",
		"recommended: none; no pool of up to 1000 queues keeps the expected share within 0.0203%",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "simulated") {
		t.Errorf("table without simulation has a simulated column:\n%s", table)
	}
}

// TestSweepSimulated: with one noisy tenant among 2000 and 8 queues, the
// share of quiet tenants the simulation hurts is the one the
// combinatorics expects, 1/C(8,k), within three standard deviations of a
// binomial share over 1999 quiet tenants (each quiet tenant's shard is
// an independent draw, whole-shard-shared with probability p): 1.25
// points at k=2, 0.8 at k=4. And it tells k=2 from k=4: each simulated
// share is outside the other k's band. Seeded, so the outcome is fixed.
func TestSweepSimulated(t *testing.T) {
	t.Parallel()
	const tenants, quiet = 2000, 1999
	res, err := Sweep(t.Context(), SweepConfig{
		Seed: 1, Queues: []int{8}, ShardSizes: []int{2, 4}, Tenants: []int{tenants}, NoisyShares: []float64{0.0005},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 1 || res.Groups[0].Noisy != 1 || len(res.Groups[0].Pools) != 2 {
		t.Fatalf("groups %+v, want one of one noisy tenant with two pools", res.Groups)
	}
	band := func(p PoolResult) (sim, exp, sd float64) {
		exp, _ = p.Expected.Float64()
		return float64(p.Hurt) / quiet, exp, math.Sqrt(exp * (1 - exp) / quiet)
	}
	pools := res.Groups[0].Pools
	for i, p := range pools {
		sim, exp, sd := band(p)
		t.Logf("N=%d, k=%d: simulated %s (%d hurt), expected %s ± %s", p.Queues, p.ShardSize, share(sim), p.Hurt, share(exp), share(3*sd))
		if math.Abs(sim-exp) > 3*sd {
			t.Errorf("N=%d, k=%d: simulated share %s, want %s ± %s", p.Queues, p.ShardSize, share(sim), share(exp), share(3*sd))
		}
		if p.Hurt != p.Drawn || p.Hurt == 0 {
			t.Errorf("N=%d, k=%d: %d hurt, %d drawn the noisy tenant's shard; want the same, not 0", p.Queues, p.ShardSize, p.Hurt, p.Drawn)
		}
		other := pools[1-i]
		_, oexp, osd := band(other)
		if math.Abs(sim-oexp) <= 3*osd {
			t.Errorf("N=%d, k=%d: simulated share %s is within k=%d's band %s ± %s: the check cannot tell k apart", p.Queues, p.ShardSize, share(sim), other.ShardSize, share(oexp), share(3*osd))
		}
	}
	if res.Messages == 0 {
		t.Error("no message simulated")
	}
}

// TestSweepSeveralNoisy: with ten noisy tenants and a pool large enough
// that they leave most of it free, the simulation hurts exactly the quiet
// tenants whose shard the noisy tenants' shards cover, as drawn, and a
// larger shard leaves fewer covered.
func TestSweepSeveralNoisy(t *testing.T) {
	t.Parallel()
	res, err := Sweep(t.Context(), SweepConfig{
		Seed: 1, Queues: []int{100}, ShardSizes: []int{2, 3}, Tenants: []int{1000}, NoisyShares: []float64{0.01},
	})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Groups[0]
	if g.Noisy != 10 || len(g.Pools) != 2 {
		t.Fatalf("group %+v, want ten noisy tenants and two pools", g)
	}
	for _, p := range g.Pools {
		if p.Hurt != p.Drawn || p.Drawn == 0 {
			t.Errorf("N=%d, k=%d: %d hurt, %d drawn; want the same, not 0", p.Queues, p.ShardSize, p.Hurt, p.Drawn)
		}
	}
	if k2, k3 := g.Pools[0], g.Pools[1]; k3.Hurt >= k2.Hurt {
		t.Errorf("hurt %d with k=2, %d with k=3; want fewer with k=3 (expected %s and %s)",
			k2.Hurt, k3.Hurt, k2.Expected.FloatString(4), k3.Expected.FloatString(4))
	}
}

// shardNamed returns a tenant id whose shard in pool is want, such as
// "[0 1]", and that shard.
func shardNamed(t *testing.T, pool *sharding.Pool, want string) (string, sharding.Shard) {
	t.Helper()
	for i := range 100_000 {
		id := "t" + strconv.Itoa(i)
		if s := pool.Shard(id); s.String() == want {
			return id, s
		}
	}
	t.Fatalf("no tenant id with shard %s", want)
	return "", sharding.Shard{}
}

// TestSetNoisyRates: noisy tenants that share queues, directly or through
// another, send as a group the share of the load that their queues are of
// all those the noisy tenants cover; quiet tenants keep their rate.
func TestSetNoisyRates(t *testing.T) {
	t.Parallel()
	pool, err := sharding.NewPool(8, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ts []Tenant
	for _, c := range []struct {
		shard string
		noisy bool
	}{
		{"[0 1]", false}, // quiet, on queues a noisy tenant uses: no part in the grouping
		{"[0 1]", true},  // a: with b through queue 1
		{"[1 2]", true},  // b: with c through queue 2
		{"[2 3]", true},  // c
		{"[5 6]", true},  // d: alone
		{"[6 7]", false}, // quiet
	} {
		id, s := shardNamed(t, pool, c.shard)
		ts = append(ts, Tenant{ID: id, Noisy: c.noisy, Rate: 10, Shard: s})
	}
	setNoisyRates(8, ts, 120)
	// a, b and c cover queues 0–3, d queues 5 and 6: 6 queues covered, so
	// a, b and c share 4/6 of 120 and d has 2/6 of it.
	got := make([]float64, len(ts))
	for i, tn := range ts {
		got[i] = tn.Rate
	}
	want := []float64{10, 80.0 / 3, 80.0 / 3, 80.0 / 3, 40, 10}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
}
