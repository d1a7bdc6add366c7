package consumer

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/internal/telemetry"
)

// The worker's spans, when Config.TracerProvider is set: a consumer span
// per delivery attempt, "process <queue>", from the receive to the
// outcome, with the limiter's decisions as events. It is a child of the
// message's producer span (from fairq-meta, or the traceparent attribute
// of a message enqueued without tracing) and linked to it: the messaging
// conventions ask for the link, and being a child keeps the message's
// whole story, and the application's spans under the push, in the trace
// of the request that enqueued it, sampled or not with it. The handler's
// context carries the span: Push sends its traceparent to the
// application. Without a TracerProvider none of this runs.

// Outcomes of a delivery that the processed counter does not count.
const (
	outcomeSpilled   = "spilled"
	outcomeBacklog   = "backlog"
	outcomePostponed = "postponed"
	outcomeAbandoned = "abandoned"
)

// newTracer returns the worker's tracer; nil when tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(telemetry.Scope + "/consumer")
}

// producerTrace returns the trace context the message was produced in:
// fairq-meta's, or the caller's traceparent for a message enqueued by a
// gateway that did not trace; "" when it has none.
func (d *delivery) producerTrace() (traceparent, tracestate string) {
	if d.meta.Traceparent != "" {
		return d.meta.Traceparent, d.meta.Tracestate
	}
	return d.msg.Traceparent, d.msg.Tracestate
}

// producerContext returns producerTrace as a span context, invalid when
// there is none.
func (d *delivery) producerContext() trace.SpanContext {
	return telemetry.SpanContextOf(d.producerTrace())
}

// startSpan starts the delivery's consumer span and puts it in the job's
// context.
//
// With the process's own tracer provider, a delivery whose producer's
// context the sampler leaves out (telemetry.HeadSampler: under a
// parentbased_ sampler, the producer span was not sampled) makes no span
// and no context: the push carries the producer's context, unsampled, as
// the message's traceparent, so that the application leaves it out too.
func (j *job) startSpan() {
	if j.w.tracer == nil {
		return
	}
	d := j.d
	if head := telemetry.HeadSamplerOf(j.w.cfg.TracerProvider); head != nil {
		tp, _ := d.producerTrace()
		if p := telemetry.ParseTraceparent(tp); p.IsValid() && !p.IsSampled() && !head.Sampled(p, p.TraceID()) {
			d.msg.Traceparent = tp
			return
		}
	}
	ctx := j.ctx
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if p := d.producerContext(); p.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, p)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: p}))
	}
	ctx, j.span = j.w.tracer.Start(ctx, "process "+d.queue, opts...)
	j.ctx = ctx
	if !j.span.IsRecording() {
		return
	}
	j.span.SetAttributes(
		semconv.MessagingSystemAWSSQS,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(d.queue),
		semconv.MessagingMessageID(d.msg.ID),
		telemetry.DeliveryCountKey.Int(d.msg.ReceiveCount),
	)
	if d.msg.Tenant != "" {
		j.span.SetAttributes(telemetry.TenantKey.String(d.msg.Tenant))
	}
	if d.msg.Task != nil {
		j.span.SetAttributes(attribute.String("fairq.task", d.msg.Task.Name))
	}
}

// endSpan ends the delivery's span once its outcome is decided.
func (j *job) endSpan() {
	if j.span != nil {
		j.span.End()
	}
}

// tracing reports whether the delivery's span records.
func (j *job) tracing() bool { return j.span != nil && j.span.IsRecording() }

// outcome records how the delivery ended.
func (j *job) outcome(o string) {
	if j.tracing() {
		j.span.SetAttributes(telemetry.OutcomeKey.String(o))
	}
}

// event records a decision about the message: a spill with its reason and
// delay, a move to the backlog, a drop, a park, a duplicate.
func (j *job) event(name, reason string, delay float64) {
	if !j.tracing() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 2)
	if reason != "" {
		attrs = append(attrs, telemetry.ReasonKey.String(reason))
	}
	if delay > 0 {
		attrs = append(attrs, telemetry.DelayKey.Float64(delay))
	}
	j.span.AddEvent(name, trace.WithAttributes(attrs...))
}

// traceVerdict records a Limiter's verdict that does not run the message.
func (j *job) traceVerdict(v Verdict) {
	if !j.tracing() {
		return
	}
	switch v.Action {
	case Spill:
		j.event("spilled", v.Reason, v.Delay.Seconds())
		j.outcome(outcomeSpilled)
	case ToBacklog:
		j.event("moved to backlog", v.Reason, v.Delay.Seconds())
		j.outcome(outcomeBacklog)
	case Drop:
		if v.Reason == ReasonPurged {
			j.event("purged", "", 0)
			j.outcome(outcomePurged)
		} else {
			j.event("dropped", v.Reason, 0)
			j.outcome(outcomeDropped)
		}
	case Park:
		j.event("parked", "", 0)
		j.outcome(outcomeParked)
	}
}

// failed records a failed attempt.
func (j *job) failed(err error) {
	if j.tracing() {
		j.span.SetStatus(codes.Error, errorText(err))
	}
}
