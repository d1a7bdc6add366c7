package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
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

Operating a running gateway through its admin API (--url or FAIRQ_ADMIN_URL,
default http://127.0.0.1:8080; the token in FAIRQ_ADMIN_TOKEN or --token-file F):
  fairq tenants list|show ID|set ID KEY=VALUE…|pause ID [--ingest]|resume ID|purge ID
  fairq keys issue ID | revoke ID KEY_ID
  fairq queues stats [--overview]
  fairq dlq peek|redrive|purge [--tenant ID] [--max N] [--bodies] [--ids a,b]
Tables by default, --json for the API's JSON; each one's --help has an example.
Exit codes: 0 done; 1 the gateway refused or failed; 2 usage; 3 the gateway
cannot be reached; 4 not found.
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
	// traceExporter replaces the OTLP exporter when tracing is on (tests).
	traceExporter traceExporter
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
		err = runSub(ctx, e, "queues", rest, map[string]func(context.Context, env, []string) error{"create": runQueuesCreate, "stats": runQueuesStats})
	case "dlq":
		err = runSub(ctx, e, "dlq", rest, map[string]func(context.Context, env, []string) error{
			"redrive": runDLQRedriveCmd, "peek": runDLQPeek, "purge": runDLQPurge})
	case "tenants":
		err = runSub(ctx, e, "tenants", rest, map[string]func(context.Context, env, []string) error{
			"list": runTenantsList, "show": runTenantsShow, "set": runTenantsSet,
			"pause": runTenantsPause, "resume": runTenantsResume, "purge": runTenantsPurge})
	case "keys":
		err = runSub(ctx, e, "keys", rest, map[string]func(context.Context, env, []string) error{
			"hash": runKeysHashCmd, "issue": runKeysIssue, "revoke": runKeysRevoke})
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
	var exit *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &logged):
		return 1
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintf(stderr, "fairq: %s\n", exit.msg)
		}
		return exit.code
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
		names := slices.Sorted(maps.Keys(subs))
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintf(e.stdout, "Usage: fairq %s %s\n\nfairq %s SUBCOMMAND --help shows each one's flags and an example.\n",
				name, strings.Join(names, "|"), name)
			return flag.ErrHelp
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
