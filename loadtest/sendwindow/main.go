// Command sendwindow measures what gateway.send_window saves on SQS and
// what it costs in latency: for each window in turn, round after round,
// `fairq dev` on the SQS emulator, with a delay added to every SQS call,
// takes single messages (POST /v1/messages) at a steady rate from an
// open-loop generator; once the worker has processed them, the SQS
// requests of the gateway and the worker are read from /metrics. It
// prints every run, then the median of each window's runs as a markdown
// table: SendMessageBatch calls and every SQS request per message (over
// the whole run, and during the load after its warmup), the 202's
// latency, and its p99 less that of the run without a window in the same
// round.
//
//	go run ./loadtest/sendwindow                     # 0, 2ms, 5ms, 10ms; 1,000 msg/s for 30 s; 10 ms per call; 3 rounds
//	go run ./loadtest/sendwindow -windows 0,5ms -rounds 5 -duration 20s
//
// Needs Node.js and `npm ci` (the emulator). See harness.RunSendCost.
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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fairq/fairq/loadtest/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command's flags.
type options struct {
	windows  []time.Duration
	rate     float64
	tenants  int
	duration time.Duration
	warmup   time.Duration
	delay    time.Duration
	rounds   int
	out      string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sendwindow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	windows := fs.String("windows", "0,2ms,5ms,10ms", "send windows to measure, comma-separated")
	fs.Float64Var(&o.rate, "rate", 1000, "single messages a second, all tenants together")
	fs.IntVar(&o.tenants, "tenants", 10, "tenants sharing the rate")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "length of each run's load")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "start of each run left out of the latency figures")
	fs.DurationVar(&o.delay, "delay", 10*time.Millisecond, "added to every SQS call")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds, each running every window once")
	fs.StringVar(&o.out, "out", "loadtest/out/sendwindow", "output directory (relative to the module root)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sendwindow: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	for _, w := range strings.Split(*windows, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(w))
		if err != nil || d < 0 {
			fmt.Fprintf(stderr, "sendwindow: -windows: %q is not a duration of 0 or more\n", w)
			return 2
		}
		o.windows = append(o.windows, d)
	}
	if o.rounds < 1 || o.rate <= 0 || o.tenants < 1 {
		fmt.Fprintln(stderr, "sendwindow: -rounds, -rate and -tenants must be positive")
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := measure(ctx, o, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "sendwindow: %v\n", err)
		return 1
	}
	return 0
}

// measure builds fairq, starts the emulator and runs every window once a
// round, then writes the table.
func measure(ctx context.Context, o options, stdout io.Writer, log *slog.Logger) error {
	root, err := harness.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	bin, err := harness.Build(ctx, root, out, false)
	if err != nil {
		return err
	}
	emu, err := harness.StartEmulator(ctx, root, filepath.Join(out, "emulator"))
	if err != nil {
		return err
	}
	defer emu.Stop(context.WithoutCancel(ctx))
	fmt.Fprintf(stdout, "%d single messages/s from %d tenants for %v a run, %v added to every SQS call; %s, %s\n\n",
		int(o.rate), o.tenants, o.duration, o.delay, harness.CPUModel(), time.Now().UTC().Format(time.RFC3339))
	var runs []harness.SendCost
	for round := 1; round <= o.rounds; round++ {
		for _, w := range o.windows {
			res, err := harness.RunSendCost(ctx, harness.SendCostOptions{
				Binary: bin, Dir: filepath.Join(out, fmt.Sprintf("round-%d", round), fmt.Sprintf("window-%v", w)),
				SQSEndpoint: emu.SQSEndpoint, Window: w, Round: round, Delay: o.delay,
				Rate: o.rate, Tenants: o.tenants, Duration: o.duration, Warmup: o.warmup, Logger: log,
			})
			if err != nil {
				return fmt.Errorf("round %d, window %v: %w", round, w, err)
			}
			runs = append(runs, *res)
			fmt.Fprintf(stdout, "round %d, window %v%s: accepted %d of %d, processed %d; SendMessageBatch %.3f, every request %.3f per message (%v), %.3f during the load; 202 p50 %v p99 %v; sent late p99 %v; load %s → %s\n",
				round, w, disturbed(*res), res.Accepted, res.Sent, res.Processed, res.SendPerMessage(), res.PerMessage(), res.Requests, res.SteadyPerMessage(),
				res.Latency.P50.Round(10*time.Microsecond), res.Latency.P99.Round(10*time.Microsecond), res.Late.Round(10*time.Microsecond),
				res.LoadAvg[0], res.LoadAvg[1])
		}
	}
	fmt.Fprintln(stdout)
	harness.WriteSendCostTable(stdout, harness.SummariseSendCost(runs))
	return nil
}

// disturbed marks a run left out of the table.
func disturbed(r harness.SendCost) string {
	if r.Disturbed() {
		return " (disturbed: left out)"
	}
	return ""
}
