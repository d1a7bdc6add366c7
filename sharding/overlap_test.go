package sharding

import (
	"fmt"
	"math/big"
	"math/bits"
	"testing"
)

func TestCovered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		n, k, m, j int
		want       string
	}{
		{"one noisy tenant, N=100, k=2: 0.0202%", 100, 2, 1, 2, "1/4950"},
		{"one noisy tenant, N=8, k=2", 8, 2, 1, 2, "1/28"},
		{"one noisy tenant, N=64, k=4", 64, 4, 1, 4, "1/635376"},
		// 1 − 2·(3/6)² + (1/6)²: 19 of the 36 pairs of 2-shards of 4
		// queues cover a given one (6 + 5 with it, 8 with one queue each).
		{"two noisy tenants, N=4, k=2", 4, 2, 2, 2, "19/36"},
		{"two noisy tenants, N=4, k=2, nothing covered", 4, 2, 2, 0, "1/36"},
		{"hash to one queue, 3 noisy of N=10: 1 − 0.9³", 10, 1, 3, 1, "271/1000"},
		{"no noisy tenant covers nothing", 8, 2, 0, 0, "1"},
		{"no noisy tenant covers no queue", 8, 2, 0, 1, "0"},
		{"shard of the whole pool", 5, 5, 3, 5, "1"},
		{"j above k", 8, 2, 1, 3, "0"},
		{"k above n", 3, 4, 1, 4, "0"},
		{"negative m", 8, 2, -1, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Covered(tt.n, tt.k, tt.m, tt.j).RatString(); got != tt.want {
				t.Errorf("Covered(%d, %d, %d, %d) = %s, want %s", tt.n, tt.k, tt.m, tt.j, got, tt.want)
			}
		})
	}
	if f, _ := Covered(100, 2, 1, 2).Float64(); fmt.Sprintf("%.4f%%", 100*f) != "0.0202%" {
		t.Errorf("Covered(100, 2, 1, 2) = %.6f%%, want 0.0202%%", 100*f)
	}
}

// TestCoveredOneIsOverlap: with one other tenant, Covered is the
// hypergeometric Overlap, exactly.
func TestCoveredOneIsOverlap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, k int }{{8, 2}, {8, 3}, {16, 4}, {100, 2}, {64, 4}, {9, 8}} {
		for j := 0; j <= c.k; j++ {
			if got, want := Covered(c.n, c.k, 1, j), Overlap(c.n, c.k, j); got.Cmp(want) != 0 {
				t.Errorf("Covered(%d, %d, 1, %d) = %s, Overlap = %s", c.n, c.k, j, got.RatString(), want.RatString())
			}
		}
	}
}

// TestCoveredEnumerated counts, over every way m tenants can draw their
// shards, how many queues of a fixed shard they cover together, and
// compares the exact shares with Covered.
func TestCoveredEnumerated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, k, m int }{{5, 2, 2}, {6, 2, 3}, {6, 3, 2}, {7, 3, 3}, {7, 1, 4}} {
		t.Run(fmt.Sprintf("N%d_k%d_m%d", c.n, c.k, c.m), func(t *testing.T) {
			t.Parallel()
			shards := subsets(c.n, c.k)
			target := shards[0]
			counts := make([]int64, c.k+1)
			var total int64
			// Every m-tuple of shards, as a number in base len(shards).
			idx := make([]int, c.m)
			for {
				var union uint
				for _, i := range idx {
					union |= shards[i]
				}
				counts[bits.OnesCount(union&target)]++
				total++
				d := 0
				for d < c.m {
					idx[d]++
					if idx[d] < len(shards) {
						break
					}
					idx[d] = 0
					d++
				}
				if d == c.m {
					break
				}
			}
			sum := new(big.Rat)
			for j, n := range counts {
				want := big.NewRat(n, total)
				got := Covered(c.n, c.k, c.m, j)
				if got.Cmp(want) != 0 {
					t.Errorf("j=%d: Covered = %s, enumeration %s", j, got.RatString(), want.RatString())
				}
				sum.Add(sum, got)
			}
			if sum.Cmp(big.NewRat(1, 1)) != 0 {
				t.Errorf("Σ_j Covered = %s, want 1", sum.RatString())
			}
		})
	}
}

// subsets returns every k-subset of n items as a bit set.
func subsets(n, k int) []uint {
	var out []uint
	for s := uint(0); s < 1<<n; s++ {
		if bits.OnesCount(s) == k {
			out = append(out, s)
		}
	}
	return out
}
