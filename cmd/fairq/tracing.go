package main

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/internal/telemetry"
	"github.com/fairq/fairq/queue"
)

// traceExporter, when set in env (tests only), replaces the OTLP exporter
// of the process's tracing (the SDK's in-memory exporter).
type traceExporter = sdktrace.SpanExporter

// withTracing sets up the process's tracing from the OTEL_* variables of
// its environment (package telemetry): off unless they name an exporter.
// With it on, the gateway and the worker make spans and the SQS client
// makes a span per call made under one. Call it before withGateway and
// withWorker.
func (s *system) withTracing(ctx context.Context, e env) error {
	p, err := telemetry.New(ctx, telemetry.Config{
		Getenv:      e.getenv,
		ServiceName: "fairq-" + s.role.String(),
		Version:     buildVersion(),
		InstanceID:  s.instance,
		Exporter:    e.traceExporter,
		Logger:      s.logger,
	})
	if err != nil {
		return err
	}
	s.tracing = p
	if b, ok := s.backend.(*queue.SQS); ok {
		b.Trace(p.TracerProvider())
	}
	return nil
}

// tracerProvider is the provider the parts trace with; nil when tracing is
// off.
func (s *system) tracerProvider() trace.TracerProvider { return s.tracing.TracerProvider() }

// stopTracing exports the spans still queued, within partStop: last, once
// every part that makes spans has stopped.
func (s *system) stopTracing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partStop)
	defer cancel()
	return s.tracing.Shutdown(ctx)
}
