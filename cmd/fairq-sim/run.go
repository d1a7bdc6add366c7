package main

import (
	"context"
	"io"
)

// run is the whole program; main only adds the process's context, streams
// and exit. `fairq-sim sweep` sizes a pool; anything else is one
// experiment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && args[1] == "sweep" {
		return runSweep(ctx, args[2:], stdout, stderr)
	}
	return runSimulate(ctx, args[1:], stdout, stderr)
}
