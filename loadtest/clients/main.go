// Command clients is the load test harness's tenants' clients as a process
// of their own: it offers the load of a configuration (harness
// ClientsConfig, JSON) to fairq's gateways, each tenant's messages at its
// rate, open loop, then writes every request and its answer to a file,
// one JSON object a line.
//
//	go run ./loadtest/clients -config clients.json -out sends.jsonl
//
// The fairness experiment's fleet mode runs it under SCHED_IDLE (`chrt
// --idle 0`; package loadtest/harness, Options.Clients), so that sending
// the load takes no core from the fleet it measures. It stops early on SIGINT or
// SIGTERM, still writing what it sent.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fairq/fairq/loadtest/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "the load to offer: a JSON harness.ClientsConfig (required)")
	out := fs.String("out", "", "where to write the sends, one JSON object a line (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *cfgPath == "" || *out == "" {
		fmt.Fprintln(stderr, "clients: -config and -out are required")
		return 2
	}
	if err := offer(ctx, *cfgPath, *out); err != nil {
		fmt.Fprintf(stderr, "clients: %v\n", err)
		return 1
	}
	return 0
}

func offer(ctx context.Context, cfgPath, out string) error {
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	var cfg harness.ClientsConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := harness.OfferLoad(ctx, cfg, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
