package queue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	smithytracing "github.com/aws/smithy-go/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Trace makes each SQS call made under a span (the gateway's send of a
// message, say) a client span of its own, child of that span, named as
// the SDK names its operations ("SQS.SendMessageBatch") with the SDK's
// attributes: rpc.system, rpc.service, rpc.method, aws.request_id,
// http.status_code, the attempt number and any error. Calls made under
// no span (receives, depth polls, the worker's batched deletes) make
// none: a trace per long poll would bury the traces of messages. Call it
// before the backend is used; tp nil leaves it as it is.
//
// It uses the SDK's own tracing hook (Options.TracerProvider) and keeps
// only its operation span: the SDK's inner spans (retry loop, attempt,
// signing, the HTTP request) add their attributes to it instead of spans
// of their own.
func (s *SQS) Trace(tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	t := sdkTracer{tracer: tp.Tracer("github.com/fairq/fairq/queue")}
	s.client = sqs.New(s.client.Options(), func(o *sqs.Options) { o.TracerProvider = t })
}

// sdkTracer is the SDK's tracing.TracerProvider and Tracer over an
// OpenTelemetry tracer.
type sdkTracer struct{ tracer trace.Tracer }

func (t sdkTracer) Tracer(string, ...smithytracing.TracerOption) smithytracing.Tracer { return t }

// StartSpan starts the span of an operation (the SDK's one client span)
// when ctx has a span to be its parent; the SDK's inner spans are views of
// their operation's span.
func (t sdkTracer) StartSpan(ctx context.Context, name string, opts ...smithytracing.SpanOption) (context.Context, smithytracing.Span) {
	var o smithytracing.SpanOptions
	for _, f := range opts {
		f(&o)
	}
	if cur, ok := smithytracing.GetSpan(ctx); ok {
		if op := operationOf(cur); op != nil {
			op.setProperties(&o.Properties)
			inner := innerSpan{op}
			return smithytracing.WithSpan(ctx, inner), inner
		}
	}
	if o.Kind != smithytracing.SpanKindClient || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noSpan{}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	op := &sdkSpan{span: span, name: name}
	op.setProperties(&o.Properties)
	return smithytracing.WithSpan(ctx, op), op
}

// operationOf returns the operation span behind an SDK span of ours.
func operationOf(s smithytracing.Span) *sdkSpan {
	switch s := s.(type) {
	case *sdkSpan:
		return s
	case innerSpan:
		return s.sdkSpan
	}
	return nil
}

// sdkSpan is an operation's span as the SDK sees it.
type sdkSpan struct {
	span trace.Span
	name string
}

func (s *sdkSpan) Name() string { return s.name }

func (s *sdkSpan) Context() smithytracing.SpanContext {
	sc := s.span.SpanContext()
	return smithytracing.SpanContext{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String()}
}

func (s *sdkSpan) AddEvent(name string, opts ...smithytracing.EventOption) {
	if !s.span.IsRecording() {
		return
	}
	var o smithytracing.EventOptions
	for _, f := range opts {
		f(&o)
	}
	s.span.AddEvent(name, trace.WithAttributes(attributes(&o.Properties)...))
}

func (s *sdkSpan) SetStatus(status smithytracing.SpanStatus) {
	if status == smithytracing.SpanStatusError {
		s.span.SetStatus(codes.Error, "")
	}
}

func (s *sdkSpan) SetProperty(k, v any) {
	if s.span.IsRecording() {
		s.span.SetAttributes(attributeOf(k, v))
	}
}

func (s *sdkSpan) End() { s.span.End() }

// innerSpan is one of the SDK's inner spans: what is set on it goes to its
// operation's span, and its End ends nothing.
type innerSpan struct{ *sdkSpan }

func (innerSpan) End() {}

func (s *sdkSpan) setProperties(p interface{ Values() map[any]any }) {
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(attributes(p)...)
}

func attributes(p interface{ Values() map[any]any }) []attribute.KeyValue {
	vals := p.Values()
	out := make([]attribute.KeyValue, 0, len(vals))
	for k, v := range vals {
		out = append(out, attributeOf(k, v))
	}
	return out
}

func attributeOf(k, v any) attribute.KeyValue {
	key := attribute.Key(fmt.Sprint(k))
	switch v := v.(type) {
	case string:
		return key.String(v)
	case bool:
		return key.Bool(v)
	case int:
		return key.Int(v)
	case int64:
		return key.Int64(v)
	case float64:
		return key.Float64(v)
	}
	return key.String(fmt.Sprint(v))
}

// noSpan is the SDK span of a call made under no span.
type noSpan struct{}

func (noSpan) Name() string                                  { return "" }
func (noSpan) Context() smithytracing.SpanContext            { return smithytracing.SpanContext{} }
func (noSpan) AddEvent(string, ...smithytracing.EventOption) {}
func (noSpan) SetStatus(smithytracing.SpanStatus)            {}
func (noSpan) SetProperty(any, any)                          {}
func (noSpan) End()                                          {}
