// Command fairness runs fairq's fairness experiment: each scenario in each
// mode (one shared queue, shuffle sharding only, full fairq) against the
// real fairq binary, and writes a report.
//
//	go run ./loadtest/fairness                      # every scenario, every mode
//	go run ./loadtest/fairness -scenario noisy -modes full
//	go run ./loadtest/fairness -short               # the CI smoke version
//	go run ./loadtest/fairness -scenario noisy,outage -modes fleet -redis single,cluster
//
// Mode fleet runs full fairq as a fleet: 2 `fairq gateway` and 4 `fairq
// worker` processes on the fauxqs SQS emulator and one Redis, a single
// redis-server (-redis single) or a 3-master Redis Cluster (-redis
// cluster), both started here; the load goes to the gateways in turn. The
// load is sent from a process of its own (loadtest/clients) under
// SCHED_IDLE, so that the senders take only the cores the fleet leaves
// idle, as clients on machines of their own would; the workers push to an
// application process of its own (loadtest/app), as a fleet's application
// would be. -in-harness keeps both in the harness's process, as in the
// other modes. Each fleet run is checked on its own: no tenant above its
// concurrency at the application, a rate-bound tenant within 10% of its
// process_rate, the quiet tenants' p95 within 1.2× their baseline,
// nothing lost. The baseline is run before the run and again after it,
// and the quiet tenants' p95 is compared with the mean of the two: on a
// shared machine the p95 of the same run drifts from one minute to the
// next, and the report shows by how much (-baseline-after=false runs the
// one before only). Then, unless -control=false, the baseline runs once
// more beside a process (loadtest/burn) burning the CPU the run's
// processes used beyond the baselines', the clients' apart: a contention
// control, not judged, whose p95 the report sets beside the run's, to
// tell how much of the quiet tenants' slowdown the busier cores of one
// machine cause on their own. Its report is fleet.md in -out.
//
// See package loadtest/harness for what a run does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fairness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.scenarios, "scenario", "all", "scenarios to run, comma-separated: noisy, outage, slow, poison, or all")
	fs.StringVar(&o.modes, "modes", "all", "modes to run, comma-separated: single, shuffle, full, fleet (2 gateways, 4 workers), or all (all but fleet)")
	fs.StringVar(&o.backend, "backend", "auto", "memory, sqs (fauxqs + Redis, started here), or auto: memory, except sqs for the outage and the fleet")
	fs.StringVar(&o.redis, "redis", "single", "fleet mode's Redis, comma-separated: single (one redis-server), cluster (a 3-master Redis Cluster), or single,cluster")
	fs.StringVar(&o.out, "out", "loadtest/out/fairness", "output directory (relative to the module root)")
	fs.BoolVar(&o.short, "short", false, "run the short CI versions of the scenarios")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "skip the baseline runs (only the quiet tenants)")
	fs.BoolVar(&o.baselineAfter, "baseline-after", true, "fleet mode: run the baseline again after each run, and compare the quiet tenants' p95 with the mean of the two baselines'")
	fs.BoolVar(&o.control, "control", true, "fleet mode: after a run with a baseline, run the baseline once more beside a process burning the CPU the run added (a contention control, not judged), and report its p95 beside the run's")
	fs.BoolVar(&o.inHarness, "in-harness", false, "fleet mode: send the load and answer the pushes from the harness's own process, as the other modes do, not from a clients process (under SCHED_IDLE) and an application process of their own")
	fs.StringVar(&o.figures, "figures", "", "also copy the charts to this directory (relative to the module root)")
	fs.BoolVar(&o.render, "render", false, "run nothing: write the report again from the records in -out")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fairness: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o.command = "go run ./loadtest/fairness " + strings.Join(args, " ")
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := experiment(ctx, o, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "fairness: %v\n", err)
		return 1
	}
	return 0
}
