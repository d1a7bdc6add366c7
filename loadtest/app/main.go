// Command app is the load test harness's application as a process of its
// own: an HTTP server that fairq's workers push to, answering each push
// after its tenant's processing time (200, or 500 for a message with the
// attribute lt-kind=poison until a POST to /harness/fix), and writing
// each push's begin and end to its standard output, one JSON object a
// line, after a first line with the address it listens on.
//
//	go run ./loadtest/app -work acme=200ms,globex=1s
//
// The fairness experiment's fleet mode runs it (package
// loadtest/harness, Options.App) so that pushes are not answered in the
// process that sends the load. It stops on SIGINT or SIGTERM, after the
// pushes in progress (at most -stop-wait).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	fs.SetOutput(stderr)
	work := fs.String("work", "", "each tenant's processing time: tenant=duration, comma-separated (others: none)")
	stopWait := fs.Duration("stop-wait", 10*time.Second, "how long to wait for the pushes in progress when stopping")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	w, err := harness.ParseWork(*work)
	if err != nil {
		fmt.Fprintf(stderr, "app: %v\n", err)
		return 2
	}
	if err := harness.ServeApp(ctx, w, stdout, *stopWait); err != nil {
		fmt.Fprintf(stderr, "app: %v\n", err)
		return 1
	}
	return 0
}
