package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/fairq/fairq/internal/telemetry"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// A caller's trace context, sampled, with a tracestate.
const (
	callerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTracestate  = "congo=t61rcWkgMzE"
	tracedKey         = "fq_traced_test_key"
)

// keptSpans is the SDK's in-memory exporter, whose spans outlive the
// provider's Shutdown (tracetest's clears them), so that a test reads
// them once `fairq dev` has stopped and flushed.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// runTraced runs `fairq dev` with the given environment and returns the
// system, its base URL and a stop that shuts it down and waits, as SIGTERM
// would.
func runTraced(t *testing.T, yaml string, o devOptions, e env) (s *system, base string, stop func()) {
	t.Helper()
	o.config = filepath.Join(t.TempDir(), "fairq.yaml")
	if err := os.WriteFile(o.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &testenv.LogBuffer{}
	e.stdin, e.stdout, e.stderr = strings.NewReader(""), io.Discard, stderr
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	type up struct {
		s    *system
		addr net.Addr
	}
	upc := make(chan up, 1)
	done := make(chan error, 1)
	go func() { done <- dev(ctx, e, o, func(s *system, a net.Addr) { upc <- up{s, a} }) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("dev returned %v; stderr:\n%s", err, stderr)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case u := <-upc:
		return u.s, "http://" + u.addr.String(), stop
	case err := <-done:
		t.Fatalf("dev exited early: %v; stderr:\n%s", err, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("dev did not come up; stderr:\n%s", stderr)
	}
	return nil, "", nil
}

// tracedYAML is a dev configuration with one tenant and the application
// at url.
func tracedYAML(backend, url string) string {
	return backend + fmt.Sprintf("listen: 127.0.0.1:0\ntenants:\n  - id: acme\n    api_keys: [%q]\nworker:\n  push_url: %q\n", tenant.HashKey(tracedKey), url)
}

// enqueueTraced posts one message with the caller's trace context and
// returns its queue.
func enqueueTraced(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{"body":"traced"}`))
	req.Header.Set("Authorization", "Bearer "+tracedKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", callerTraceparent)
	req.Header.Set("tracestate", callerTracestate)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/messages: %d %s", res.StatusCode, body)
	}
	var a struct{ Queue string }
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	return a.Queue
}

// TestTracingSpanTree follows one message through `fairq dev` on each
// backend: the gateway's server span under the caller's, its producer
// span, the SQS call under it on SQS, the worker's consumer span under
// the producer and linked to it, and the push to the application carrying
// the consumer span's context and the caller's tracestate.
func TestTracingSpanTree(t *testing.T) {
	backends := map[string]func(t *testing.T) string{
		"memory": func(*testing.T) string { return "backend: memory\n" },
		"sqs": func(t *testing.T) string {
			endpoint := testenv.SQSEndpoint(t)
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			return fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: %s, region: us-east-1}\n", endpoint, testenv.Prefix(t))
		},
	}
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			url, pushes := app(t, func(int) int { return http.StatusOK })
			exp := keptSpans{tracetest.NewInMemoryExporter()}
			s, base, stop := runTraced(t, tracedYAML(backend(t), url), devOptions{pushURL: url}, env{traceExporter: exp})
			if name == "sqs" {
				if _, err := createQueues(t.Context(), s.backend, s.cfg); err != nil {
					t.Fatal(err)
				}
			}
			q := enqueueTraced(t, base)
			p := next(t, pushes, 20*time.Second)
			stop() // the spans are ended and flushed

			spans := exp.GetSpans()
			one := func(name string) tracetest.SpanStub {
				t.Helper()
				var found []tracetest.SpanStub
				for _, s := range spans {
					if s.Name == name {
						found = append(found, s)
					}
				}
				if len(found) != 1 {
					t.Fatalf("%d spans %q, want 1; spans: %v", len(found), name, spanNames(spans))
				}
				return found[0]
			}
			caller := telemetry.SpanContextOf(callerTraceparent, callerTracestate)
			server := one("POST /v1/messages")
			producer := one("send " + q)
			consumer := one("process " + q)
			for _, c := range []struct {
				name   string
				span   tracetest.SpanStub
				kind   trace.SpanKind
				parent trace.SpanID
			}{
				{"server", server, trace.SpanKindServer, caller.SpanID()},
				{"producer", producer, trace.SpanKindProducer, server.SpanContext.SpanID()},
				{"consumer", consumer, trace.SpanKindConsumer, producer.SpanContext.SpanID()},
			} {
				if c.span.SpanKind != c.kind || c.span.Parent.SpanID() != c.parent || c.span.SpanContext.TraceID() != caller.TraceID() {
					t.Errorf("%s span: kind %v parent %v trace %v; want %v, %v, the caller's trace %v",
						c.name, c.span.SpanKind, c.span.Parent.SpanID(), c.span.SpanContext.TraceID(), c.kind, c.parent, caller.TraceID())
				}
				if got, ok := c.span.Resource.Set().Value("service.name"); !ok || got.AsString() != "fairq-dev" {
					t.Errorf("%s span's service.name %q, want fairq-dev", c.name, got.AsString())
				}
			}
			if len(consumer.Links) != 1 || consumer.Links[0].SpanContext.SpanID() != producer.SpanContext.SpanID() {
				t.Errorf("consumer span's links %v, want one to the producer span", consumer.Links)
			}
			wantTP, _ := telemetry.Format(consumer.SpanContext)
			if got := p.header.Get("traceparent"); got != wantTP {
				t.Errorf("the application got traceparent %q, want the consumer span's %q", got, wantTP)
			}
			if got := p.header.Get("tracestate"); got != callerTracestate {
				t.Errorf("the application got tracestate %q, want the caller's %q", got, callerTracestate)
			}

			var sqsCalls []tracetest.SpanStub
			for _, s := range spans {
				if strings.HasPrefix(s.Name, "SQS.") {
					sqsCalls = append(sqsCalls, s)
				}
			}
			switch name {
			case "memory":
				if len(sqsCalls) != 0 {
					t.Errorf("SQS spans on the memory backend: %v", spanNames(sqsCalls))
				}
			case "sqs":
				send := one("SQS.SendMessageBatch")
				if send.SpanKind != trace.SpanKindClient || send.Parent.SpanID() != producer.SpanContext.SpanID() {
					t.Errorf("SQS.SendMessageBatch kind %v parent %v, want client, child of the producer span", send.SpanKind, send.Parent.SpanID())
				}
				for _, s := range sqsCalls {
					if !s.Parent.IsValid() {
						t.Errorf("SQS span %s has no parent: calls under no span must make none", s.Name)
					}
				}
			}
		})
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// otlpReceiver is a small OTLP/HTTP trace receiver: it decodes each export
// request and keeps its spans' names and services.
type otlpReceiver struct {
	url string

	mu       sync.Mutex
	requests int
	spans    []receivedSpan
}

type receivedSpan struct {
	service, name string
	traceID       string
}

func newReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ex collectortrace.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export request %s %s, Content-Type %q: want POST /v1/traces, protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
		}
		if err := proto.Unmarshal(body, &ex); err != nil {
			t.Errorf("export request does not decode: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.requests++
		for _, rs := range ex.ResourceSpans {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, receivedSpan{service: service, name: s.Name, traceID: fmt.Sprintf("%x", s.TraceId)})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *otlpReceiver) got() (int, []receivedSpan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]receivedSpan(nil), r.spans...)
}

// TestTracingExportsOverOTLP runs `fairq dev` with the standard OTEL_*
// variables pointing at an OTLP/HTTP receiver: the message's spans reach
// it, under the service name given, in the caller's trace. With no
// OTEL_* variable, or with OTEL_TRACES_EXPORTER=none beside the endpoint,
// the receiver gets nothing and the application the caller's traceparent
// unchanged.
func TestTracingExportsOverOTLP(t *testing.T) {
	tests := []struct {
		name   string
		env    func(endpoint string) map[string]string
		traced bool
	}{
		{"exported", func(ep string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SERVICE_NAME": "fairq-e2e", "OTEL_TRACES_SAMPLER": "parentbased_always_on"}
		}, true},
		{"no OTEL variables", func(string) map[string]string { return nil }, false},
		{"exporter none", func(ep string) map[string]string {
			return map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SERVICE_NAME": "fairq-e2e"}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recv := newReceiver(t)
			vars := tt.env(recv.url)
			url, pushes := app(t, func(int) int { return http.StatusOK })
			_, base, stop := runTraced(t, tracedYAML("backend: memory\n", url), devOptions{pushURL: url}, env{getenv: func(k string) string { return vars[k] }})
			q := enqueueTraced(t, base)
			p := next(t, pushes, 20*time.Second)
			stop() // flushes the spans still queued
			requests, spans := recv.got()
			tp := p.header.Get("traceparent")

			if !tt.traced {
				if requests != 0 || len(spans) != 0 {
					t.Errorf("the receiver got %d requests, %d spans; want none", requests, len(spans))
				}
				if tp != callerTraceparent {
					t.Errorf("the application got traceparent %q, want the caller's %q unchanged", tp, callerTraceparent)
				}
				return
			}
			want := map[string]bool{"POST /v1/messages": false, "send " + q: false, "process " + q: false}
			for _, s := range spans {
				if _, ok := want[s.name]; !ok {
					continue
				}
				want[s.name] = true
				if s.service != "fairq-e2e" || s.traceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
					t.Errorf("span %q: service %q, trace %s; want fairq-e2e in the caller's trace", s.name, s.service, s.traceID)
				}
			}
			for name, seen := range want {
				if !seen {
					t.Errorf("span %q did not reach the receiver; got %v", name, spans)
				}
			}
			caller := telemetry.SpanContextOf(callerTraceparent, "")
			if sc := telemetry.SpanContextOf(tp, ""); sc.TraceID() != caller.TraceID() || sc.SpanID() == caller.SpanID() {
				t.Errorf("the application got traceparent %q: want the caller's trace under a span of the worker's", tp)
			}
		})
	}
}
