package telemetry

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of fairq's spans beyond the semantic conventions' own.
const (
	// TenantKey is the tenant of a message, on the producer and consumer
	// spans.
	TenantKey = attribute.Key("fairq.tenant")
	// OutcomeKey is how a delivery attempt ended (success, retry,
	// retry_after, dead_lettered, dropped, purged, duplicate, spilled,
	// backlog, parked, postponed, released), on the consumer span.
	OutcomeKey = attribute.Key("fairq.outcome")
	// ReasonKey and DelayKey describe a limiter's decision, on its event.
	ReasonKey = attribute.Key("fairq.reason")
	DelayKey  = attribute.Key("fairq.delay_seconds")
	// DeliveryCountKey is the delivery's receive count, counted across
	// queue moves (X-Aws-Sqsd-Receive-Count).
	DeliveryCountKey = attribute.Key("messaging.message.delivery_count")
	// RequestIDKey is the X-Request-Id of a gateway request.
	RequestIDKey = attribute.Key("fairq.request_id")
)

// Scope is the instrumentation scope of fairq's tracers.
const Scope = "github.com/fairq/fairq"

// propagator is W3C Trace Context and Baggage, what fairq reads from a
// request and writes to a push.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// ExtractHTTP returns ctx with the trace context and baggage of a
// request's traceparent, tracestate and baggage headers; an invalid
// traceparent is ignored, as is an invalid tracestate.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) == 0 && len(h["Baggage"]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, headerCarrier(h))
}

// InjectHTTP sets the traceparent and tracestate headers (lower-case on
// the wire, as a push has always sent them) to the span context of ctx,
// and reports whether it had one to set; it leaves h alone otherwise.
func InjectHTTP(ctx context.Context, h http.Header) bool {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return false
	}
	tp, ts := Format(sc)
	delete(h, "Traceparent")
	delete(h, "Tracestate")
	h["traceparent"] = []string{tp}
	if ts != "" {
		h["tracestate"] = []string{ts}
	} else {
		delete(h, "tracestate")
	}
	return true
}

// Format returns the W3C traceparent and tracestate of a span context.
func Format(sc trace.SpanContext) (traceparent, tracestate string) {
	const hexDigits = "0123456789abcdef"
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, c := range tid {
		b[3+2*i], b[4+2*i] = hexDigits[c>>4], hexDigits[c&0xf]
	}
	b[35] = '-'
	for i, c := range sid {
		b[36+2*i], b[37+2*i] = hexDigits[c>>4], hexDigits[c&0xf]
	}
	b[52] = '-'
	f := sc.TraceFlags()
	b[53], b[54] = hexDigits[f>>4], hexDigits[f&0xf]
	return string(b[:]), sc.TraceState().String()
}

// TraceparentLen is the length of a traceparent Format writes (version
// 00), for sizing a message before its producer span exists.
const TraceparentLen = 55

// SpanContextOf parses a W3C traceparent and tracestate into a remote span
// context; invalid: the zero SpanContext. An invalid tracestate is
// dropped, the traceparent kept.
func SpanContextOf(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	c := mapCarrier{traceparent: traceparent, tracestate: tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}

// Tracestate returns a caller's tracestate headers as one value, or "" if
// it is not a valid W3C tracestate.
func Tracestate(h http.Header) string {
	v := h["Tracestate"]
	if len(v) == 0 {
		return ""
	}
	ts, err := trace.ParseTraceState(strings.Join(v, ","))
	if err != nil {
		return ""
	}
	return ts.String()
}

// headerCarrier reads an http.Header by the canonical names of the
// propagated headers, without canonicalising a name per call.
type headerCarrier http.Header

func (c headerCarrier) Get(key string) string {
	var v []string
	switch key {
	case "traceparent":
		v = c["Traceparent"]
	case "tracestate":
		// Several tracestate lines are one list (W3C Trace Context).
		if v = c["Tracestate"]; len(v) > 1 {
			return strings.Join(v, ",")
		}
	case "baggage":
		if v = c["Baggage"]; len(v) > 1 {
			return strings.Join(v, ",")
		}
	default:
		v = http.Header(c).Values(key)
	}
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (c headerCarrier) Set(key, value string) { http.Header(c).Set(key, value) }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// mapCarrier holds a message's trace context for the propagator.
type mapCarrier struct{ traceparent, tracestate string }

func (c mapCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (mapCarrier) Set(string, string) {}
func (mapCarrier) Keys() []string     { return []string{"traceparent", "tracestate"} }
