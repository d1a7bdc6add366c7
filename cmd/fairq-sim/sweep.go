package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/sharding/sim"
)

// runSweep is `fairq-sim sweep [flags]`: sizing a pool. It prints the
// table on stdout.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fairq-sim sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: fairq-sim sweep [flags]

For each tenant count and share of noisy tenants, and each pool of N queues
with shards of k, prints the share of quiet tenants expected to be hurt
(the exact odds that the noisy tenants' shards hold all of a quiet tenant's
queues) beside the share a simulation hurts, and recommends the pool with
the fewest queues whose expected share is within --tolerance. The default
sweep takes seconds; --long sweeps more pools, tenants and noisy shares.
Deterministic for a seed.

Flags:
`)
		fs.PrintDefaults()
	}
	d := sim.SweepDefault()
	var (
		cfg                                  sim.SweepConfig
		long                                 bool
		queues, shards, tenants, noisyShares string
		tolerance                            string
	)
	fs.Uint64Var(&cfg.Seed, "seed", d.Seed, "random seed: the same seed gives the same result")
	fs.BoolVar(&long, "long", false, "the longer sweep: N up to 256, k up to 4, up to 10,000 tenants, 0.1% and 1% noisy, 20 s runs (minutes)")
	fs.StringVar(&queues, "queues", ints(d.Queues), "N of the pools swept, comma-separated")
	fs.StringVar(&shards, "shards", ints(d.ShardSizes), "k of the pools swept, comma-separated")
	fs.StringVar(&tenants, "tenants", ints(d.Tenants), "tenant counts, comma-separated")
	fs.StringVar(&noisyShares, "noisy-share", percents(d.NoisyShares), "shares of the tenants that are noisy, comma-separated (at least one tenant is)")
	fs.StringVar(&tolerance, "tolerance", percents([]float64{d.Tolerance}), "the largest expected share of quiet tenants hurt a recommended pool may have")
	fs.IntVar(&cfg.MaxQueues, "max-queues", d.MaxQueues, "the largest N the recommendation considers")
	fs.IntVar(&cfg.MaxShardSize, "max-shard", d.MaxShardSize, "the largest k the recommendation considers")
	fs.Float64Var(&cfg.QuietRate, "quiet-rate", d.QuietRate, "messages/s of each quiet tenant in the simulation")
	fs.DurationVar(&cfg.Duration, "duration", d.Duration, "simulated time during which tenants send")
	fs.BoolVar(&cfg.NoSimulation, "no-sim", false, "the combinatorics and the recommendation only, without simulating")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fairq-sim sweep: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if long {
		// The long sweep's grid and duration, unless given.
		l := sim.SweepLong()
		if !set["queues"] {
			queues = ints(l.Queues)
		}
		if !set["shards"] {
			shards = ints(l.ShardSizes)
		}
		if !set["tenants"] {
			tenants = ints(l.Tenants)
		}
		if !set["noisy-share"] {
			noisyShares = percents(l.NoisyShares)
		}
		if !set["duration"] {
			cfg.Duration = l.Duration
		}
	}
	if err := sweepLists(&cfg, queues, shards, tenants, noisyShares, tolerance); err != nil {
		fmt.Fprintf(stderr, "fairq-sim sweep: %v\n", err)
		return 2
	}

	start := time.Now()
	res, err := sim.Sweep(ctx, cfg)
	switch {
	case errors.Is(err, sim.ErrInvalidConfig):
		fmt.Fprintf(stderr, "fairq-sim sweep: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "fairq-sim sweep: %v\n", err)
		return 1
	}
	if err := res.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "fairq-sim sweep: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "fairq-sim sweep: simulated %d messages in %.1fs\n", res.Messages, time.Since(start).Seconds())
	return 0
}

// sweepLists parses the comma-separated flags into cfg.
func sweepLists(cfg *sim.SweepConfig, queues, shards, tenants, noisyShares, tolerance string) error {
	var err error
	if cfg.Queues, err = parseInts(queues); err != nil {
		return err
	}
	if cfg.ShardSizes, err = parseInts(shards); err != nil {
		return err
	}
	if cfg.Tenants, err = parseInts(tenants); err != nil {
		return err
	}
	if cfg.NoisyShares, err = parsePercents(noisyShares); err != nil {
		return err
	}
	tol, err := parsePercents(tolerance)
	if err != nil {
		return err
	}
	if len(tol) != 1 {
		return fmt.Errorf("one tolerance, not %q", tolerance)
	}
	cfg.Tolerance = tol[0]
	return nil
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func percents(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(100*x, 'g', -1, 64) + "%"
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parsePercents parses a comma-separated list of shares, each a fraction
// ("0.01") or a percentage ("1%").
func parsePercents(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		num, pct := strings.CutSuffix(f, "%")
		x, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a share (0.01 or 1%%)", f)
		}
		if pct {
			x /= 100
		}
		out = append(out, x)
	}
	return out, nil
}
