package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/queue"
)

// runQueuesCreate creates the live pool, overflow, backlog and dead-letter
// queues with their redrive policy. A second run changes nothing and says so.
func runQueuesCreate(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "queues create")
	path := fs.String("config", "", "configuration file (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Backend != config.BackendSQS {
		return fmt.Errorf("%w: backend is %q: queues create works on the sqs backend (the memory backend creates its queues at start)", errUsage, cfg.Backend)
	}
	logger := newLogger(e, cfg, false)
	b, err := openBackend(ctx, cfg, logger, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	counts, err := createQueues(ctx, b, cfg)
	if err != nil {
		return err
	}
	total := len(queueSpecs(cfg))
	if counts[queue.Unchanged] == total {
		fmt.Fprintf(e.stdout, "all %d queues already exist with the configured attributes: nothing changed\n", total)
		return nil
	}
	fmt.Fprintf(e.stdout, "%d queues: %d created, %d updated, %d unchanged\n",
		total, counts[queue.Created], counts[queue.Updated], counts[queue.Unchanged])
	return nil
}
