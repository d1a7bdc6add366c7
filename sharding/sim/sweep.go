package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/fairq/fairq/sharding"
)

// SweepConfig describes a sizing sweep: for each tenant count and share of
// noisy tenants, and each pool of N queues with shards of k, the share of
// quiet tenants the combinatorics expects to be hurt beside the share a
// simulation hurts; and the cheapest pool that keeps the expected share
// within a tolerance. Zero fields take SweepDefault's.
type SweepConfig struct {
	Seed        uint64
	Queues      []int     // N of the pools swept
	ShardSizes  []int     // k of the pools swept
	Tenants     []int     // tenant counts, quiet and noisy together
	NoisyShares []float64 // shares of the tenants that are noisy; at least one is
	// Tolerance is the largest expected share of quiet tenants hurt that a
	// recommended pool may have.
	Tolerance float64
	// MaxQueues and MaxShardSize bound the recommendation's search.
	MaxQueues, MaxShardSize int
	QuietRate               float64       // messages/s of each quiet tenant
	Duration                time.Duration // simulated time of sending
	// NoSimulation leaves the simulation out: the combinatorics and the
	// recommendation only.
	NoSimulation bool
}

// SweepDefault is the default sweep: 10 pools for 100 and 1000 tenants, 1%
// of them noisy, in a few seconds.
func SweepDefault() SweepConfig {
	return SweepConfig{
		Seed:         SeedDefault,
		Queues:       []int{8, 16, 32, 64, 100},
		ShardSizes:   []int{2, 3},
		Tenants:      []int{100, 1000},
		NoisyShares:  []float64{0.01},
		Tolerance:    0.001,
		MaxQueues:    1000,
		MaxShardSize: sharding.MaxShardSize,
		QuietRate:    10,
		Duration:     10 * time.Second,
	}
}

// SweepLong is a longer sweep: more pools, up to 10,000 tenants, 0.1% and
// 1% of them noisy, and runs twice as long, in minutes.
func SweepLong() SweepConfig {
	c := SweepDefault()
	c.Queues = []int{8, 16, 32, 64, 100, 128, 256}
	c.ShardSizes = []int{2, 3, 4}
	c.Tenants = []int{100, 1000, 10000}
	c.NoisyShares = []float64{0.001, 0.01}
	c.Duration = 20 * time.Second
	return c
}

// sweepOverload is the noisy tenants' load in a sweep, as a multiple of
// the consumers' capacity C. The consumers take the non-empty queues in
// turn, so with all u queues the noisy tenants cover backlogged each
// drains at C/u at most. The noisy tenants are split into groups that
// share queues (a tenant sends only to its own shard, and the shallowest
// of it, which keeps a group's queues level); a group covering v queues
// sends sweepOverload·C·v/u, more than they can drain, so every covered
// queue grows without bound, which is what hurts a quiet tenant all of
// whose queues are covered. In all the noisy tenants send
// sweepOverload·C, whatever their number: the sweep stays quick.
const sweepOverload = 1.5

func (c SweepConfig) withDefaults() SweepConfig {
	d := SweepDefault()
	c.Seed = cmp.Or(c.Seed, d.Seed)
	if len(c.Queues) == 0 {
		c.Queues = d.Queues
	}
	if len(c.ShardSizes) == 0 {
		c.ShardSizes = d.ShardSizes
	}
	if len(c.Tenants) == 0 {
		c.Tenants = d.Tenants
	}
	if len(c.NoisyShares) == 0 {
		c.NoisyShares = d.NoisyShares
	}
	c.Tolerance = cmp.Or(c.Tolerance, d.Tolerance)
	c.MaxQueues = cmp.Or(c.MaxQueues, d.MaxQueues)
	c.MaxShardSize = cmp.Or(c.MaxShardSize, d.MaxShardSize)
	c.QuietRate = cmp.Or(c.QuietRate, d.QuietRate)
	c.Duration = cmp.Or(c.Duration, d.Duration)
	return c
}

func (c SweepConfig) validate() error {
	for _, n := range c.Queues {
		if n < 1 || n > sharding.MaxQueues {
			return fmt.Errorf("%w: %d queues, want 1–%d", ErrInvalidConfig, n, sharding.MaxQueues)
		}
	}
	for _, k := range c.ShardSizes {
		if k < 1 || k > sharding.MaxShardSize {
			return fmt.Errorf("%w: shard size %d, want 1–%d", ErrInvalidConfig, k, sharding.MaxShardSize)
		}
	}
	for _, t := range c.Tenants {
		if t < 2 {
			return fmt.Errorf("%w: %d tenants, want at least 2 (one quiet, one noisy)", ErrInvalidConfig, t)
		}
	}
	for _, s := range c.NoisyShares {
		if !(s > 0 && s < 1) {
			return fmt.Errorf("%w: noisy share %v, want more than 0 and less than 1", ErrInvalidConfig, s)
		}
	}
	switch {
	case !(c.Tolerance > 0 && c.Tolerance < 1):
		return fmt.Errorf("%w: tolerance %v, want more than 0 and less than 1", ErrInvalidConfig, c.Tolerance)
	case c.MaxQueues < 1 || c.MaxQueues > sharding.MaxQueues:
		return fmt.Errorf("%w: at most %d queues, want 1–%d", ErrInvalidConfig, c.MaxQueues, sharding.MaxQueues)
	case c.MaxShardSize < 1 || c.MaxShardSize > sharding.MaxShardSize:
		return fmt.Errorf("%w: shard size at most %d, want 1–%d", ErrInvalidConfig, c.MaxShardSize, sharding.MaxShardSize)
	}
	return nil
}

// SweepResult is the outcome of a sweep.
type SweepResult struct {
	Config SweepConfig // with the defaults applied
	Groups []SweepGroup
	// Messages counts the messages simulated, with and without the noisy
	// tenants: the sweep's work.
	Messages int
}

// SweepGroup is one tenant count and number of noisy tenants.
type SweepGroup struct {
	Tenants, Noisy int
	Pools          []PoolResult // one per N and k swept with k ≤ N, by N then k
	// Fewest is, for each shard size k up to MaxShardSize, the fewest
	// queues whose expected share of quiet tenants hurt is within the
	// tolerance; k has none up to MaxQueues when it is missing.
	Fewest []Sizing
	// Recommended is the cheapest of Fewest (the fewest queues, then the
	// smallest expected share, then the smallest k); false if none is
	// within the tolerance.
	Recommended Sizing
	Found       bool
}

// Quiet returns the number of quiet tenants.
func (g SweepGroup) Quiet() int { return g.Tenants - g.Noisy }

// PoolResult is one pool of a sweep group.
type PoolResult struct {
	Queues, ShardSize int
	// Expected is the share of quiet tenants the combinatorics expects to
	// be hurt: sharding.Covered(N, k, noisy, k).
	Expected *big.Rat
	// Drawn counts the quiet tenants whose whole shard the noisy tenants'
	// shards cover, as the hash of the simulation's tenant ids drew them;
	// Hurt, the quiet tenants the simulation hurt. Both are -1 without the
	// simulation.
	Drawn, Hurt int
}

// Sizing is a pool and the share of quiet tenants it is expected to leave
// hurt.
type Sizing struct {
	Queues, ShardSize int
	Expected          *big.Rat
}

// NoisyCount returns how many of tenants a share of noisy tenants makes:
// the nearest whole number, at least one and at most tenants − 1.
func NoisyCount(tenants int, share float64) int {
	return max(1, min(tenants-1, int(math.Round(share*float64(tenants)))))
}

// Sweep runs a sizing sweep. The pools are simulated one after the other,
// each on as many cores as Run uses.
func Sweep(ctx context.Context, cfg SweepConfig) (*SweepResult, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	type key struct{ tenants, noisy int }
	var groups []key
	seen := map[key]bool{}
	for _, t := range cfg.Tenants {
		for _, share := range cfg.NoisyShares {
			g := key{t, NoisyCount(t, share)}
			if !seen[g] { // two shares may give the same number of noisy tenants
				seen[g] = true
				groups = append(groups, g)
			}
		}
	}
	// Every simulation's config is checked before the first runs, so that
	// a sweep does not fail minutes in.
	if !cfg.NoSimulation {
		for _, g := range groups {
			for _, n := range cfg.Queues {
				for _, k := range cfg.ShardSizes {
					if k > n {
						continue
					}
					if _, err := sweepRunConfig(cfg, g.tenants, g.noisy, n, k); err != nil {
						return nil, fmt.Errorf("%d tenants, %d noisy, N=%d, k=%d: %w", g.tenants, g.noisy, n, k, err)
					}
				}
			}
		}
	}
	res := &SweepResult{Config: cfg}
	tol := new(big.Rat).SetFloat64(cfg.Tolerance)
	for _, gk := range groups {
		g := SweepGroup{Tenants: gk.tenants, Noisy: gk.noisy}
		g.Fewest = Fewest(g.Noisy, tol, cfg.MaxQueues, cfg.MaxShardSize)
		g.Recommended, g.Found = Cheapest(g.Fewest)
		for _, n := range cfg.Queues {
			for _, k := range cfg.ShardSizes {
				if k > n {
					continue
				}
				p, messages, err := sweepPool(ctx, cfg, g.Tenants, g.Noisy, n, k)
				if err != nil {
					return nil, fmt.Errorf("%d tenants, %d noisy, N=%d, k=%d: %w", g.Tenants, g.Noisy, n, k, err)
				}
				g.Pools = append(g.Pools, p)
				res.Messages += messages
			}
		}
		res.Groups = append(res.Groups, g)
	}
	return res, nil
}

// sweepRunConfig returns the config of the simulation of one pool of a
// sweep group, checked.
func sweepRunConfig(sc SweepConfig, tenantCount, noisy, n, k int) (Config, error) {
	cfg := Config{
		Seed:       sc.Seed,
		Queues:     n,
		ShardSize:  k,
		Quiet:      tenantCount - noisy,
		Noisy:      noisy,
		QuietRate:  sc.QuietRate,
		Duration:   sc.Duration,
		Strategies: []Strategy{ShardShallowest},
	}.withDefaults()
	// The noisy tenants' mean factor, for the config's own checks; each
	// one's rate is set by setNoisyRates.
	cfg.NoisyFactor = sweepOverload * cfg.Capacity * float64(cfg.Quiet) / float64(noisy)
	return cfg, cfg.validate()
}

// sweepPool computes, and unless told not to simulates, one pool of a
// sweep group.
func sweepPool(ctx context.Context, sc SweepConfig, tenantCount, noisy, n, k int) (PoolResult, int, error) {
	p := PoolResult{Queues: n, ShardSize: k, Expected: sharding.Covered(n, k, noisy, k), Drawn: -1, Hurt: -1}
	if sc.NoSimulation {
		return p, 0, nil
	}
	cfg, err := sweepRunConfig(sc, tenantCount, noisy, n, k)
	if err != nil {
		return p, 0, err
	}
	capacity := cfg.Capacity * float64(cfg.Quiet) * cfg.QuietRate
	pool, _ := sharding.NewPool(n, k)
	hash, _ := sharding.NewPool(n, 1)
	ts := tenants(cfg, pool, hash)
	setNoisyRates(n, ts, sweepOverload*capacity)
	res, err := simulate(ctx, cfg, pool, hash, ts, 0)
	if err != nil {
		return p, 0, err
	}
	p.Drawn = res.Odds[k].Observed
	p.Hurt = res.Runs[0].QuietHurt
	return p, res.Messages, nil
}

// setNoisyRates shares a load of total messages/s among the noisy tenants
// of ts, in a pool of n queues: the tenants whose shards share queues,
// directly or through others, form a group, each group sends the share of
// total that its queues are of all the queues the noisy tenants cover, and
// its tenants send alike (sweepOverload says why).
func setNoisyRates(n int, ts []Tenant, total float64) {
	// Union-find over the noisy tenants, joined through the queues.
	parent := make([]int, len(ts))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := make([]int, n) // a noisy tenant using the queue, +1; 0 for none
	for i, t := range ts {
		if !t.Noisy {
			continue
		}
		for q := range t.Shard.Len() {
			queue := t.Shard.Queue(q)
			if o := owner[queue]; o > 0 {
				parent[find(i)] = find(o - 1)
			} else {
				owner[queue] = i + 1
			}
		}
	}
	tenants, queues := map[int]int{}, map[int]int{}
	covered := 0
	for _, o := range owner {
		if o > 0 {
			queues[find(o-1)]++
			covered++
		}
	}
	for i, t := range ts {
		if t.Noisy {
			tenants[find(i)]++
		}
	}
	for i, t := range ts {
		if t.Noisy {
			g := find(i)
			ts[i].Rate = total * float64(queues[g]) / float64(covered) / float64(tenants[g])
		}
	}
}

// FreeShare is the expected share of a pool of n queues that no shard of k
// of noisy tenants uses: each queue escapes each shard with probability
// 1 − k/n. The consumers take the non-empty queues in turn, so the queues
// the noisy tenants fill take 1 − FreeShare of the consumers whatever
// their load, and the quiet tenants get the rest: consumers below
// 1/FreeShare times the quiet load leave the quiet tenants' queues
// growing too.
func FreeShare(n, k, noisy int) float64 {
	return math.Pow(1-float64(k)/float64(n), float64(noisy))
}

// Fewest returns, for each shard size k from 1 to maxShardSize, the fewest
// queues up to maxQueues with which at most tolerance of the quiet
// tenants are expected to have all their queues among those of the noisy
// tenants' shards, with that many noisy tenants; a k that needs more than
// maxQueues is left out.
//
// It searches by bisection: the share falls as N grows (more queues, the
// same number of noisy shards to cover them), which the tests check.
func Fewest(noisy int, tolerance *big.Rat, maxQueues, maxShardSize int) []Sizing {
	var out []Sizing
	for k := 1; k <= maxShardSize && k <= maxQueues; k++ {
		if sharding.Covered(maxQueues, k, noisy, k).Cmp(tolerance) > 0 {
			continue
		}
		if sharding.Covered(k, k, noisy, k).Cmp(tolerance) <= 0 {
			out = append(out, Sizing{Queues: k, ShardSize: k, Expected: sharding.Covered(k, k, noisy, k)})
			continue // a tolerance of 100%
		}
		// The share at lo is over the tolerance, at hi within it.
		lo, hi := k, maxQueues
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if sharding.Covered(mid, k, noisy, k).Cmp(tolerance) <= 0 {
				hi = mid
			} else {
				lo = mid
			}
		}
		out = append(out, Sizing{Queues: hi, ShardSize: k, Expected: sharding.Covered(hi, k, noisy, k)})
	}
	return out
}

// Cheapest returns the sizing with the fewest queues, which the worker
// polls one by one and the gateways read the depth of, then the smallest
// expected share, then the smallest shard; false if there is none.
func Cheapest(sizings []Sizing) (Sizing, bool) {
	if len(sizings) == 0 {
		return Sizing{}, false
	}
	return slices.MinFunc(sizings, func(a, b Sizing) int {
		return cmp.Or(cmp.Compare(a.Queues, b.Queues), a.Expected.Cmp(b.Expected), cmp.Compare(a.ShardSize, b.ShardSize))
	}), true
}
