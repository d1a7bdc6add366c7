package gateway

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/internal/telemetry"
)

// The gateway's spans, when Config.TracerProvider is set: a server span
// per request, named after its route ("POST /v1/messages"), child of the
// caller's traceparent and tracestate; under it a producer span per
// message sent ("send fairq-live-03"), whose context the message carries
// in fairq-meta, so that the worker's spans link to it and nest under it
// whatever queues the message moves through. Without a TracerProvider
// none of this runs: no span, no allocation.

// callerTrace is the trace context a request came with.
type callerTrace struct {
	// parent is the caller's traceparent, kept as the message's
	// traceparent attribute.
	parent string
	// state is the caller's tracestate, kept in fairq-meta.
	state string
}

// traceOf returns the valid traceparent and tracestate of a request.
func traceOf(r *http.Request) callerTrace {
	var c callerTrace
	// As r.Header.Get, without canonicalising the name on every request.
	if v := r.Header[headerTraceparent]; len(v) > 0 && telemetry.ParseTraceparent(v[0]).IsValid() {
		c.parent = v[0]
		if len(r.Header[headerTracestate]) > 0 {
			c.state = telemetry.Tracestate(r.Header)
		}
	}
	return c
}

// headerTracestate is the canonical form of tracestate.
const headerTracestate = "Tracestate"

// The options of the gateway's spans, made once: each option and the
// slice of them would otherwise be allocated at every request.
var (
	serverSpan   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	producerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
)

// newTracer returns the gateway's tracer; nil when tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(telemetry.Scope + "/gateway")
}

// traceRequest is the middleware of the server spans, inside frame. The
// span is started with no attributes and named once the route is known.
//
// With the process's own tracer provider, the sampling of a request is
// decided before any span is started (telemetry.HeadSampler): a request
// left out makes no span, and its messages carry the trace context it
// passes on (unsampledTraceparent). With another provider, a request the
// sampler left out keeps its span in its frame only, not in a context of
// its own (which would copy the request), gets no attributes, and its
// messages no producer span (see startProducers). Either way tracing at a
// small sampling ratio costs little more than none.
func (s *Server) traceRequest(next http.Handler) http.Handler {
	head := telemetry.HeadSamplerOf(s.cfg.TracerProvider)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := r.Context().Value(requestIDKey).(*requestFrame)
		ctx := r.Context()
		if head != nil {
			tp, root := unsampledTraceparent(head, r.Header)
			if tp != "" {
				if f != nil {
					f.traceparent = tp
				}
				next.ServeHTTP(w, r)
				return
			}
			if root.IsValid() {
				ctx = telemetry.WithTraceID(ctx, root) // the trace sampled on
			}
		}
		ctx, span := s.tracer.Start(telemetry.ExtractHTTP(ctx, r.Header), r.Method, serverSpan...)
		defer span.End()
		if f != nil {
			f.span = span
		}
		if !span.IsRecording() {
			next.ServeHTTP(w, r)
			return
		}
		r = r.WithContext(ctx) // the parent of the producer spans and SQS calls
		next.ServeHTTP(w, r)
		route := routeOf(r)
		status := http.StatusOK
		if f != nil {
			status = f.w.status
			span.SetAttributes(telemetry.RequestIDKey.String(f.id))
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(
			semconv.HTTPRequestMethodKey.String(r.Method),
			semconv.HTTPRoute(route),
			semconv.URLPath(r.URL.Path),
			semconv.URLScheme(scheme(r)),
			semconv.HTTPResponseStatusCode(status),
		)
		if r.UserAgent() != "" {
			span.SetAttributes(semconv.UserAgentOriginal(r.UserAgent()))
		}
		if status >= 500 { // a client's error is not the server's
			span.SetStatus(codes.Error, "")
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		}
	})
}

// unsampledTraceparent decides whether a request is sampled, from its
// traceparent. Left out, the request's messages carry the returned
// traceparent, unsampled, so that the worker and the application leave
// them out too: the caller's own, unchanged, or for a request that starts
// a trace, one in a new trace. Sampled, it returns "" and, for a request
// that starts a trace, the trace id it was sampled on, which its span is
// to have.
func unsampledTraceparent(head *telemetry.HeadSampler, h http.Header) (string, trace.TraceID) {
	var parent trace.SpanContext
	v := h[headerTraceparent]
	if len(v) > 0 {
		parent = telemetry.ParseTraceparent(v[0])
	}
	if parent.IsValid() {
		if head.Sampled(parent, parent.TraceID()) {
			return "", trace.TraceID{}
		}
		if len(v[0]) == telemetry.TraceparentLen && !parent.IsSampled() {
			return v[0], trace.TraceID{}
		}
		// Sampled by the caller but not by a sampler that ignores the
		// parent, or a later version's, longer than fairq-meta has room
		// for: its version 00 form, unsampled.
		tp, _ := telemetry.Format(parent.WithTraceFlags(parent.TraceFlags() &^ trace.FlagsSampled))
		return tp, trace.TraceID{}
	}
	tid := telemetry.NewTraceID()
	if head.Sampled(parent, tid) {
		return "", tid
	}
	tp, _ := telemetry.Format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: telemetry.NewSpanID()}))
	return tp, trace.TraceID{}
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// traceparentRoom is what the producer span's traceparent adds to
// fairq-meta: `,"tp":"…"`, when the gateway traces.
func (s *Server) traceparentRoom() int {
	if s.tracer == nil {
		return 0
	}
	return len(`,"tp":""`) + telemetry.TraceparentLen
}

// startProducers starts the producer span of each message about to be
// sent, child of the request's span, and puts its context in the
// message's fairq-meta. The span is named once the queue is picked. The
// messages of a request the sampler left out get no span: they carry the
// request's trace context, unsampled, so that the worker leaves their
// deliveries out too.
func (s *Server) startProducers(ctx context.Context, t string, es []entry) {
	if s.tracer == nil {
		return
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		f, _ := ctx.Value(requestIDKey).(*requestFrame)
		if f != nil && f.traceparent != "" {
			// Decided before any span: the caller's tracestate is
			// already the messages' (prepare).
			for i := range es {
				if e := &es[i]; e.waiting() {
					e.item.meta.Traceparent = f.traceparent
				}
			}
			return
		}
		if f == nil || f.span == nil || !f.span.SpanContext().IsValid() {
			return
		}
		tp, ts := telemetry.Format(f.span.SpanContext())
		for i := range es {
			if e := &es[i]; e.waiting() {
				e.item.meta.Traceparent, e.item.meta.Tracestate = tp, ts
			}
		}
		return
	}
	n := 0
	for i := range es {
		if es[i].waiting() {
			n++
		}
	}
	for i := range es {
		e := &es[i]
		if !e.waiting() {
			continue
		}
		_, span := s.tracer.Start(ctx, "send", producerSpan...)
		e.item.span = span
		e.item.meta.Traceparent, e.item.meta.Tracestate = telemetry.Format(span.SpanContext())
		if span.IsRecording() {
			span.SetAttributes(
				semconv.MessagingSystemAWSSQS,
				semconv.MessagingOperationTypeSend,
				semconv.MessagingOperationName("send"),
				semconv.MessagingMessageID(e.item.meta.ID),
				telemetry.TenantKey.String(t),
			)
			if len(es) > 1 {
				span.SetAttributes(semconv.MessagingBatchMessageCount(n))
			}
		}
	}
}

// nameProducer names a message's producer span after the queue picked.
func nameProducer(item *sendItem, queue string) {
	if item.span == nil || !item.span.IsRecording() {
		return
	}
	item.span.SetName("send " + queue)
	item.span.SetAttributes(semconv.MessagingDestinationName(queue))
}

// endProducers ends the producer spans of the messages sent, with the
// error of those that were not.
func endProducers(es []entry) {
	for i := range es {
		e := &es[i]
		span := e.item.span
		if span == nil {
			continue
		}
		if e.err != nil && span.IsRecording() {
			_, p := problemOf(e.err)
			span.SetStatus(codes.Error, p.Detail)
			span.SetAttributes(semconv.ErrorTypeKey.String(string(p.Code)))
		}
		span.End()
		e.item.span = nil
	}
}

// sendContext returns the context of a SendMessageBatch call: under the
// producer span of one of its messages, a sampled one if any, so that the
// SQS call is a span of that message's trace. Without tracing, ctx.
func sendContext(ctx context.Context, items []sendItem) context.Context {
	var parent trace.Span
	for i := range items {
		sp := items[i].span
		if sp == nil {
			continue
		}
		if parent == nil || sp.IsRecording() && !parent.IsRecording() {
			parent = sp
		}
	}
	if parent == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, parent)
}
