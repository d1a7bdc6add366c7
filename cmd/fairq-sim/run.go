package main

import (
	"context"
	"io"
)

// run is the whole program; main only adds the process's context, streams
// and exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runSimulate(ctx, args[1:], stdout, stderr)
}
