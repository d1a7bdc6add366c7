package telemetry

import (
	"compress/gzip"
	"context"
	"encoding/pem"
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

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP collector: it decodes each request with the
// collector's own generated message and answers as answer says (200 with
// an empty response when nil).
type receiver struct {
	*httptest.Server
	answer func(n int, w http.ResponseWriter) // n counts requests from 1

	mu   sync.Mutex
	reqs []received
}

type received struct {
	path   string
	header http.Header
	at     time.Time
	req    *collectortrace.ExportTraceServiceRequest
	err    error // the body did not decode
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(r)
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	got := received{path: req.URL.Path, header: req.Header.Clone(), at: time.Now(), req: &collectortrace.ExportTraceServiceRequest{}}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			got.err = err
		}
		body = zr
	}
	if got.err == nil {
		b, err := io.ReadAll(body)
		if err == nil {
			err = proto.Unmarshal(b, got.req)
		}
		got.err = err
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, got)
	n := len(r.reqs)
	r.mu.Unlock()
	if got.err != nil {
		http.Error(w, got.err.Error(), http.StatusBadRequest)
		return
	}
	if r.answer != nil {
		r.answer(n, w)
	}
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

// spanNames lists the spans of a request.
func spanNames(req *collectortrace.ExportTraceServiceRequest) []string {
	var names []string
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				names = append(names, s.GetName())
			}
		}
	}
	return names
}

// testExporter is the exporter the environment env describes, with a
// short backoff so that retries take milliseconds.
func testExporter(t *testing.T, env map[string]string) *exporter {
	t.Helper()
	s, err := readSettings(envOf(env), "fairq-test")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newExporter(s, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	e.backoff = time.Millisecond
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func testSpans(t *testing.T, names ...string) []sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, n := range names {
		out = append(out, tracetest.SpanStub{Name: n, SpanContext: sc(t, sid, "", false), StartTime: t0, EndTime: t0, Resource: testRes}.Snapshot())
	}
	return out
}

// TestExporterSends: one POST of protobuf to /v1/traces under the
// endpoint, with the headers of OTEL_EXPORTER_OTLP_HEADERS, which the
// collector's own message decodes; compressed only when asked.
func TestExporterSends(t *testing.T) {
	for _, compression := range []string{"", "gzip"} {
		t.Run("compression="+compression, func(t *testing.T) {
			r := newReceiver(t, nil)
			e := testExporter(t, map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT":    r.URL + "/otlp/",
				"OTEL_EXPORTER_OTLP_HEADERS":     "Authorization=Bearer%20s3cret,x-tenant=ops",
				"OTEL_EXPORTER_OTLP_COMPRESSION": compression,
			})
			if err := e.ExportSpans(context.Background(), testSpans(t, "a", "b")); err != nil {
				t.Fatal(err)
			}
			reqs := r.received()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.err != nil {
				t.Fatalf("the request did not decode: %v", got.err)
			}
			if diff := cmp.Diff([]string{"a", "b"}, spanNames(got.req)); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			for k, want := range map[string]string{
				"Authorization": "Bearer s3cret", "X-Tenant": "ops", "Content-Type": "application/x-protobuf",
				"User-Agent": "fairq/1.2.3 (OTLP/HTTP trace exporter)", "Content-Encoding": compression,
			} {
				if v := got.header.Get(k); v != want {
					t.Errorf("header %s = %q, want %q", k, v, want)
				}
			}
			if got.path != "/otlp/v1/traces" {
				t.Errorf("path %q, want /otlp/v1/traces", got.path)
			}
		})
	}
}

// TestExporterRetries: 429, 502, 503 and 504 are retried until accepted;
// 400 is not, and its google.rpc.Status message is in the error.
func TestExporterRetries(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			r := newReceiver(t, func(n int, w http.ResponseWriter) {
				if n < 3 {
					w.WriteHeader(code)
				}
			})
			e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.URL + "/v1/traces"})
			if err := e.ExportSpans(context.Background(), testSpans(t, "a")); err != nil {
				t.Fatal(err)
			}
			if n := len(r.received()); n != 3 {
				t.Errorf("%d requests, want 3 (two refused, one accepted)", n)
			}
		})
	}
	t.Run("400 is not retried", func(t *testing.T) {
		st, err := proto.Marshal(&statuspb.Status{Code: 3, Message: "trace id is not 16 bytes"})
		if err != nil {
			t.Fatal(err)
		}
		r := newReceiver(t, func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(st)
		})
		e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.URL})
		err = e.ExportSpans(context.Background(), testSpans(t, "a"))
		if err == nil || !strings.Contains(err.Error(), "400 Bad Request: trace id is not 16 bytes") {
			t.Errorf("error %v, want the status and the collector's message", err)
		}
		if n := len(r.received()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

// TestExporterRetryAfter: the collector's Retry-After is waited out, and
// one that would pass the timeout ends the export at once.
func TestExporterRetryAfter(t *testing.T) {
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.URL})
	if err := e.ExportSpans(context.Background(), testSpans(t, "a")); err != nil {
		t.Fatal(err)
	}
	reqs := r.received()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < time.Second {
		t.Errorf("retried after %v, before the collector's Retry-After of 1s", gap)
	}

	busy := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	e = testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": busy.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "2000"})
	start := time.Now()
	err := e.ExportSpans(context.Background(), testSpans(t, "a"))
	if err == nil || !strings.Contains(err.Error(), "1 spans not exported after 1 attempts within 2s") || !strings.Contains(err.Error(), "503") {
		t.Errorf("error %v, want one attempt given up", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("gave up after %v, want at once", d)
	}
}

// TestExporterGivesUp: a collector that stays unavailable, or cannot be
// reached, is retried with backoff until the timeout, then reported.
func TestExporterGivesUp(t *testing.T) {
	down := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	for name, url := range map[string]string{"unavailable": down.URL, "unreachable": closed} {
		t.Run(name, func(t *testing.T) {
			e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"})
			e.backoff = 20 * time.Millisecond
			start := time.Now()
			err := e.ExportSpans(context.Background(), testSpans(t, "a", "b"))
			if err == nil || !strings.Contains(err.Error(), "2 spans not exported after") {
				t.Fatalf("error %v, want the spans reported not exported", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("gave up after %v, past the 300ms timeout", d)
			}
		})
	}
	if n := len(down.received()); n < 3 {
		t.Errorf("%d attempts on an unavailable collector within 300ms at a 20ms backoff, want several", n)
	}
}

// TestExporterPartialSuccess: spans the collector accepted the request
// but rejected are an error saying how many and why; an empty answer is
// success.
func TestExporterPartialSuccess(t *testing.T) {
	reply, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{
		PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "span too large"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, func(_ int, w http.ResponseWriter) { _, _ = w.Write(reply) })
	e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.URL})
	err = e.ExportSpans(context.Background(), testSpans(t, "a", "b", "c"))
	if err == nil || !strings.Contains(err.Error(), "rejected 2 spans: span too large") {
		t.Errorf("error %v, want the rejected spans", err)
	}
	if n := len(r.received()); n != 1 {
		t.Errorf("%d requests, want 1: a partial success is not retried", n)
	}
}

// TestExporterTLS: OTEL_EXPORTER_OTLP_CERTIFICATE names the CA to trust;
// without it the collector's certificate is refused, at once.
func TestExporterTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE": ca})
	if err := e.ExportSpans(context.Background(), testSpans(t, "a")); err != nil {
		t.Errorf("with the CA: %v", err)
	}
	e = testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "5000"})
	start := time.Now()
	if err := e.ExportSpans(context.Background(), testSpans(t, "a")); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: error %v, want the certificate refused", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a refused certificate was retried for %v", d)
	}
	if _, err := readSettings(envOf(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(t.TempDir(), "none.pem")}), "x"); err == nil ||
		!strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_CERTIFICATE") {
		t.Errorf("a missing CA file: error %v, want one naming the variable", err)
	}
}

func TestExporterAfterShutdown(t *testing.T) {
	r := newReceiver(t, nil)
	e := testExporter(t, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": r.URL})
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), testSpans(t, "a")); err != errStopped {
		t.Errorf("export after Shutdown: %v, want %v", err, errStopped)
	}
	if n := len(r.received()); n != 0 {
		t.Errorf("%d requests after Shutdown", n)
	}
}

// TestProviderExportsOverOTLP: the provider New builds from the
// environment alone sends its spans to the collector, flushed by
// Shutdown; with the exporter none it sends nothing.
func TestProviderExportsOverOTLP(t *testing.T) {
	for _, tt := range []struct {
		exporter string
		want     []string
	}{{"otlp", []string{"work"}}, {"none", nil}} {
		t.Run(tt.exporter, func(t *testing.T) {
			r := newReceiver(t, nil)
			p, err := New(context.Background(), Config{Getenv: envOf(map[string]string{
				"OTEL_TRACES_EXPORTER": tt.exporter, "OTEL_EXPORTER_OTLP_ENDPOINT": r.URL, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
			}), ServiceName: "fairq-worker"})
			if err != nil {
				t.Fatal(err)
			}
			if tp := p.TracerProvider(); tp != nil {
				_, span := tp.Tracer("t").Start(context.Background(), "work")
				span.End()
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, req := range r.received() {
				if req.err != nil {
					t.Fatalf("request did not decode: %v", req.err)
				}
				names = append(names, spanNames(req.req)...)
				service := ""
				for _, kv := range req.req.GetResourceSpans()[0].GetResource().GetAttributes() {
					if kv.GetKey() == "service.name" {
						service = kv.GetValue().GetStringValue()
					}
				}
				if service != "fairq-worker" {
					t.Errorf("service.name %q, want fairq-worker", service)
				}
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("spans received (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzResponse: whatever a collector answers, reading it does not panic,
// and a real partial success is read as such.
func FuzzResponse(f *testing.F) {
	ok, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{PartialSuccess: &collectortrace.ExportTracePartialSuccess{RejectedSpans: 5, ErrorMessage: "m"}})
	st, _ := proto.Marshal(&statuspb.Status{Code: 8, Message: "slow down"})
	for _, seed := range [][]byte{nil, ok, st, []byte("not protobuf"), {0x0a, 0xff}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := partialSuccess(b)
		_ = failureMessage("application/x-protobuf", b)
		_ = failureMessage("text/plain", b)
		var resp collectortrace.ExportTraceServiceResponse
		if proto.Unmarshal(b, &resp) != nil {
			return
		}
		ps := resp.GetPartialSuccess()
		if rejected := ps.GetRejectedSpans() != 0 || ps.GetErrorMessage() != ""; rejected != (err != nil) {
			t.Errorf("partial success %v read as %v", ps, err)
		}
	})
}
