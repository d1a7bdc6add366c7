package sim

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/fairq/fairq/sharding"
)

// Result is the outcome of an experiment.
type Result struct {
	Config  Config // with the defaults applied
	Workers int    // consumer slots
	Tenants []Tenant
	// Odds are the exact chances of a quiet tenant's shard having j queues
	// among the noisy tenants' shards, j = 0…k, with the counts seen.
	Odds []Odds
	// PairsSampled is how many pairs of random tenant ids Odds[j].PairShare
	// was measured on.
	PairsSampled int
	// Messages counts the messages of every run, with and without the
	// noisy tenants: the simulator's work.
	Messages int
	Runs     []StrategyResult // one per strategy, in Config.Strategies order
}

// Tenant is a simulated tenant.
type Tenant struct {
	ID    string
	Noisy bool
	Rate  float64        // messages/s
	Shard sharding.Shard // its shuffle shard
	Queue int            // its queue under hash
}

// Odds is the chance of a quiet tenant's shard having J queues among the
// noisy tenants' shards.
type Odds struct {
	J int
	// Exact is sharding.Covered(N, k, noisy tenants, J); with one noisy
	// tenant, C(k,J)·C(N−k,k−J) / C(N,k).
	Exact    *big.Rat
	Expected float64 // Exact × quiet tenants
	Observed int     // quiet tenants with J queues among the noisy tenants'
	// PairShare is the share of sampled pairs of random tenant ids with J
	// queues in common: the hashing against the combinatorics.
	PairShare float64
}

// StrategyResult is one strategy's outcome.
type StrategyResult struct {
	Strategy Strategy
	Messages int // sent in the run with the noisy tenants
	Events   int // events simulated, both runs
	Tenants  []Latency
	// QuietHurt counts quiet tenants whose p99 went over Hurt × baseline.
	QuietHurt int
	// QuietWhole counts quiet tenants all of whose queues the noisy tenants
	// also use under this strategy: the ones they cannot route around.
	QuietWhole int
	// ExpectedHurt is the share of quiet tenants the combinatorics says are
	// exposed: all under shared; those whose queue a noisy tenant hashes to
	// under hash (1/N for one noisy tenant); those sharing at least one
	// queue with the noisy tenants under shard-random; those all of whose
	// queues the noisy tenants use under shard-shallowest.
	ExpectedHurt *big.Rat
	// WindowP99 is, for each time window of sending, the median over quiet
	// tenants of their p99 in that window, with the noisy tenants; and the
	// same without them.
	WindowP99, BaselineWindowP99 []float64
}

// Latency is one tenant's latencies under a strategy, in seconds.
type Latency struct {
	Noisy         bool // a noisy tenant's latencies
	Common        int  // queues it shares with the noisy tenants under this strategy
	Whole         bool // all of its queues are noisy tenants' too
	Messages      int
	Completed     int
	P50, P99, Max float64
	// P99FirstHalf and P99SecondHalf split the messages by sending time.
	P99FirstHalf, P99SecondHalf float64
	BaselineP50, BaselineP99    float64 // the same run without the noisy tenants
	Hurt                        bool    // quiet, and P99 > Hurt × BaselineP99
}

// pairsSampled is how many tenant-id pairs the overlap check draws.
const pairsSampled = 1_000_000

// Run simulates the experiment: for each strategy, a run with the noisy
// tenants and one without, on as many cores as there are.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	return run(ctx, cfg, pairsSampled)
}

// run is Run, sampling the overlap of that many pairs of random tenant ids.
func run(ctx context.Context, cfg Config, pairs int) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pool, _ := sharding.NewPool(cfg.Queues, cfg.ShardSize)
	hash, _ := sharding.NewPool(cfg.Queues, 1)
	return simulate(ctx, cfg, pool, hash, tenants(cfg, pool, hash), pairs)
}

// simulate runs the experiment of cfg, with its defaults and valid, on
// ts, tenants of pool and hash.
func simulate(ctx context.Context, cfg Config, pool, hash *sharding.Pool, ts []Tenant, pairs int) (*Result, error) {
	res := &Result{Config: cfg, Workers: cfg.workers(), PairsSampled: pairs, Tenants: ts}
	res.Odds = odds(cfg, pool, res.Tenants, pairs)
	rates := make([]float64, len(ts))
	for i, t := range ts {
		rates[i] = t.Rate
	}

	type job struct {
		run   int
		noisy bool
	}
	engines := make([][2]*engine, len(cfg.Strategies))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for r, s := range cfg.Strategies {
		shards := make([]sharding.Shard, len(res.Tenants))
		for i, t := range res.Tenants {
			switch s {
			case Hash:
				shards[i] = hash.Shard(t.ID)
			default:
				shards[i] = t.Shard
			}
		}
		for _, j := range []job{{r, true}, {r, false}} {
			g.Go(func() error {
				e := newEngine(cfg, s, shards, rates, j.noisy)
				if err := e.run(gctx); err != nil {
					return err
				}
				k := 1
				if j.noisy {
					k = 0
				}
				engines[j.run][k] = e
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for r, s := range cfg.Strategies {
		res.Runs = append(res.Runs, summarize(cfg, s, res.Tenants, engines[r][0], engines[r][1]))
		res.Messages += sum(engines[r][0].messages) + sum(engines[r][1].messages)
	}
	return res, nil
}

// tenants returns the experiment's tenants, the quiet ones first, with
// their shards in pool and their queues in hash.
func tenants(cfg Config, pool, hash *sharding.Pool) []Tenant {
	width := len(strconv.Itoa(cfg.Quiet - 1))
	noisyWidth := len(strconv.Itoa(cfg.Noisy - 1))
	out := make([]Tenant, 0, cfg.Quiet+cfg.Noisy)
	for i := range cfg.Quiet + cfg.Noisy {
		t := Tenant{ID: fmt.Sprintf("s%d-quiet-%0*d", cfg.Seed, width, i), Rate: cfg.QuietRate}
		if i >= cfg.Quiet {
			t = Tenant{ID: fmt.Sprintf("s%d-noisy", cfg.Seed), Noisy: true, Rate: cfg.QuietRate * cfg.NoisyFactor}
			if cfg.Noisy > 1 {
				t.ID = fmt.Sprintf("s%d-noisy-%0*d", cfg.Seed, noisyWidth, i-cfg.Quiet)
			}
		}
		t.Shard = pool.Shard(t.ID)
		t.Queue = hash.Shard(t.ID).Queue(0)
		out = append(out, t)
	}
	return out
}

// cover is the set of queues some noisy tenant uses, by queue index.
type cover []bool

// coverOf returns the queues of the shards of the noisy tenants in a pool
// of n queues; shards[i] is tenants[i]'s.
func coverOf(n int, tenants []Tenant, shards []sharding.Shard) cover {
	c := make(cover, n)
	for i, t := range tenants {
		if t.Noisy {
			for q := range shards[i].Len() {
				c[shards[i].Queue(q)] = true
			}
		}
	}
	return c
}

// count returns how many queues of s are in c.
func (c cover) count(s sharding.Shard) int {
	n := 0
	for q := range s.Len() {
		if c[s.Queue(q)] {
			n++
		}
	}
	return n
}

// shardsOf returns the tenants' shards in their order.
func shardsOf(tenants []Tenant) []sharding.Shard {
	out := make([]sharding.Shard, len(tenants))
	for i, t := range tenants {
		out[i] = t.Shard
	}
	return out
}

// odds computes the exact distribution of the queues a quiet tenant's
// shard has among the noisy tenants', what the quiet tenants of this
// experiment drew, and the overlap of that many random tenant-id pairs.
func odds(cfg Config, pool *sharding.Pool, tenants []Tenant, pairs int) []Odds {
	k := cfg.ShardSize
	noisy := coverOf(cfg.Queues, tenants, shardsOf(tenants))
	out := make([]Odds, k+1)
	for j := range out {
		exact := sharding.Covered(cfg.Queues, k, cfg.Noisy, j)
		f, _ := exact.Float64()
		out[j] = Odds{J: j, Exact: exact, Expected: f * float64(cfg.Quiet)}
	}
	for _, t := range tenants {
		if !t.Noisy {
			out[noisy.count(t.Shard)].Observed++
		}
	}
	if pairs == 0 {
		return out
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0))
	counts := make([]int, k+1)
	var a, b [16]byte
	for range pairs {
		sa := pool.Shard(string(strconv.AppendUint(append(a[:0], 'p'), r.Uint64(), 36)))
		sb := pool.Shard(string(strconv.AppendUint(append(b[:0], 'p'), r.Uint64(), 36)))
		counts[sa.Common(sb)]++
	}
	for j, c := range counts {
		out[j].PairShare = float64(c) / float64(pairs)
	}
	return out
}

func summarize(cfg Config, s Strategy, tenants []Tenant, noisy, base *engine) StrategyResult {
	run := StrategyResult{Strategy: s, Messages: sum(noisy.messages), Events: noisy.events + base.events}
	n, k, m := cfg.Queues, cfg.ShardSize, cfg.Noisy
	switch s {
	case Shared:
		run.ExpectedHurt = big.NewRat(1, 1)
	case Hash:
		run.ExpectedHurt = sharding.Covered(n, 1, m, 1)
	case ShardRandom:
		run.ExpectedHurt = new(big.Rat).Sub(big.NewRat(1, 1), sharding.Covered(n, k, m, 0))
	case ShardShallowest:
		run.ExpectedHurt = sharding.Covered(n, k, m, k)
	}
	used := coverOf(n, tenants, noisy.shards)
	half := cfg.Windows / 2
	windowP99 := make([][]float64, cfg.Windows)
	baseWindowP99 := make([][]float64, cfg.Windows)
	for i, t := range tenants {
		l := Latency{Noisy: t.Noisy, Messages: noisy.messages[i], Completed: noisy.completed[i]}
		shard := noisy.shards[i]
		switch s {
		case Shared:
			l.Common = 1
		default:
			l.Common = used.count(shard)
		}
		l.Whole = s == Shared || l.Common == shard.Len()
		all := concat(noisy.lat[i])
		l.P50, l.P99, l.Max = quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1)
		l.P99FirstHalf = quantile(concat(noisy.lat[i][:half]), 0.99)
		l.P99SecondHalf = quantile(concat(noisy.lat[i][half:]), 0.99)
		if !t.Noisy {
			b := concat(base.lat[i])
			l.BaselineP50, l.BaselineP99 = quantile(b, 0.5), quantile(b, 0.99)
			l.Hurt = l.P99 > cfg.Hurt*l.BaselineP99
			if l.Hurt {
				run.QuietHurt++
			}
			if l.Whole {
				run.QuietWhole++
			}
			for w := range cfg.Windows {
				windowP99[w] = append(windowP99[w], quantile(slices.Clone(noisy.lat[i][w]), 0.99))
				baseWindowP99[w] = append(baseWindowP99[w], quantile(slices.Clone(base.lat[i][w]), 0.99))
			}
		}
		run.Tenants = append(run.Tenants, l)
	}
	for w := range cfg.Windows {
		run.WindowP99 = append(run.WindowP99, median(windowP99[w]))
		run.BaselineWindowP99 = append(run.BaselineWindowP99, median(baseWindowP99[w]))
	}
	return run
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func concat(parts [][]float32) []float32 {
	return slices.Concat(parts...)
}

// quantile returns the nearest-rank q-quantile of xs, sorting xs; NaN for
// none.
func quantile(xs []float32, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return float64(xs[max(0, min(i, len(xs)-1))])
}

func median(xs []float64) float64 {
	ys := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			ys = append(ys, x)
		}
	}
	if len(ys) == 0 {
		return math.NaN()
	}
	slices.Sort(ys)
	if len(ys)%2 == 1 {
		return ys[len(ys)/2]
	}
	return (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
}
