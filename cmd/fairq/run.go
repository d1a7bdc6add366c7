package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

const usage = `fairq — a multi-tenant fair-queuing gateway

Usage:
  fairq dev            [--config F] [--listen ADDR] [--push-url URL]
  fairq gateway        --config F
  fairq worker         --config F
  fairq queues create  --config F
  fairq dlq redrive    --config F [--tenant ID] [--max N]
  fairq keys hash      reads a key on stdin, prints sha256:<hex>
  fairq sim            moved to its own command: go run ./cmd/fairq-sim
  fairq version

Every configuration key can be overridden by FAIRQ_<PATH> (e.g. FAIRQ_REDIS_ADDR).
`

// errUsage marks a command line that could not be understood (exit 2).
var errUsage = errors.New("usage")

// loggedError is an error a daemon already wrote to its log: run exits 1
// without writing it again, so that a daemon's stderr holds only its
// structured records.
type loggedError struct{ err error }

func (e loggedError) Error() string { return e.err.Error() }
func (e loggedError) Unwrap() error { return e.err }

// logFailure writes err, if not nil, to the daemon's log as its last
// record and returns it marked as written.
func logFailure(logger interface {
	Error(msg string, args ...any)
}, err error) error {
	if err == nil || errors.Is(err, errUsage) {
		return err // a usage error is for the person at the terminal: run prints it
	}
	logger.Error("fairq stopped on an error", "err", err)
	return loggedError{err}
}

// env is the process environment as the commands see it; only cmd reads it.
type env struct {
	getenv  func(string) string
	environ func() []string // the variables' names, to catch misspelt FAIRQ_ ones
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// run is the whole program; main only adds the process's context, streams
// and exit.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{getenv: getenv, environ: os.Environ, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[1], args[2:]
	var err error
	switch cmd {
	case "dev":
		err = runDev(ctx, e, rest)
	case "gateway":
		err = runGateway(ctx, e, rest)
	case "worker":
		err = runWorker(ctx, e, rest)
	case "queues":
		err = runSub(ctx, e, "queues", rest, map[string]func(context.Context, env, []string) error{"create": runQueuesCreate})
	case "dlq":
		err = runSub(ctx, e, "dlq", rest, map[string]func(context.Context, env, []string) error{"redrive": runDLQRedrive})
	case "keys":
		if len(rest) != 1 || rest[0] != "hash" {
			fmt.Fprintln(stderr, "usage: fairq keys hash < keyfile")
			return 2
		}
		return runKeysHash(stdin, stdout, stderr)
	case "sim":
		return runSimMoved(stderr)
	case "version", "--version", "-v":
		writeVersion(stdout, readBuild(debug.ReadBuildInfo()))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "fairq: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var logged loggedError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &logged):
		return 1
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fairq %s: %v\n", cmd, err)
		return 2
	default:
		fmt.Fprintf(stderr, "fairq %s: %v\n", cmd, err)
		return 1
	}
}

// runSub dispatches a command with subcommands, such as "queues create".
func runSub(ctx context.Context, e env, name string, args []string, subs map[string]func(context.Context, env, []string) error) error {
	if len(args) == 0 || subs[args[0]] == nil {
		names := make([]string, 0, len(subs))
		for k := range subs {
			names = append(names, k)
		}
		return fmt.Errorf("%w: fairq %s %s", errUsage, name, strings.Join(names, "|"))
	}
	return subs[args[0]](ctx, e, args[1:])
}

// newFlags returns a flag set that writes its usage to stderr and returns
// errors instead of exiting.
func newFlags(e env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("fairq "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// parseFlags parses args and rejects stray positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}
