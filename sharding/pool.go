package sharding

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// MaxQueues is the largest pool a Pool accepts.
const MaxQueues = 1 << 16

// ErrInvalidPool is returned for a pool size or shard size out of range.
var ErrInvalidPool = errors.New("invalid pool")

// Pool is a pool of N queues cut into shards of k. It is immutable and safe
// for concurrent use.
type Pool struct {
	n, k int
}

// NewPool returns the pool of n queues with shards of k: 1 ≤ k ≤ n,
// k ≤ MaxShardSize, n ≤ MaxQueues.
func NewPool(n, k int) (*Pool, error) {
	switch {
	case n < 1 || n > MaxQueues:
		return nil, fmt.Errorf("%w: %d queues, want 1–%d", ErrInvalidPool, n, MaxQueues)
	case k < 1 || k > MaxShardSize:
		return nil, fmt.Errorf("%w: shard size %d, want 1–%d", ErrInvalidPool, k, MaxShardSize)
	case k > n:
		return nil, fmt.Errorf("%w: shard size %d is larger than the pool of %d", ErrInvalidPool, k, n)
	}
	return &Pool{n: n, k: k}, nil
}

// Size returns N, the number of queues.
func (p *Pool) Size() int { return p.n }

// ShardSize returns k, the number of queues of a shard.
func (p *Pool) ShardSize() int { return p.k }

// Shard returns the tenant's shard. It depends only on the tenant id, N and
// k, never on the process or the release: the xxhash64 of the id seeds a
// SplitMix64 sequence that drives Floyd's sampling of k of the N indices.
// Floyd's algorithm gives every k-subset the same probability, and the
// bounded draws reject the few values that would bias them, so shards are
// uniform over all C(N,k) combinations.
//
// Changing this function moves tenants between queues: the golden test
// pins its output.
func (p *Pool) Shard(tenant string) Shard {
	g := splitmix{xxhash.Sum64String(tenant)}
	var s Shard
	s.n = int8(p.k)
	q := s.q[:p.k]
	for i, j := 0, p.n-p.k; i < len(q); i, j = i+1, j+1 {
		bound := uint64(j) + 1
		hi, lo := bits.Mul64(g.next(), bound)
		if lo < bound {
			hi = g.reject(bound, hi, lo)
		}
		t := uint16(hi)
		for _, x := range q[:i] {
			if x == t {
				t = uint16(j)
				break
			}
		}
		// Insert in order; k is small.
		m := i
		for m > 0 && q[m-1] > t {
			q[m] = q[m-1]
			m--
		}
		q[m] = t
	}
	return s
}

// splitmix is the SplitMix64 generator (Steele, Lea, Flood 2014): a fixed
// algorithm, so its output never changes between releases.
type splitmix struct{ s uint64 }

func (g *splitmix) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// reject completes Lemire's multiply-and-reject draw of a uniform integer
// in [0, bound) when the first product (hi, lo) fell in the biased zone:
// it draws again while lo < 2^64 mod bound.
func (g *splitmix) reject(bound, hi, lo uint64) uint64 {
	thresh := -bound % bound
	for lo < thresh {
		hi, lo = bits.Mul64(g.next(), bound)
	}
	return hi
}
