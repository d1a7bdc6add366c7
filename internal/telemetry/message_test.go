package telemetry

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const (
	tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ts = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

func TestFormatRoundTrip(t *testing.T) {
	sc := SpanContextOf(tp, ts)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("SpanContextOf(%q) = %v: want a valid, remote, sampled context", tp, sc)
	}
	gotTP, gotTS := Format(sc)
	if gotTP != tp || gotTS != ts || len(gotTP) != TraceparentLen {
		t.Errorf("Format = %q %q, want %q %q", gotTP, gotTS, tp, ts)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "zz"} {
		if SpanContextOf(bad, "").IsValid() {
			t.Errorf("SpanContextOf(%q) is valid", bad)
		}
	}
	if sc := SpanContextOf(tp, "not a tracestate"); !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Errorf("an invalid tracestate: %v, want the traceparent kept and no state", sc)
	}
}

func TestExtractHTTP(t *testing.T) {
	h := http.Header{}
	h.Set("traceparent", tp)
	h.Add("tracestate", "congo=t61rcWkgMzE")
	h.Add("tracestate", "rojo=00f067aa0ba902b7")
	sc := trace.SpanContextFromContext(ExtractHTTP(context.Background(), h))
	if got, _ := Format(sc); got != tp || sc.TraceState().String() != ts {
		t.Errorf("extracted %q %q, want %q and the two tracestate lines as one list %q", got, sc.TraceState().String(), tp, ts)
	}
	if got := Tracestate(h); got != ts {
		t.Errorf("Tracestate = %q, want %q", got, ts)
	}
	if sc := trace.SpanContextFromContext(ExtractHTTP(context.Background(), http.Header{})); sc.IsValid() {
		t.Errorf("extracted %v from no headers", sc)
	}
}

func TestInjectHTTP(t *testing.T) {
	h := http.Header{"traceparent": {"00-11111111111111111111111111111111-2222222222222222-01"}, "Tracestate": {"old=1"}}
	if InjectHTTP(context.Background(), h) {
		t.Fatal("InjectHTTP reported a span context where ctx has none")
	}
	if len(h) != 2 {
		t.Errorf("headers changed without a span: %v", h)
	}
	ctx := trace.ContextWithSpanContext(context.Background(), SpanContextOf(tp, ts))
	if !InjectHTTP(ctx, h) {
		t.Fatal("InjectHTTP reported no span context")
	}
	//nolint:staticcheck // SA1008: the keys are lower-case on purpose, as the W3C spells the headers; this checks they are.
	if h["traceparent"][0] != tp || h["tracestate"][0] != ts || len(h) != 2 {
		t.Errorf("headers %v, want only traceparent %q and tracestate %q, lower-case", h, tp, ts)
	}
}

func TestExtractAllocatesNothingWithoutHeaders(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { ExtractHTTP(ctx, h) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
