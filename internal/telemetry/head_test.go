package telemetry

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestHeadSamplerAgreesWithTheSDK: for every sampler of
// OTEL_TRACES_SAMPLER, the head decision is the SDK sampler's, for roots
// and for sampled and unsampled parents, over many trace ids.
func TestHeadSamplerAgreesWithTheSDK(t *testing.T) {
	parents := map[string]trace.SpanContext{
		"root":              {},
		"sampled parent":    ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
		"unsampled parent":  ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
		"other flags, kept": ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"),
	}
	for _, name := range []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"} {
		for _, arg := range []string{"", "0", "0.3", "1"} {
			env := map[string]string{"OTEL_TRACES_SAMPLER": name, "OTEL_TRACES_SAMPLER_ARG": arg}
			sdk, head, _, err := readSampler(envOf(env))
			if err != nil {
				t.Fatal(err)
			}
			if head == nil {
				t.Fatalf("%v: no head sampler", env)
			}
			for pname, parent := range parents {
				sampled := 0
				const n = 2000
				for range n {
					tid := NewTraceID()
					if parent.IsValid() {
						// The parent's trace id, varied: a ratio decides on it.
						parent = parent.WithTraceID(tid)
					}
					ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
					want := sdk.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: "s"}).Decision == sdktrace.RecordAndSample
					if got := head.Sampled(parent, tid); got != want {
						t.Fatalf("%s=%q, %s, trace %v: head sampled %v, the SDK's sampler %v", name, arg, pname, tid, got, want)
					}
					if want {
						sampled++
					}
				}
				if name == "traceidratio" && arg == "0.3" && (sampled < n/5 || sampled > n*2/5) {
					t.Errorf("%s=0.3, %s: %d of %d sampled, want about 30%%", name, pname, sampled, n)
				}
			}
		}
	}
}

// TestHeadSamplerOf: a Provider's tracer provider has its sampler's head
// decisions; another provider has none.
func TestHeadSamplerOf(t *testing.T) {
	p, err := New(context.Background(), Config{Getenv: envOf(map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_off"}), Exporter: tracetest.NewNoopExporter()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	h := HeadSamplerOf(p.TracerProvider())
	if h == nil || h.Sampled(trace.SpanContext{}, NewTraceID()) {
		t.Errorf("head sampler %+v of parentbased_always_off: want one that samples no root", h)
	}
	if h := HeadSamplerOf(sdktrace.NewTracerProvider()); h != nil {
		t.Errorf("head sampler of the SDK's own provider %+v, want none", h)
	}
	if h := HeadSamplerOf(nil); h != nil {
		t.Errorf("head sampler of no provider %+v, want none", h)
	}
}

// TestWithTraceID: the root span started under WithTraceID is in the
// trace decided on; without it, in a trace of its own.
func TestWithTraceID(t *testing.T) {
	exp := keep{tracetest.NewInMemoryExporter()}
	p, err := New(context.Background(), Config{Getenv: envOf(nil), Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	tid := NewTraceID()
	tr := p.TracerProvider().Tracer("t")
	_, span := tr.Start(WithTraceID(context.Background(), tid), "decided")
	span.End()
	_, other := tr.Start(context.Background(), "other")
	other.End()
	if got := span.SpanContext().TraceID(); got != tid {
		t.Errorf("root span's trace %v, want the one decided on %v", got, tid)
	}
	if got := other.SpanContext().TraceID(); got == tid || !got.IsValid() {
		t.Errorf("root span without WithTraceID in trace %v, want a new valid one", got)
	}
}

// TestParseTraceparent: the cheap parse agrees with the propagator's on
// what it accepts, and refuses what the propagator refuses.
func TestParseTraceparent(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"unsampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"unknown flags dropped", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02", true},
		{"later version, longer", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever", true},
		{"empty", "", false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"version 00, longer", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", false},
		{"upper case", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseTraceparent(tt.in)
			want := SpanContextOf(tt.in, "")
			if got.IsValid() != tt.ok || want.IsValid() != tt.ok {
				t.Fatalf("valid: parsed %v, propagator %v; want %v", got.IsValid(), want.IsValid(), tt.ok)
			}
			if !got.Equal(want) {
				t.Errorf("parsed %v, want the propagator's %v", got, want)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") }); n != 0 {
		t.Errorf("ParseTraceparent allocates %v times, want 0", n)
	}
}
