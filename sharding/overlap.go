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
