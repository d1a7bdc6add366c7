package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fairq/fairq/sharding/sim"
)

// runSimulate is `fairq-sim [flags]`: one experiment. It prints the table
// on stdout and, with --out, writes the CSV files and the chart.
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fairq-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: fairq-sim [flags]
       fairq-sim sweep [flags]   sizes a pool (fairq-sim sweep -h)

Simulates tenants sending into a pool of N queues, one of them (or
--noisy-tenants) noisy, under four strategies (one shared queue, hash to one
queue, shuffle shard with a random queue, shuffle shard with the shallowest
queue), each with and without the noisy tenants, and reports every quiet
tenant's latency against its own baseline. Deterministic for a seed.

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		cfg        sim.Config
		strategies string
		out        string
	)
	fs.Uint64Var(&cfg.Seed, "seed", sim.SeedDefault, "random seed: the same seed gives the same result")
	fs.IntVar(&cfg.Queues, "queues", sim.QueuesDefault, "N, the live queues of the pool")
	fs.IntVar(&cfg.ShardSize, "shard", sim.ShardSizeDefault, "k, the queues of a tenant's shard")
	fs.IntVar(&cfg.Quiet, "quiet", sim.QuietDefault, "quiet tenants")
	fs.Float64Var(&cfg.QuietRate, "quiet-rate", sim.QuietRateDefault, "messages/s of each quiet tenant")
	fs.IntVar(&cfg.Noisy, "noisy-tenants", sim.NoisyDefault, "noisy tenants")
	fs.Float64Var(&cfg.NoisyFactor, "noisy", sim.NoisyFactorDefault, "each noisy tenant's rate as a multiple of a quiet tenant's")
	fs.Float64Var(&cfg.Capacity, "capacity", sim.CapacityDefault, "consumer capacity as a multiple of the total quiet rate")
	fs.DurationVar(&cfg.Service, "service", sim.ServiceDefault, "mean service time of a message")
	fs.StringVar(&cfg.ServiceDist, "service-dist", sim.ServiceExp, "service time distribution: exp or fixed")
	fs.DurationVar(&cfg.Duration, "duration", sim.DurationDefault, "simulated time during which tenants send (the queues drain after)")
	fs.DurationVar(&cfg.Poll, "poll", sim.PollDefault, "how often the gateway reads queue depths (shard-shallowest)")
	fs.Float64Var(&cfg.Hurt, "hurt", sim.HurtDefault, "a quiet tenant is hurt when its p99 exceeds this multiple of its baseline p99")
	fs.IntVar(&cfg.Windows, "windows", sim.WindowsDefault, "time windows of the latency-over-time report")
	fs.StringVar(&strategies, "strategies", "shared,hash,shard-random,shard-shallowest", "strategies to compare, comma-separated")
	fs.StringVar(&out, "out", "", "directory for tenants.csv, summary.csv, windows.csv and latency.png (created if missing); empty writes only the table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fairq-sim: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var err error
	if cfg.Strategies, err = sim.ParseStrategies(strategies); err != nil {
		fmt.Fprintf(stderr, "fairq-sim: %v\n", err)
		return 2
	}

	start := time.Now()
	res, err := sim.Run(ctx, cfg)
	switch {
	case errors.Is(err, sim.ErrInvalidConfig):
		fmt.Fprintf(stderr, "fairq-sim: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "fairq-sim: %v\n", err)
		return 1
	}
	elapsed := time.Since(start)
	if err := res.WriteTable(stdout); err != nil {
		fmt.Fprintf(stderr, "fairq-sim: %v\n", err)
		return 1
	}
	var written []string
	if out != "" {
		if written, err = writeFiles(res, out); err != nil {
			fmt.Fprintf(stderr, "fairq-sim: %v\n", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "fairq-sim: simulated %d messages in %.1fs", res.Messages, elapsed.Seconds())
	if len(written) > 0 {
		fmt.Fprintf(stderr, "; wrote %s", strings.Join(written, ", "))
	}
	fmt.Fprintln(stderr)
	return 0
}

// writeFiles writes the CSV files and the chart of res into dir.
func writeFiles(res *sim.Result, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"summary.csv", res.WriteSummaryCSV},
		{"tenants.csv", res.WriteTenantsCSV},
		{"windows.csv", res.WriteWindowsCSV},
		{"latency.png", res.WritePNG},
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeFile(path, f.write); err != nil {
			return written, fmt.Errorf("write %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
