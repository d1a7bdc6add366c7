package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// openBackend returns the queue backend the configuration names, sending
// each message in its tenant's group when sqs.message_group_id is tenant:
// every role opens its backend here, so that every send of a message (the
// gateway's, each move of the worker, a redrive) carries the group.
func openBackend(ctx context.Context, cfg config.Config, logger *slog.Logger, reg prometheus.Registerer) (queue.Backend, error) {
	b, err := openStore(ctx, cfg, logger, reg)
	if err != nil || cfg.SQS.MessageGroupID != config.MessageGroupTenant {
		return b, err
	}
	return queue.NewGrouped(b, envelope.AttrTenant), nil
}

// openStore returns the queue backend itself.
func openStore(ctx context.Context, cfg config.Config, logger *slog.Logger, reg prometheus.Registerer) (queue.Backend, error) {
	switch cfg.Backend {
	case config.BackendSQS:
		b, err := queue.NewSQS(ctx, queue.SQSConfig{
			Region:     cfg.SQS.Region,
			Endpoint:   cfg.SQS.Endpoint,
			Registerer: reg,
			Logger:     logger,
		})
		if err != nil {
			return nil, fmt.Errorf("open sqs backend: %w", err)
		}
		return b, nil
	case config.BackendMemory:
		return queue.NewMemory(queue.MemoryConfig{Logger: logger}), nil
	}
	return nil, fmt.Errorf("unknown backend %q", cfg.Backend)
}

// queueNames returns the names of the deployment's queues.
func queueNames(cfg config.Config) queue.Names {
	return queue.PoolNames(cfg.SQS.QueuePrefix, cfg.Pool.Queues)
}

// redriveBackstop is the maxReceiveCount of the queues' SQS redrive policy.
// The worker dead-letters a message itself after worker.max_retries failed
// attempts, counted across queue moves, with the last error attached; SQS's
// own redrive is the backstop for deliveries the worker never finished (a
// crash mid-job, a release at shutdown), so it sits well above max_retries.
func redriveBackstop(maxRetries int) int {
	return min(max(2*maxRetries, maxRetries+10), queue.MaxReceiveCountLimit)
}

// queueSpecs returns every queue of the deployment, the dead-letter queue
// first so that it exists before the redrive policies that name it.
func queueSpecs(cfg config.Config) []queue.Spec {
	names := queueNames(cfg)
	size := max(cfg.Gateway.MaxMessageSize, queue.MaxMessageSizeDefault)
	specs := []queue.Spec{{
		Name:              names.DLQ,
		VisibilityTimeout: cfg.Worker.VisibilityTimeout,
		MaxMessageSize:    size,
		Retention:         queue.MaxRetention,
	}}
	work := append(append([]string{}, names.Live...), names.Overflow, names.Backlog)
	for _, name := range work {
		specs = append(specs, queue.Spec{
			Name:              name,
			VisibilityTimeout: cfg.Worker.VisibilityTimeout,
			MaxMessageSize:    size,
			DeadLetter:        names.DLQ,
			MaxReceiveCount:   redriveBackstop(cfg.Worker.MaxRetries),
		})
	}
	return specs
}

// createQueues creates every queue idempotently and reports what it did.
func createQueues(ctx context.Context, b queue.Backend, cfg config.Config) (map[queue.CreateResult]int, error) {
	counts := make(map[queue.CreateResult]int)
	for _, spec := range queueSpecs(cfg) {
		res, err := b.Create(ctx, spec)
		if err != nil {
			return counts, fmt.Errorf("create queue %s: %w", spec.Name, err)
		}
		counts[res]++
	}
	return counts, nil
}
