package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/telemetry"
	"github.com/fairq/fairq/throttle"
)

// A caller's trace context, sampled.
const (
	callerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTracestate  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// tracing returns a tracer provider that keeps every span in memory.
func tracing(t testing.TB, sampler sdktrace.Sampler) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func withTracing(tp trace.TracerProvider) func(*gateway.Config) {
	return func(c *gateway.Config) { c.TracerProvider = tp }
}

func spansNamed(spans tracetest.SpanStubs, prefix string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// metaOf decodes a queued message's fairq-meta.
func metaOf(t *testing.T, f *fixture, queueName string) (envelope.Meta, map[string]string) {
	t.Helper()
	m := f.receive(t, queueName)
	meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
	if err != nil {
		t.Fatal(err)
	}
	return meta, m.Attributes
}

// TestTraceOneMessage follows one message through the gateway's spans: a
// server span under the caller's, a producer span under it whose context
// is the message's fairq-meta, the caller's tracestate kept and its
// traceparent still the message's attribute.
func TestTraceOneMessage(t *testing.T) {
	tp, exp := tracing(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	f := setup(t, withTracing(tp))
	w := f.do(t, request{key: acmeKey, body: `{"body":"hello"}`,
		header: map[string]string{"traceparent": callerTraceparent, "tracestate": callerTracestate, "User-Agent": "test/1"}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	a := decode[accepted](t, w)

	spans := exp.GetSpans()
	servers, producers := spansNamed(spans, "POST "), spansNamed(spans, "send ")
	if len(servers) != 1 || len(producers) != 1 || len(spans) != 2 {
		t.Fatalf("spans %v, want one server span and one producer span", names(spans))
	}
	srv, prod := servers[0], producers[0]
	caller := telemetry.SpanContextOf(callerTraceparent, callerTracestate)
	if srv.Name != "POST /v1/messages" || srv.SpanKind != trace.SpanKindServer {
		t.Errorf("server span %q kind %v, want POST /v1/messages, server", srv.Name, srv.SpanKind)
	}
	if srv.Parent.SpanID() != caller.SpanID() || srv.SpanContext.TraceID() != caller.TraceID() {
		t.Errorf("server span's parent %v in trace %v, want the caller's %v in %v", srv.Parent.SpanID(), srv.SpanContext.TraceID(), caller.SpanID(), caller.TraceID())
	}
	for key, want := range map[attribute.Key]string{
		"http.route": "/v1/messages", "http.request.method": "POST", "user_agent.original": "test/1",
	} {
		if got := attr(srv, key).AsString(); got != want {
			t.Errorf("server span %s = %q, want %q", key, got, want)
		}
	}
	if got := attr(srv, "http.response.status_code").AsInt64(); got != 202 {
		t.Errorf("server span http.response.status_code = %d, want 202", got)
	}

	if prod.Name != "send "+a.Queue || prod.SpanKind != trace.SpanKindProducer || prod.Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Errorf("producer span %q kind %v parent %v, want %q, producer, child of the server span %v",
			prod.Name, prod.SpanKind, prod.Parent.SpanID(), "send "+a.Queue, srv.SpanContext.SpanID())
	}
	for key, want := range map[attribute.Key]string{
		"messaging.system": "aws_sqs", "messaging.destination.name": a.Queue, "messaging.message.id": a.ID,
		"fairq.tenant": "acme", "messaging.operation.type": "send",
	} {
		if got := attr(prod, key).AsString(); got != want {
			t.Errorf("producer span %s = %q, want %q", key, got, want)
		}
	}
	if attr(prod, "messaging.batch.message_count").Type() != attribute.EMPTY {
		t.Errorf("producer span of a single message has messaging.batch.message_count")
	}

	meta, attrs := metaOf(t, f, a.Queue)
	wantTP, _ := telemetry.Format(prod.SpanContext)
	if meta.Traceparent != wantTP || meta.Tracestate != callerTracestate {
		t.Errorf("fairq-meta trace context %q %q, want the producer span's %q and the caller's tracestate %q", meta.Traceparent, meta.Tracestate, wantTP, callerTracestate)
	}
	if attrs[envelope.AttrTraceparent] != callerTraceparent {
		t.Errorf("traceparent attribute %q, want the caller's %q", attrs[envelope.AttrTraceparent], callerTraceparent)
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestTraceBatch: each message of a batch has its own producer span, with
// the batch's size, and its own context in its fairq-meta.
func TestTraceBatch(t *testing.T) {
	tp, exp := tracing(t, sdktrace.AlwaysSample())
	f := setup(t, withTracing(tp))
	w := f.do(t, request{path: "/v1/messages/batch", key: acmeKey,
		body: `{"messages":[{"body":"a"},{"body":"b"},{"body":"c","attributes":{"fairq-x":"no"}}]}`})
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	producers := spansNamed(exp.GetSpans(), "send ")
	if len(producers) != 2 {
		t.Fatalf("producer spans %v, want 2: the refused message has none", names(producers))
	}
	byID := map[string]tracetest.SpanStub{}
	for _, p := range producers {
		if n := attr(p, "messaging.batch.message_count").AsInt64(); n != 2 {
			t.Errorf("producer span messaging.batch.message_count = %d, want 2", n)
		}
		byID[attr(p, "messaging.message.id").AsString()] = p
	}
	for _, q := range f.names.Live {
		msgs, err := f.mem.Receive(context.Background(), q, receiveAll)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			meta, _ := envelope.Decode(m.Attributes[envelope.AttrMeta])
			p, ok := byID[meta.ID]
			if !ok {
				t.Fatalf("message %s has no producer span", meta.ID)
			}
			if want, _ := telemetry.Format(p.SpanContext); meta.Traceparent != want {
				t.Errorf("message %s: fairq-meta tp %q, want its producer span's %q", meta.ID, meta.Traceparent, want)
			}
			delete(byID, meta.ID)
		}
	}
	if len(byID) != 0 {
		t.Errorf("producer spans without a message: %v", byID)
	}
}

// TestTraceSampledOut: a caller's unsampled trace records no span, and the
// message still carries the request's context, unsampled, so that the
// worker does not sample it either.
func TestTraceSampledOut(t *testing.T) {
	tp, exp := tracing(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	f := setup(t, withTracing(tp))
	unsampled := strings.TrimSuffix(callerTraceparent, "01") + "00"
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"traceparent": unsampled}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("spans %v recorded for an unsampled caller", names(spans))
	}
	meta, _ := metaOf(t, f, decode[accepted](t, w).Queue)
	sc := telemetry.SpanContextOf(meta.Traceparent, "")
	if !sc.IsValid() || sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("fairq-meta tp %q: want a valid, unsampled context in the caller's trace", meta.Traceparent)
	}
}

// TestNoTracing: without a tracer provider the message carries what it
// did before tracing (the caller's traceparent attribute) and the caller's
// tracestate in fairq-meta; a malformed tracestate is dropped.
func TestNoTracing(t *testing.T) {
	f := setup(t)
	for _, tt := range []struct {
		name, state, want string
	}{
		{"tracestate kept", callerTracestate, callerTracestate},
		{"malformed tracestate dropped", "not a tracestate", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"traceparent": callerTraceparent, "tracestate": tt.state}})
			if w.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			meta, attrs := metaOf(t, f, decode[accepted](t, w).Queue)
			if meta.Traceparent != "" || meta.Tracestate != tt.want || attrs[envelope.AttrTraceparent] != callerTraceparent {
				t.Errorf("tp %q, ts %q, traceparent attribute %q; want none, %q and the caller's", meta.Traceparent, meta.Tracestate, attrs[envelope.AttrTraceparent], tt.want)
			}
		})
	}
}

// TestTraceServerError: a request the gateway fails is an error span; one
// the client got wrong is not.
func TestTraceServerError(t *testing.T) {
	tp, exp := tracing(t, sdktrace.AlwaysSample())
	f := setup(t, withTracing(tp))
	f.do(t, request{key: "wrong", body: `{"body":"x"}`})
	f.flaky.FailSends(-1, errors.New("InternalError"))
	f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	servers := spansNamed(exp.GetSpans(), "POST ")
	if len(servers) != 2 {
		t.Fatalf("server spans %v, want 2", names(servers))
	}
	if got := servers[0].Status.Code.String(); got != "Unset" {
		t.Errorf("401's span status %s, want Unset", got)
	}
	if got := servers[1].Status.Code.String(); got != "Error" || attr(servers[1], "http.response.status_code").AsInt64() != 503 {
		t.Errorf("503's span status %s, code %v; want Error, 503", got, attr(servers[1], "http.response.status_code"))
	}
	prod := spansNamed(exp.GetSpans(), "send ")
	if len(prod) != 1 || prod[0].Status.Code.String() != "Error" || attr(prod[0], "error.type").AsString() != "unavailable" {
		t.Errorf("producer spans %v: want one, in error, error.type unavailable", prod)
	}
}

// headTracing returns the tracer provider of a process whose
// OTEL_TRACES_SAMPLER is sampler (with its argument), which decides
// sampling before it starts a span, and a function that returns the spans
// it has exported.
func headTracing(t testing.TB, sampler, arg string) (trace.TracerProvider, func() tracetest.SpanStubs) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	env := map[string]string{"OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": arg}
	p, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(k string) string { return env[k] }, Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	tp := p.TracerProvider()
	if telemetry.HeadSamplerOf(tp) == nil {
		t.Fatalf("%s: the provider decides nothing before a span starts", sampler)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return tp, func() tracetest.SpanStubs {
		if err := tp.(interface{ ForceFlush(context.Context) error }).ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
}

// TestTraceHeadSampledOut: with the sampling decided before any span, a
// caller's unsampled trace makes no span, and its message carries the
// caller's traceparent and tracestate unchanged.
func TestTraceHeadSampledOut(t *testing.T) {
	tp, spans := headTracing(t, "parentbased_always_on", "")
	f := setup(t, withTracing(tp))
	unsampled := strings.TrimSuffix(callerTraceparent, "01") + "00"
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"traceparent": unsampled, "tracestate": callerTracestate}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	meta, attrs := metaOf(t, f, decode[accepted](t, w).Queue)
	if meta.Traceparent != unsampled || meta.Tracestate != callerTracestate || attrs[envelope.AttrTraceparent] != unsampled {
		t.Errorf("fairq-meta tp %q ts %q, traceparent attribute %q; want the caller's %q, %q and %q",
			meta.Traceparent, meta.Tracestate, attrs[envelope.AttrTraceparent], unsampled, callerTracestate, unsampled)
	}
	// The same caller, sampled: the parent decides, and is followed.
	w = f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"traceparent": callerTraceparent}})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	got := spans()
	if len(spansNamed(got, "POST ")) != 1 || len(spansNamed(got, "send ")) != 1 || len(got) != 2 {
		t.Fatalf("spans %v, want the sampled request's server and producer spans only", names(got))
	}
	if tid := got[0].SpanContext.TraceID().String(); tid != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("sampled request's spans in trace %s, want the caller's", tid)
	}
}

// TestTraceHeadRatio: at a ratio, requests that start a trace are sampled
// on their trace id as the SDK's sampler would, before any span: a
// sampled one has its spans in that trace, its message its producer
// span's context; one left out has no span and its message an unsampled
// context of a trace of its own.
func TestTraceHeadRatio(t *testing.T) {
	tp, spans := headTracing(t, "parentbased_traceidratio", "0.5")
	f := setup(t, withTracing(tp))
	ratio := sdktrace.TraceIDRatioBased(0.5)
	type sent struct {
		id  string
		ctx trace.SpanContext
	}
	var msgs []sent
	for range 40 {
		w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
		if w.Code != http.StatusAccepted {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		a := decode[accepted](t, w)
		meta, _ := metaOf(t, f, a.Queue)
		sc := telemetry.SpanContextOf(meta.Traceparent, meta.Tracestate)
		if !sc.IsValid() {
			t.Fatalf("message %s: fairq-meta tp %q, want a valid trace context", a.ID, meta.Traceparent)
		}
		msgs = append(msgs, sent{a.ID, sc})
	}
	byTrace := map[trace.TraceID]tracetest.SpanStubs{}
	for _, s := range spans() {
		byTrace[s.SpanContext.TraceID()] = append(byTrace[s.SpanContext.TraceID()], s)
	}
	sampled := 0
	for _, m := range msgs {
		want := ratio.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: m.ctx.TraceID()}).Decision == sdktrace.RecordAndSample
		if m.ctx.IsSampled() != want {
			t.Errorf("message %s: sampled %v, want the ratio's decision on its trace id, %v", m.id, m.ctx.IsSampled(), want)
		}
		got := byTrace[m.ctx.TraceID()]
		if !m.ctx.IsSampled() {
			if len(got) != 0 {
				t.Errorf("message %s left out, but its trace has spans %v", m.id, names(got))
			}
			continue
		}
		sampled++
		prod := spansNamed(got, "send ")
		if len(got) != 2 || len(prod) != 1 || prod[0].SpanContext.SpanID() != m.ctx.SpanID() || attr(prod[0], "messaging.message.id").AsString() != m.id {
			t.Errorf("message %s sampled: its trace's spans %v, want a server span and the producer span of its context", m.id, names(got))
		}
	}
	if sampled == 0 || sampled == len(msgs) {
		t.Errorf("%d of %d requests sampled at 0.5, want some of each", sampled, len(msgs))
	}
}

// BenchmarkEnqueueTracing is BenchmarkEnqueue's path with tracing off, at
// 1% sampling (OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG=0.01)
// and at 100%, with the tracer provider the process makes of those
// variables, spans queued to a batch processor whose exporter discards
// them.
func BenchmarkEnqueueTracing(b *testing.B) {
	for _, mode := range []struct {
		name, sampler, arg string
	}{
		{"off", "", ""},
		{"ratio=0.01", "parentbased_traceidratio", "0.01"},
		{"ratio=1", "parentbased_always_on", ""},
	} {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/parallelism=%d", mode.name, par), func(b *testing.B) {
				var tp trace.TracerProvider
				if mode.sampler != "" {
					env := map[string]string{"OTEL_TRACES_SAMPLER": mode.sampler, "OTEL_TRACES_SAMPLER_ARG": mode.arg}
					p, err := telemetry.New(context.Background(), telemetry.Config{Getenv: func(k string) string { return env[k] }, Exporter: tracetest.NewNoopExporter()})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
					tp = p.TracerProvider()
				}
				f := setup(b, func(c *gateway.Config) {
					c.Now = time.Now
					c.Limiter = throttle.NewLocalLimiter(throttle.LocalConfig{})
					c.TracerProvider = tp
				})
				body := `{"body":"{\"order\":42,\"note\":\"a short job\"}","attributes":{"kind":"email"}}`
				b.ReportAllocs()
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+benchKey)
						w := httptest.NewRecorder()
						f.srv.ServeHTTP(w, req)
						if w.Code != http.StatusAccepted {
							b.Errorf("status %d: %s", w.Code, w.Body)
							return
						}
					}
				})
			})
		}
	}
}
