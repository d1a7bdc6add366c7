package sharding

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/google/go-cmp/cmp"
)

// TestShardGolden pins tenants to their shards: a change here moves every
// tenant of every deployment to other queues, so it must be deliberate.
func TestShardGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n, k   int
		tenant string
		want   []int
	}{
		{8, 2, "acme", []int{0, 3}},
		{8, 2, "demo", []int{4, 5}},
		{8, 2, "globex", []int{3, 4}},
		{8, 2, "initech", []int{1, 6}},
		{8, 2, "tenant-0001", []int{1, 6}},
		{8, 2, "", []int{0, 6}},
		{64, 4, "acme", []int{0, 18, 26, 54}},
		{64, 4, "demo", []int{9, 23, 39, 43}},
		{64, 4, "globex", []int{0, 29, 41, 63}},
		{64, 4, "initech", []int{9, 49, 62, 63}},
		{64, 4, "tenant-0001", []int{4, 9, 15, 58}},
		{100, 2, "acme", []int{1, 42}},
		{100, 2, "demo", []int{64, 70}},
		{100, 2, "globex", []int{47, 67}},
		{100, 2, "initech", []int{15, 80}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("N%d_k%d_%s", tt.n, tt.k, tt.tenant), func(t *testing.T) {
			p := mustPool(t, tt.n, tt.k)
			if diff := cmp.Diff(tt.want, p.Shard(tt.tenant).Queues()); diff != "" {
				t.Errorf("Shard(%q) mismatch (-want +got):\n%s", tt.tenant, diff)
			}
		})
	}
}

func TestNewPoolValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n, k int
		ok   bool
	}{
		{"default", 8, 2, true},
		{"k equals n", 4, 4, true},
		{"one queue", 1, 1, true},
		{"largest", MaxQueues, MaxShardSize, true},
		{"no queues", 0, 1, false},
		{"too many queues", MaxQueues + 1, 2, false},
		{"zero k", 8, 0, false},
		{"k over max", 16, MaxShardSize + 1, false},
		{"k over n", 2, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPool(tt.n, tt.k)
			if got := err == nil; got != tt.ok {
				t.Fatalf("NewPool(%d, %d) error = %v, want ok=%v", tt.n, tt.k, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidPool) {
				t.Errorf("error %v is not ErrInvalidPool", err)
			}
		})
	}
}

// TestShardProperties checks, for many tenants and pool shapes, that a
// shard is k distinct sorted indices of [0, N) and the same on every call.
func TestShardProperties(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, k int }{{1, 1}, {2, 2}, {8, 1}, {8, 2}, {8, 8}, {64, 4}, {100, 2}, {1000, 8}, {MaxQueues, 3}} {
		t.Run(fmt.Sprintf("N%d_k%d", c.n, c.k), func(t *testing.T) {
			p := mustPool(t, c.n, c.k)
			for i := range 2000 {
				tenant := fmt.Sprintf("tenant-%d", i)
				s := p.Shard(tenant)
				q := s.Queues()
				if len(q) != c.k || s.Len() != c.k {
					t.Fatalf("Shard(%q) = %v, want %d queues", tenant, q, c.k)
				}
				for j, x := range q {
					if x < 0 || x >= c.n {
						t.Fatalf("Shard(%q) = %v: %d out of [0,%d)", tenant, q, x, c.n)
					}
					if j > 0 && q[j-1] >= x {
						t.Fatalf("Shard(%q) = %v: not strictly ascending", tenant, q)
					}
					if !s.Contains(x) || s.Queue(j) != x {
						t.Fatalf("Shard(%q) = %v: Contains/Queue disagree at %d", tenant, q, j)
					}
				}
				if again := p.Shard(tenant); again != s {
					t.Fatalf("Shard(%q) = %v then %v", tenant, s, again)
				}
			}
		})
	}
}

// TestShardUniform is a chi-square test that every one of the C(N,k)
// combinations is equally likely. The tenants are fixed, so the statistic
// is too; the bound is the 1-in-a-million tail of the chi-square
// distribution, which a biased mapping exceeds by far (see
// TestChiSquareRejectsBias).
func TestShardUniform(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, k int }{{8, 2}, {6, 3}, {10, 3}, {12, 4}, {100, 2}} {
		t.Run(fmt.Sprintf("N%d_k%d", c.n, c.k), func(t *testing.T) {
			t.Parallel()
			p := mustPool(t, c.n, c.k)
			cells := int(Binomial(c.n, c.k).Int64())
			counts := make([]int, cells)
			samples := 100 * cells
			for i := range samples {
				counts[rank(p.Shard(fmt.Sprintf("tenant-%d", i)))]++
			}
			stat, bound := chiSquare(counts, float64(samples)/float64(cells))
			if stat > bound {
				t.Errorf("chi-square = %.1f over %d combinations, want ≤ %.1f", stat, cells, bound)
			}
			t.Logf("chi-square = %.1f over %d combinations (bound %.1f)", stat, cells, bound)
		})
	}
}

// TestShardUniformPairs checks the pool of the Pick benchmark (N=64, k=4,
// 635,376 combinations) through its pairs: every pair of queues must be in
// a shard equally often.
func TestShardUniformPairs(t *testing.T) {
	t.Parallel()
	const n, k, tenants = 64, 4, 100_000
	p := mustPool(t, n, k)
	counts := make([]int, n*n)
	for i := range tenants {
		s := p.Shard(fmt.Sprintf("tenant-%d", i))
		for a := range k {
			for b := a + 1; b < k; b++ {
				counts[s.Queue(a)*n+s.Queue(b)]++
			}
		}
	}
	var pairs []int
	for a := range n {
		for b := a + 1; b < n; b++ {
			pairs = append(pairs, counts[a*n+b])
		}
	}
	want := float64(tenants*k*(k-1)/2) / float64(len(pairs))
	stat, bound := chiSquare(pairs, want)
	if stat > bound {
		t.Errorf("chi-square = %.1f over %d pairs, want ≤ %.1f", stat, len(pairs), bound)
	}
	t.Logf("chi-square = %.1f over %d pairs (bound %.1f)", stat, len(pairs), bound)
}

// TestChiSquareRejectsBias shows that the uniformity test can fail: a
// mapping that favours some combinations, as "hash mod N and the next k−1
// queues" does, is far over the bound.
func TestChiSquareRejectsBias(t *testing.T) {
	t.Parallel()
	const n, k = 8, 2
	cells := int(Binomial(n, k).Int64())
	counts := make([]int, cells)
	samples := 100 * cells
	for i := range samples {
		h := xxhash.Sum64String(fmt.Sprintf("tenant-%d", i))
		a := int(h % n)
		b := (a + 1) % n
		counts[rank(shardOf(min(a, b), max(a, b)))]++
	}
	stat, bound := chiSquare(counts, float64(samples)/float64(cells))
	if stat <= bound {
		t.Errorf("chi-square of a biased mapping = %.1f, want > %.1f", stat, bound)
	}
	t.Logf("chi-square of a biased mapping = %.1f (bound %.1f)", stat, bound)
}

func TestBinomialAndOverlap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n, k, j  int
		binomial int64
		overlap  string
	}{
		{100, 2, 2, 4950, "1/4950"},
		{100, 2, 1, 4950, "98/2475"}, // 2·98/4950
		{100, 2, 0, 4950, "4753/4950"},
		{8, 2, 2, 28, "1/28"},
		{8, 2, 1, 28, "3/7"},   // 2·6/28
		{8, 2, 0, 28, "15/28"}, // C(6,2)/28
		{64, 4, 4, 635376, "1/635376"},
		{5, 5, 5, 1, "1"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("N%d_k%d_j%d", tt.n, tt.k, tt.j), func(t *testing.T) {
			if got := Binomial(tt.n, tt.k); got.Int64() != tt.binomial {
				t.Errorf("Binomial(%d, %d) = %v, want %d", tt.n, tt.k, got, tt.binomial)
			}
			if got := Overlap(tt.n, tt.k, tt.j).RatString(); got != tt.overlap {
				t.Errorf("Overlap(%d, %d, %d) = %s, want %s", tt.n, tt.k, tt.j, got, tt.overlap)
			}
		})
	}
	for _, c := range []struct{ n, k int }{{8, 2}, {64, 4}, {100, 2}, {9, 8}} {
		sum := new(big.Rat)
		for j := 0; j <= c.k; j++ {
			sum.Add(sum, Overlap(c.n, c.k, j))
		}
		if sum.Cmp(big.NewRat(1, 1)) != 0 {
			t.Errorf("Σ Overlap(%d, %d, j) = %s, want 1", c.n, c.k, sum.RatString())
		}
	}
	if got := Binomial(3, 4); got.Sign() != 0 {
		t.Errorf("Binomial(3, 4) = %v, want 0", got)
	}
}

// TestOverlapMatchesShards compares the exact overlap distribution with the
// overlaps of hashed tenants' shards, pair by pair.
func TestOverlapMatchesShards(t *testing.T) {
	t.Parallel()
	const n, k, tenants = 8, 2, 2000
	p := mustPool(t, n, k)
	shards := make([]Shard, tenants)
	for i := range shards {
		shards[i] = p.Shard(fmt.Sprintf("tenant-%d", i))
	}
	counts := make([]int, k+1)
	pairs := 0
	for a := range shards {
		for b := a + 1; b < len(shards); b++ {
			counts[shards[a].Common(shards[b])]++
			pairs++
		}
	}
	for j, c := range counts {
		want, _ := Overlap(n, k, j).Float64()
		got := float64(c) / float64(pairs)
		// The pairs are not independent; 5% relative error is far above the
		// noise of two thousand tenants and far below any real bias.
		if math.Abs(got-want) > 0.05*want {
			t.Errorf("share of pairs with %d queues in common = %.4f, want %.4f", j, got, want)
		}
	}
}

func TestShardString(t *testing.T) {
	t.Parallel()
	if got, want := shardOf(3, 7).String(), "[3 7]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := shardOf(1, 2).Common(shardOf(2, 5)); got != 1 {
		t.Errorf("Common = %d, want 1", got)
	}
}

func mustPool(t testing.TB, n, k int) *Pool {
	t.Helper()
	p, err := NewPool(n, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func shardOf(qs ...int) Shard {
	var s Shard
	s.n = int8(len(qs))
	for i, q := range slices.Sorted(slices.Values(qs)) {
		s.q[i] = uint16(q)
	}
	return s
}

// rank is the colexicographic rank of a shard among all k-subsets:
// Σ C(q_i, i+1) over its sorted indices, a bijection onto [0, C(N,k)).
func rank(s Shard) int {
	r := 0
	for i := range s.Len() {
		r += int(Binomial(s.Queue(i), i+1).Int64())
	}
	return r
}

// chiSquare returns Pearson's statistic of counts against an expected count
// per cell, and the bound it exceeds with probability about 1e-6 under the
// null hypothesis (Wilson–Hilferty approximation, z = 4.75).
func chiSquare(counts []int, expected float64) (stat, bound float64) {
	for _, c := range counts {
		d := float64(c) - expected
		stat += d * d / expected
	}
	df := float64(len(counts) - 1)
	a := 2 / (9 * df)
	bound = df * math.Pow(1-a+4.75*math.Sqrt(a), 3)
	return stat, bound
}
