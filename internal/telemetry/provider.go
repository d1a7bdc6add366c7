package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures New.
type Config struct {
	// Getenv reads the OTEL_* variables; required (cmd passes the
	// process's environment).
	Getenv func(string) string
	// ServiceName is service.name when neither OTEL_SERVICE_NAME nor
	// OTEL_RESOURCE_ATTRIBUTES sets it ("fairq-gateway", say).
	ServiceName string
	// Version is service.version; InstanceID, when set, is
	// service.instance.id (the id the process has in the overview).
	// OTEL_RESOURCE_ATTRIBUTES may override either.
	Version    string
	InstanceID string
	// Exporter, when set, replaces the OTLP exporter, and tracing is on
	// whatever the environment says but OTEL_SDK_DISABLED (tests, with
	// the SDK's in-memory exporter).
	Exporter sdktrace.SpanExporter
	// Logger gets one line at start-up saying where traces go, and the
	// SDK's errors (an export that failed); nil discards.
	Logger *slog.Logger
}

// Provider is the process's tracer provider. When the environment asks
// for no exporter it is off: TracerProvider returns nil, and the gateway
// and the worker make no span at all.
type Provider struct {
	tp *tracerProvider // nil when off
}

// New builds the tracer provider the OTEL_* variables describe (see
// readSettings). It makes no request: spans are exported in batches, in
// the background, to the OTLP/HTTP endpoint.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Getenv == nil {
		return nil, errors.New("telemetry: Config.Getenv is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := readSettings(cfg.Getenv, cfg.ServiceName)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if cfg.Exporter != nil && cfg.Getenv(envSDKDisabled) != "true" {
		s.on = true
	}
	if !s.on {
		return &Provider{}, nil
	}
	exp := cfg.Exporter
	if exp == nil {
		if exp, err = newExporter(s, cfg.Version); err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
	}
	res, err := newResource(ctx, s, cfg)
	if err != nil {
		return nil, err
	}
	// The SDK reports what it cannot do (an export that failed) to one
	// process-wide handler: the log.
	log := cfg.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: spans not exported", "err", err)
	}))
	// Spans are queued and exported in batches (2048 queued at most: past
	// that they are dropped, never waited for), so that a slow collector
	// never holds up a request or a job. The ID generator lets a span
	// whose sampling was decided first (HeadSampler) have the trace id
	// it was decided on.
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(s.sampler),
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	where := s.endpoint
	if cfg.Exporter != nil {
		where = "(given exporter)"
	}
	log.Info("tracing on", "endpoint", where, "service", s.serviceName, "sampler", s.samplerName)
	return &Provider{tp: &tracerProvider{TracerProvider: sdk, head: s.head}}, nil
}

// newResource describes the process: service.name, version and instance,
// the SDK's own attributes, then OTEL_RESOURCE_ATTRIBUTES, which win.
func newResource(ctx context.Context, s settings, cfg Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(s.serviceName)}
	if cfg.Version != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.Version))
	}
	if cfg.InstanceID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(cfg.InstanceID))
	}
	for _, kv := range s.attributes {
		if kv.Key != semconv.ServiceNameKey {
			attrs = append(attrs, kv)
		}
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithSchemaURL(semconv.SchemaURL), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Enabled reports whether spans are made and exported.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// TracerProvider returns the provider to give the gateway, the worker and
// the SQS client; nil when tracing is off, which they take as "make no
// span". HeadSamplerOf gives its sampler's head decisions.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return nil
	}
	return p.tp
}

// Shutdown exports the spans still queued and stops the exporter, within
// ctx: call it last, once nothing makes spans any more. It does nothing
// when tracing is off, and is idempotent.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}

// Noop is the tracer provider of the code that wants one whatever happens:
// it makes spans that record nothing.
func Noop() trace.TracerProvider { return noop.NewTracerProvider() }
