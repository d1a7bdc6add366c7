package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/internal/lowerhex"
)

// HeadSampler makes the sampling decision of the process's sampler before
// any span is started, from what the span would be started with: its
// parent and its trace id. A span the sampler leaves out costs the SDK a
// non-recording span, the context it is put in, and a goroutine stack deep
// enough for the sampler's calls; with the decision made first, a request
// or a delivery left out makes no span at all and passes its caller's
// trace context on as it came.
//
// It knows the samplers of OTEL_TRACES_SAMPLER: always_on, always_off,
// traceidratio and their parentbased_ forms (whose parent decides when
// there is one, as the SDK's ParentBased with its default delegates).
type HeadSampler struct {
	parentBased bool
	// all samples every root; otherwise a root is sampled when the low
	// 63 bits of its trace id, shifted right once, are below bound (the
	// SDK's TraceIDRatioBased), none when bound is 0.
	all   bool
	bound uint64
}

// newHeadSampler returns the head sampler of an OTEL_TRACES_SAMPLER name
// and ratio (already checked by readSampler), nil for a name it does not
// know.
func newHeadSampler(name string, ratio float64) *HeadSampler {
	h := &HeadSampler{}
	root := name
	if r, ok := strings.CutPrefix(name, "parentbased_"); ok {
		h.parentBased, root = true, r
	}
	switch root {
	case "always_on":
		h.all = true
	case "always_off":
	case "traceidratio":
		// As sdktrace.TraceIDRatioBased: 1 or more samples every trace,
		// 0 or less none.
		switch {
		case ratio >= 1:
			h.all = true
		case ratio > 0:
			h.bound = uint64(ratio * (1 << 63))
		}
	default:
		return nil
	}
	return h
}

// Sampled reports whether the sampler samples a span whose parent is
// parent (the zero SpanContext for a root) in the trace tid (the
// parent's, or the root's own).
func (h *HeadSampler) Sampled(parent trace.SpanContext, tid trace.TraceID) bool {
	if h.parentBased && parent.IsValid() {
		return parent.IsSampled()
	}
	if h.all {
		return true
	}
	return binary.BigEndian.Uint64(tid[8:16])>>1 < h.bound
}

// HeadSamplerOf returns the head sampler of a tracer provider made by a
// Provider, nil for any other (or nil) provider: its sampler is not known,
// and its spans are started to be decided.
func HeadSamplerOf(tp trace.TracerProvider) *HeadSampler {
	if p, ok := tp.(*tracerProvider); ok {
		return p.head
	}
	return nil
}

// tracerProvider is the SDK's tracer provider with the head sampler of its
// sampler.
type tracerProvider struct {
	*sdktrace.TracerProvider
	head *HeadSampler // nil: the sampler is not one it knows
}

// NewTraceID returns a random trace id, for a root whose sampling is
// decided before its span is started (see WithTraceID).
func NewTraceID() trace.TraceID {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

// NewSpanID returns a random span id.
func NewSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

type traceIDKey struct{}

// WithTraceID returns ctx in which the root span a Provider's tracer
// starts has the trace id tid: the one its sampling was decided on.
func WithTraceID(ctx context.Context, tid trace.TraceID) context.Context {
	return context.WithValue(ctx, traceIDKey{}, tid)
}

// idGenerator is the SDK's ID generator of a Provider: random ids (as the
// SDK's own), but a root's trace id is the one WithTraceID put in its
// context, if any.
type idGenerator struct{}

var _ sdktrace.IDGenerator = idGenerator{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, ok := ctx.Value(traceIDKey{}).(trace.TraceID); ok && tid.IsValid() {
		return tid, NewSpanID()
	}
	return NewTraceID(), NewSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return NewSpanID() }

// ParseTraceparent returns the remote span context of a W3C traceparent,
// without tracestate, or the zero SpanContext unless it is well formed:
// lowercase hex, version not ff, ids not all zero, version 00 exactly 55
// characters and a later one followed by a dash if longer. It allocates
// nothing: the cheap first look of a head sampling decision.
func ParseTraceparent(s string) trace.SpanContext {
	if len(s) < TraceparentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}
	}
	if s[0:2] == "ff" || s[0:2] == "00" && len(s) != TraceparentLen || len(s) > TraceparentLen && s[TraceparentLen] != '-' {
		return trace.SpanContext{}
	}
	var version, flags [1]byte
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerhex.Decode(version[:], s[0:2]) || !lowerhex.Decode(tid[:], s[3:35]) || !lowerhex.Decode(sid[:], s[36:52]) || !lowerhex.Decode(flags[:], s[53:55]) {
		return trace.SpanContext{}
	}
	if !tid.IsValid() || !sid.IsValid() {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
}
