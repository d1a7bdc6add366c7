// Command chaos runs fairq's chaos suite: each fault (a worker killed, Redis
// or SQS taken away, the application failing or hanging, the gateway
// killed, a slow-body attack, a worker restarted under a single message) in
// a run of its own against the real fairq binary and the real services, and
// writes a report of what happened to every accepted message.
//
//	go run ./loadtest/chaos                          # every fault, long form (about 16 minutes)
//	go run ./loadtest/chaos -faults sqs-stall,slow-body
//	go run ./loadtest/chaos -short                   # the few-second versions `go test` runs
//
// See package loadtest/harness (RunChaos) for what a run does.
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
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.faults, "faults", "all", "faults to run, comma-separated, or all: "+faultList())
	fs.StringVar(&o.out, "out", "loadtest/out/chaos", "output directory (relative to the module root)")
	fs.BoolVar(&o.short, "short", false, "run the short versions of the faults (as `go test` does)")
	fs.BoolVar(&o.strict, "strict", false, "exit 1 when any expectation fails, enforced or not")
	fs.DurationVar(&o.duration, "duration", 0, "length of the load of every fault (0: each fault's own)")
	fs.DurationVar(&o.at, "at", 0, "when the fault begins, into the load (0: each fault's own)")
	fs.DurationVar(&o.length, "for", 0, "how long the fault lasts (0: each fault's own)")
	fs.Float64Var(&o.rate, "rate", 0, "messages/s offered in all (0: each fault's own)")
	fs.IntVar(&o.attackers, "attackers", 0, "slow-body connections (0: 1000, or 200 with -short)")
	fs.DurationVar(&o.after, "after", 0, "slow-body: how long the gateway is watched after the connections close (0: 60s, or 5s with -short)")
	fs.IntVar(&o.repeat, "repeat", 0, "restart-send rounds (0: 10, or 3 with -short)")
	fs.DurationVar(&o.drain, "drain", 0, "bound on the wait for the queues to drain after the load (0: each fault's own)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaos: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o.command = strings.TrimSpace("go run ./loadtest/chaos " + strings.Join(args, " "))
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := suite(ctx, o, stdout, logger); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 1
	}
	return 0
}

// options are the command's flags.
type options struct {
	faults    string
	out       string
	short     bool
	strict    bool
	duration  time.Duration
	at        time.Duration
	length    time.Duration
	rate      float64
	attackers int
	after     time.Duration
	repeat    int
	drain     time.Duration
	command   string
}
