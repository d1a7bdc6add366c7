// Command fairq is the multi-tenant fair-queuing gateway: its HTTP front
// door, its worker daemon, and the tools to run them. See the README.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// gcPercent is the GOGC fairq runs with unless GOGC is set. Its live heap
// is small (a few MB under load: messages pass through, they are not
// kept), so letting the heap grow to 5× it between collections instead of
// 2× costs a few tens of MB and saves most of the collector's CPU, about a
// tenth of the gateway's under load (BENCHMARKS.md). With large messages
// and many connections, cap the heap with GOMEMLIMIT.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
