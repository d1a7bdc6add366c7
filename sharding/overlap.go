package sharding

import "math/big"

// Binomial returns C(n, k), the number of k-subsets of n items, exactly; 0
// when k < 0 or k > n.
func Binomial(n, k int) *big.Int {
	if k < 0 || k > n || n < 0 {
		return new(big.Int)
	}
	return new(big.Int).Binomial(int64(n), int64(k))
}

// Overlap returns the exact probability that two tenants' shards in a pool
// of n queues with shards of k have exactly j queues in common, for shards
// drawn independently and uniformly: C(k,j)·C(n−k,k−j) / C(n,k), the
// hypergeometric distribution. Overlap(n, k, k) = 1/C(n,k) is the chance
// that a noisy tenant holds the whole of another tenant's shard, the only
// case in which shallowest-queue picking cannot route around it.
func Overlap(n, k, j int) *big.Rat {
	num := new(big.Int).Mul(Binomial(k, j), Binomial(n-k, k-j))
	den := Binomial(n, k)
	if den.Sign() == 0 {
		return new(big.Rat)
	}
	return new(big.Rat).SetFrac(num, den)
}

// Covered returns the exact probability that a tenant's shard has exactly
// j of its queues among those of m other tenants' shards together, in a
// pool of n queues with shards of k, all drawn independently and
// uniformly. It is the odds of a quiet tenant against m noisy ones: under
// shallowest-queue picking it is hurt only when all its queues are
// covered, with probability Covered(n, k, m, k); Covered(n, k, 1, j) is
// Overlap(n, k, j).
//
// By inclusion–exclusion over the j covered queues: a given set of s
// queues escapes all m shards with probability (C(n−s,k)/C(n,k))^m, so
//
//	Covered(n, k, m, j) = C(k,j) · Σ_{i=0..j} (−1)^i C(j,i) (C(n−k+j−i, k) / C(n,k))^m.
//
// It is 0 when j is not in [0, k], k not in [0, n], or m < 0.
func Covered(n, k, m, j int) *big.Rat {
	if j < 0 || j > k || k < 0 || k > n || m < 0 {
		return new(big.Rat)
	}
	exp := big.NewInt(int64(m))
	num := new(big.Int)
	var term big.Int
	for i := 0; i <= j; i++ {
		term.Exp(Binomial(n-k+j-i, k), exp, nil)
		term.Mul(&term, Binomial(j, i))
		if i%2 == 0 {
			num.Add(num, &term)
		} else {
			num.Sub(num, &term)
		}
	}
	num.Mul(num, Binomial(k, j))
	den := new(big.Int).Exp(Binomial(n, k), exp, nil)
	return new(big.Rat).SetFrac(num, den)
}
