package consumer_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/telemetry"
)

// tracing returns a tracer provider that keeps every span in memory.
func tracing(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// producer returns the context of a producer span, as the gateway puts it
// in fairq-meta.
func producer(t testing.TB, tp trace.TracerProvider, state string) (trace.SpanContext, envelope.Meta) {
	t.Helper()
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.ContextWithRemoteSpanContext(context.Background(), telemetry.SpanContextOf(traceparent, "").WithTraceState(ts))
	_, span := tp.Tracer("test").Start(parent, "send", trace.WithSpanKind(trace.SpanKindProducer))
	span.End()
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: "id-1"}
	meta.Traceparent, meta.Tracestate = telemetry.Format(span.SpanContext())
	return span.SpanContext(), meta
}

func attrOf(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func consumerSpans(spans tracetest.SpanStubs) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindConsumer {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceDelivery: the delivery's consumer span is a child of the
// message's producer span and linked to it, and the push carries its
// traceparent and tracestate, so that the application's spans nest under
// it.
func TestTraceDelivery(t *testing.T) {
	tp, exp := tracing(t)
	prod, meta := producer(t, tp, "congo=t61rcWkgMzE")
	b, names := setup(t, "memory")
	send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta, attrs: map[string]string{envelope.AttrTraceparent: traceparent}})
	url, reqs := app(t, nil)
	w := start(t, consumer.Config{Backend: b, Names: names, Handler: newPush(t, consumer.PushConfig{URL: url}), TracerProvider: tp})
	req := recv(t, reqs, 10*time.Second, "push")
	stop(t, w)

	spans := consumerSpans(exp.GetSpans())
	if len(spans) != 1 {
		t.Fatalf("%d consumer spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "process "+names.Live[0] {
		t.Errorf("span name %q, want %q", s.Name, "process "+names.Live[0])
	}
	if s.Parent.SpanID() != prod.SpanID() || s.SpanContext.TraceID() != prod.TraceID() {
		t.Errorf("consumer span's parent %v in trace %v, want the producer span %v in %v", s.Parent.SpanID(), s.SpanContext.TraceID(), prod.SpanID(), prod.TraceID())
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != prod.SpanID() {
		t.Errorf("links %v, want one to the producer span %v", s.Links, prod.SpanID())
	}
	for key, want := range map[attribute.Key]string{
		"messaging.system": "aws_sqs", "messaging.destination.name": names.Live[0], "messaging.message.id": "id-1",
		"fairq.tenant": "acme", "fairq.outcome": "success", "messaging.operation.type": "process",
	} {
		if got := attrOf(s, key).AsString(); got != want {
			t.Errorf("span %s = %q, want %q", key, got, want)
		}
	}
	if n := attrOf(s, "messaging.message.delivery_count").AsInt64(); n != 1 {
		t.Errorf("messaging.message.delivery_count = %d, want 1", n)
	}
	wantTP, wantTS := telemetry.Format(s.SpanContext)
	if got := req.header.Get("traceparent"); got != wantTP {
		t.Errorf("push traceparent %q, want the consumer span's %q", got, wantTP)
	}
	if got := req.header.Get("tracestate"); got != wantTS || got != "congo=t61rcWkgMzE" {
		t.Errorf("push tracestate %q, want the consumer span's %q, the caller's congo=t61rcWkgMzE", got, wantTS)
	}
}

// TestTraceWithoutProducer: a message enqueued without tracing is linked
// to its sender's traceparent; one without any context starts a trace of
// its own.
func TestTraceWithoutProducer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		attrs map[string]string
		links int
	}{
		{"sender's traceparent", map[string]string{envelope.AttrTraceparent: traceparent}, 1},
		{"none", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp, exp := tracing(t)
			b, names := setup(t, "memory")
			send(t, b, names.Live[0], msg{tenant: "acme", attrs: tt.attrs})
			url, reqs := app(t, nil)
			w := start(t, consumer.Config{Backend: b, Names: names, Handler: newPush(t, consumer.PushConfig{URL: url}), TracerProvider: tp})
			req := recv(t, reqs, 10*time.Second, "push")
			stop(t, w)
			spans := consumerSpans(exp.GetSpans())
			if len(spans) != 1 || len(spans[0].Links) != tt.links {
				t.Fatalf("consumer spans %v, want one with %d links", spans, tt.links)
			}
			sender := telemetry.SpanContextOf(traceparent, "")
			if root := !spans[0].Parent.IsValid(); root != (tt.links == 0) || !root && spans[0].Parent.SpanID() != sender.SpanID() {
				t.Errorf("parent %v, want the sender's span when it gave one, none otherwise", spans[0].Parent)
			}
			if want, _ := telemetry.Format(spans[0].SpanContext); req.header.Get("traceparent") != want {
				t.Errorf("push traceparent %q, want the consumer span's %q", req.header.Get("traceparent"), want)
			}
		})
	}
}

// TestNoTracingPassesTraceparent: without tracing the push carries the
// sender's traceparent as before, and now its tracestate.
func TestNoTracingPassesTraceparent(t *testing.T) {
	b, names := setup(t, "memory")
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), Tracestate: "congo=t61rcWkgMzE"}
	send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta, attrs: map[string]string{envelope.AttrTraceparent: traceparent}})
	url, reqs := app(t, nil)
	start(t, consumer.Config{Backend: b, Names: names, Handler: newPush(t, consumer.PushConfig{URL: url})})
	req := recv(t, reqs, 10*time.Second, "push")
	if got := req.header.Get("traceparent"); got != traceparent {
		t.Errorf("push traceparent %q, want the sender's %q", got, traceparent)
	}
	if got := req.header.Get("tracestate"); got != "congo=t61rcWkgMzE" {
		t.Errorf("push tracestate %q, want the sender's", got)
	}
}

// TestTraceVerdicts: a Limiter's decision that does not run the message is
// an event of its delivery's span, with its reason and delay, and the
// span's outcome; the delivery that runs it is another span under the
// same producer.
func TestTraceVerdicts(t *testing.T) {
	tests := []struct {
		name        string
		verdict     consumer.Verdict
		event       string
		outcome     string
		reason      string
		delay       float64
		runs        bool
		fromBacklog bool
	}{
		{"spill", consumer.Verdict{Action: consumer.Spill, Delay: 3 * time.Second, Reason: "rate"}, "spilled", "spilled", "rate", 3, true, false},
		{"backlog", consumer.Verdict{Action: consumer.ToBacklog, Delay: time.Second, Reason: "aged"}, "moved to backlog", "backlog", "aged", 1, true, false},
		{"drop", consumer.Verdict{Action: consumer.Drop, Reason: "aged"}, "dropped", "dropped", "aged", 0, false, false},
		{"purge", consumer.Verdict{Action: consumer.Drop, Reason: consumer.ReasonPurged}, "purged", "purged", "", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tp, exp := tracing(t)
				prod, meta := producer(t, tp, "k=v")
				b, names := setup(t, "memory")
				send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
				h, seen := recorder(func(int, *consumer.Message) error { return nil })
				backlog := newCounter()
				w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, Backlog: backlog, TracerProvider: tp,
					Limiter: spillTimes(1, tt.verdict.Action, tt.verdict.Delay, tt.verdict.Reason)})
				if tt.runs {
					recv(t, seen, time.Minute, "delivery")
				}
				recv(t, backlog.done, time.Minute, "the message's end")
				stop(t, w)

				spans := consumerSpans(exp.GetSpans())
				want := 1
				if tt.runs {
					want = 2
				}
				if len(spans) != want {
					t.Fatalf("%d consumer spans, want %d", len(spans), want)
				}
				for _, s := range spans {
					if s.Parent.SpanID() != prod.SpanID() {
						t.Errorf("span %s's parent %v, want the producer %v", s.Name, s.Parent.SpanID(), prod.SpanID())
					}
				}
				first := spans[0]
				if got := attrOf(first, "fairq.outcome").AsString(); got != tt.outcome {
					t.Errorf("first delivery's outcome %q, want %q", got, tt.outcome)
				}
				if len(first.Events) != 1 || first.Events[0].Name != tt.event {
					t.Fatalf("first delivery's events %v, want one %q", first.Events, tt.event)
				}
				ev := map[attribute.Key]attribute.Value{}
				for _, kv := range first.Events[0].Attributes {
					ev[kv.Key] = kv.Value
				}
				if got := ev["fairq.reason"].AsString(); got != tt.reason {
					t.Errorf("event reason %q, want %q", got, tt.reason)
				}
				if got := ev["fairq.delay_seconds"].AsFloat64(); got != tt.delay {
					t.Errorf("event delay %v, want %v", got, tt.delay)
				}
				if tt.runs {
					if got := attrOf(spans[1], "fairq.outcome").AsString(); got != "success" {
						t.Errorf("second delivery's outcome %q, want success", got)
					}
				}
			})
		})
	}
}

// TestTraceFailure: a failed attempt is an error span with its outcome.
func TestTraceFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, exp := tracing(t)
		_, meta := producer(t, tp, "k=v")
		b, names := setup(t, "memory")
		send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
		h, seen := recorder(func(int, *consumer.Message) error {
			return &consumer.StatusError{Code: 500, Status: "500 Internal Server Error"}
		})
		w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, TracerProvider: tp})
		recv(t, seen, time.Minute, "delivery")
		stop(t, w)
		spans := consumerSpans(exp.GetSpans())
		if len(spans) == 0 {
			t.Fatal("no consumer span")
		}
		s := spans[0]
		if s.Status.Code.String() != "Error" || s.Status.Description != "push: 500 Internal Server Error" || attrOf(s, "fairq.outcome").AsString() != "retry" {
			t.Errorf("status %v %q, outcome %q; want Error, the push's error, retry", s.Status.Code, s.Status.Description, attrOf(s, "fairq.outcome").AsString())
		}
	})
}

// TestTraceHeadSampling: with the process's own tracer provider, which
// decides sampling before a span starts, a delivery whose producer span
// was not sampled makes no span, and the push carries the producer's
// context and tracestate as they came; a sampled producer's delivery has
// its consumer span, whose context the push carries.
func TestTraceHeadSampling(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	env := map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
	p, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(k string) string { return env[k] }, Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	tp := p.TracerProvider()
	if telemetry.HeadSamplerOf(tp) == nil {
		t.Fatal("the provider decides nothing before a span starts")
	}
	unsampled := strings.TrimSuffix(traceparent, "01") + "00"
	for _, tt := range []struct {
		name, tp string
		spans    int
	}{
		{"unsampled producer", unsampled, 0},
		{"sampled producer", traceparent, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp.Reset()
			b, names := setup(t, "memory")
			meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: "id-1", Traceparent: tt.tp, Tracestate: "congo=t61rcWkgMzE"}
			send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
			url, reqs := app(t, nil)
			w := start(t, consumer.Config{Backend: b, Names: names, Handler: newPush(t, consumer.PushConfig{URL: url}), TracerProvider: tp})
			req := recv(t, reqs, 10*time.Second, "push")
			stop(t, w)
			if err := tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := consumerSpans(exp.GetSpans())
			if len(spans) != tt.spans {
				t.Fatalf("%d consumer spans, want %d", len(spans), tt.spans)
			}
			wantTP := tt.tp
			if tt.spans > 0 {
				wantTP, _ = telemetry.Format(spans[0].SpanContext)
				if spans[0].Parent.SpanID() != telemetry.SpanContextOf(tt.tp, "").SpanID() {
					t.Errorf("consumer span's parent %v, want the producer's", spans[0].Parent.SpanID())
				}
			}
			if got := req.header.Get("traceparent"); got != wantTP {
				t.Errorf("push traceparent %q, want %q", got, wantTP)
			}
			if got := req.header.Get("tracestate"); got != "congo=t61rcWkgMzE" {
				t.Errorf("push tracestate %q, want the producer's congo=t61rcWkgMzE", got)
			}
		})
	}
}
