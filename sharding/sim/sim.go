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
	// in common with the noisy tenant's, j = 0…k, with the counts seen.
	Odds []Odds
	// PairsSampled is how many pairs of random tenant ids Odds[j].PairShare
	// was measured on.
	PairsSampled int
	// Messages counts the messages of every run, with and without the
	// noisy tenant: the simulator's work.
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

// Odds is the chance of two shards having J queues in common.
type Odds struct {
	J        int
	Exact    *big.Rat // C(k,J)·C(N−k,k−J) / C(N,k)
	Expected float64  // Exact × quiet tenants
	Observed int      // quiet tenants with J queues in common with the noisy one
	// PairShare is the share of sampled pairs of random tenant ids with J
	// queues in common: the hashing against the combinatorics.
	PairShare float64
}

// StrategyResult is one strategy's outcome.
type StrategyResult struct {
	Strategy Strategy
	Messages int // sent in the run with the noisy tenant
	Events   int // events simulated, both runs
	Tenants  []Latency
	// QuietHurt counts quiet tenants whose p99 went over Hurt × baseline.
	QuietHurt int
	// QuietWhole counts quiet tenants all of whose queues the noisy tenant
	// also uses under this strategy: the ones it cannot route around.
	QuietWhole int
	// ExpectedHurt is the share of quiet tenants the combinatorics says are
	// exposed: all under shared, 1/N under hash, those sharing at least one
	// queue under shard-random, those sharing the whole shard under
	// shard-shallowest.
	ExpectedHurt *big.Rat
	// WindowP99 is, for each time window of sending, the median over quiet
	// tenants of their p99 in that window, with the noisy tenant; and the
	// same without it.
	WindowP99, BaselineWindowP99 []float64
}

// Latency is one tenant's latencies under a strategy, in seconds.
type Latency struct {
	Common        int  // queues in common with the noisy tenant under this strategy
	Whole         bool // all of its queues are the noisy tenant's too
	Messages      int
	Completed     int
	P50, P99, Max float64
	// P99FirstHalf and P99SecondHalf split the messages by sending time.
	P99FirstHalf, P99SecondHalf float64
	BaselineP50, BaselineP99    float64 // the same run without the noisy tenant
	Hurt                        bool    // quiet, and P99 > Hurt × BaselineP99
}

// pairsSampled is how many tenant-id pairs the overlap check draws.
const pairsSampled = 1_000_000

// Run simulates the experiment: for each strategy, a run with the noisy
// tenant and one without, on as many cores as there are.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pool, _ := sharding.NewPool(cfg.Queues, cfg.ShardSize)
	hash, _ := sharding.NewPool(cfg.Queues, 1)
	res := &Result{Config: cfg, Workers: cfg.workers(), PairsSampled: pairsSampled}
	width := len(strconv.Itoa(cfg.Quiet - 1))
	for i := range cfg.Quiet + 1 {
		t := Tenant{ID: fmt.Sprintf("s%d-quiet-%0*d", cfg.Seed, width, i), Rate: cfg.QuietRate}
		if i == cfg.Quiet {
			t = Tenant{ID: fmt.Sprintf("s%d-noisy", cfg.Seed), Noisy: true, Rate: cfg.QuietRate * cfg.NoisyFactor}
		}
		t.Shard = pool.Shard(t.ID)
		t.Queue = hash.Shard(t.ID).Queue(0)
		res.Tenants = append(res.Tenants, t)
	}
	res.Odds = odds(cfg, pool, res.Tenants)

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
				e := newEngine(cfg, s, shards, j.noisy)
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

// odds computes the exact overlap distribution, what the quiet tenants of
// this experiment drew, and the overlap of random tenant-id pairs.
func odds(cfg Config, pool *sharding.Pool, tenants []Tenant) []Odds {
	k := cfg.ShardSize
	noisy := tenants[len(tenants)-1].Shard
	out := make([]Odds, k+1)
	for j := range out {
		exact := sharding.Overlap(cfg.Queues, k, j)
		f, _ := exact.Float64()
		out[j] = Odds{J: j, Exact: exact, Expected: f * float64(cfg.Quiet)}
	}
	for _, t := range tenants[:len(tenants)-1] {
		out[t.Shard.Common(noisy)].Observed++
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0))
	counts := make([]int, k+1)
	var a, b [16]byte
	for range pairsSampled {
		sa := pool.Shard(string(strconv.AppendUint(append(a[:0], 'p'), r.Uint64(), 36)))
		sb := pool.Shard(string(strconv.AppendUint(append(b[:0], 'p'), r.Uint64(), 36)))
		counts[sa.Common(sb)]++
	}
	for j, c := range counts {
		out[j].PairShare = float64(c) / pairsSampled
	}
	return out
}

func summarize(cfg Config, s Strategy, tenants []Tenant, noisy, base *engine) StrategyResult {
	run := StrategyResult{Strategy: s, Messages: sum(noisy.messages), Events: noisy.events + base.events}
	n := cfg.Queues
	switch s {
	case Shared:
		run.ExpectedHurt = big.NewRat(1, 1)
	case Hash:
		run.ExpectedHurt = big.NewRat(1, int64(n))
	case ShardRandom:
		run.ExpectedHurt = new(big.Rat).Sub(big.NewRat(1, 1), sharding.Overlap(n, cfg.ShardSize, 0))
	case ShardShallowest:
		run.ExpectedHurt = sharding.Overlap(n, cfg.ShardSize, cfg.ShardSize)
	}
	noisyShard := noisy.shards[len(tenants)-1]
	half := cfg.Windows / 2
	windowP99 := make([][]float64, cfg.Windows)
	baseWindowP99 := make([][]float64, cfg.Windows)
	for i, t := range tenants {
		l := Latency{Messages: noisy.messages[i], Completed: noisy.completed[i]}
		shard := noisy.shards[i]
		switch s {
		case Shared:
			l.Common = 1
		default:
			l.Common = shard.Common(noisyShard)
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
