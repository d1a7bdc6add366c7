// Command burn burns a share of the machine's CPU until it is stopped, in
// short bursts at normal priority, and then says how much it burnt:
//
//	go run ./loadtest/burn -cores 0.7
//
// It is the fairness experiment's contention control (package
// loadtest/harness, Options.Burn): the fleet's quiet tenants run alone
// again beside it, burning about the CPU the noisy run added, to show how
// much of their slowdown the contention for one machine's cores causes on
// its own. It shares nothing with fairq but the cores, so it serves as
// such a control beside any other run as well. It stops on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("burn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cores := fs.Float64("cores", 0, "the CPU to burn, in cores: 0.7 is seven tenths of one (required; at most the machine's cores)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "burn: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if n := runtime.NumCPU(); !(*cores > 0 && *cores <= float64(n)) {
		fmt.Fprintf(stderr, "burn: -cores must be more than 0 and at most the machine's %d, got %g\n", n, *cores)
		return 2
	}
	start := time.Now()
	burnt := harness.Burn(ctx, *cores)
	took := time.Since(start)
	fmt.Fprintf(stdout, "burnt %.3f cores (%.1f s of CPU) over %.1f s\n", burnt.Seconds()/took.Seconds(), burnt.Seconds(), took.Seconds())
	return 0
}
