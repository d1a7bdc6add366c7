// Command fairq-sim is fairq's shuffle-sharding simulator: it shows, in
// numbers and a chart, what a pool of N queues with shards of k buys
// against a noisy tenant, and sweeps N and k to size a pool. It is a
// command of its own so that the server binary does not carry the
// plotting libraries. See the README's isolation section.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
