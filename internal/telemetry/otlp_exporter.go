package telemetry

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP collector as protobuf: one POST of
// an ExportTraceServiceRequest per batch, retried while the collector says
// it is busy or unavailable, within the export timeout.
//
// fairq carries it rather than the SDK's otlptracehttp because that
// module imports the OTLP collector's generated gRPC services, and with
// them gRPC, grpc-gateway and golang.org/x/net/trace, whose html/template
// turns off the linker's dead-code elimination of methods: it made the
// server binary 18 MB larger (13 MB stripped). The request is the
// collector package's message written with protowire, from the trace,
// common and resource messages, which import no gRPC.
type exporter struct {
	client    *http.Client
	url       string
	headers   map[string]string
	userAgent string
	timeout   time.Duration
	gzip      bool
	// backoff is the first wait between attempts, doubled after each up
	// to maxBackoff, jittered; a Retry-After from the collector replaces
	// it.
	backoff time.Duration
	stopped atomic.Bool
}

// newExporter returns the exporter s describes.
func newExporter(s settings, version string) (*exporter, error) {
	tr, err := s.transport()
	if err != nil {
		return nil, err
	}
	return &exporter{
		client:    &http.Client{Transport: tr},
		url:       s.endpoint,
		headers:   s.headers,
		userAgent: "fairq/" + cmp.Or(version, "dev") + " (OTLP/HTTP trace exporter)",
		timeout:   cmp.Or(s.timeout, timeoutDefault),
		gzip:      s.gzip,
		backoff:   backoffDefault,
	}, nil
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

const (
	// timeoutDefault bounds one export, retries included, as the
	// specification's OTEL_EXPORTER_OTLP_TIMEOUT default.
	timeoutDefault = 10 * time.Second
	backoffDefault = 250 * time.Millisecond
	maxBackoff     = 5 * time.Second
	// maxResponse is as much of a response as is read.
	maxResponse = 64 << 10
)

// errStopped is returned by an export after Shutdown.
var errStopped = errors.New("otlp exporter: shut down")

// ExportSpans sends spans in one request, retrying a busy or unavailable
// collector until the timeout. A collector that accepts the request but
// rejects some spans is an error saying how many and why.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return errStopped
	}
	if len(spans) == 0 {
		return nil
	}
	body, err := exportRequest(spans)
	if err != nil {
		return err
	}
	if e.gzip {
		if body, err = gzipped(body); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return e.send(ctx, body, len(spans))
}

// Shutdown stops the exporter: later exports fail. The batch span
// processor has exported what it held before it calls this.
func (e *exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}

// exportRequest is an ExportTraceServiceRequest: field 1, the repeated
// ResourceSpans.
func exportRequest(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	var b []byte
	for _, rs := range resourceSpans(spans) {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("otlp exporter: encode spans: %w", err)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}

func gzipped(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("otlp exporter: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("otlp exporter: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// retryable is an attempt worth repeating: the collector was unreachable
// or answered 429, 502, 503 or 504; after, when set, is its Retry-After.
type retryable struct {
	err   error
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// send POSTs body until it is accepted, the error is not retryable, or
// the next attempt would start past ctx's deadline.
func (e *exporter) send(ctx context.Context, body []byte, n int) error {
	wait := e.backoff
	for attempt := 1; ; attempt++ {
		err := e.post(ctx, body)
		var r *retryable
		if !errors.As(err, &r) {
			return err
		}
		pause := r.after
		if pause <= 0 {
			pause = wait/2 + rand.N(wait/2+1) // jitter: [wait/2, wait]
			wait = min(2*wait, maxBackoff)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < pause {
			return fmt.Errorf("otlp exporter: %d spans not exported after %d attempts within %s: %w", n, attempt, e.timeout, r.err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("otlp exporter: %d spans not exported after %d attempts: %w", n, attempt, r.err)
		case <-t.C:
		}
	}
}

// post makes one attempt.
func (e *exporter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp exporter: %w", err)
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", e.userAgent)
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		err = fmt.Errorf("otlp exporter: %w", err)
		// A collector restarting is worth waiting for; a certificate
		// it will not have next time is not.
		var cert *tls.CertificateVerificationError
		if ctx.Err() != nil || errors.As(err, &cert) {
			return err
		}
		return &retryable{err: err}
	}
	defer resp.Body.Close()
	// A read error leaves reply short: the status says what happened.
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse)) // so that the connection is reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return partialSuccess(reply)
	}
	err = fmt.Errorf("otlp exporter: %s answered %s%s", e.url, resp.Status, failureMessage(resp.Header.Get("Content-Type"), reply))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return &retryable{err: err, after: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	return err
}

// partialSuccess reads an ExportTraceServiceResponse: its field 1, when
// present, says how many spans the collector rejected (field 1) and why
// (field 2); repeated, they merge as protobuf merges them.
func partialSuccess(b []byte) error {
	var rejected uint64
	var msg string
	eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) {
		if num != 1 || typ != protowire.BytesType {
			return
		}
		ps, _ := protowire.ConsumeBytes(v)
		eachField(ps, func(num protowire.Number, typ protowire.Type, v []byte) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				rejected, _ = protowire.ConsumeVarint(v)
			case num == 2 && typ == protowire.BytesType:
				m, _ := protowire.ConsumeBytes(v)
				msg = string(m)
			}
		})
	})
	if rejected == 0 && msg == "" {
		return nil
	}
	return fmt.Errorf("otlp exporter: the collector rejected %d spans: %s", int64(rejected), cmp.Or(msg, "no reason given"))
}

// failureMessage is what a failed response says: a google.rpc.Status's
// message (field 2) when it is protobuf, the start of its text when it is
// text or JSON.
func failureMessage(contentType string, b []byte) string {
	var msg string
	switch {
	case strings.HasPrefix(contentType, "application/x-protobuf"):
		eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) {
			if num == 2 && typ == protowire.BytesType {
				m, _ := protowire.ConsumeBytes(v)
				msg = string(m)
			}
		})
	case strings.HasPrefix(contentType, "text/"), strings.HasPrefix(contentType, "application/json"):
		msg = strings.TrimSpace(string(b))
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		return ""
	}
	return ": " + strings.ToValidUTF8(msg, "\ufffd")
}

// eachField calls f with each field of the protobuf message b, the value
// as it is on the wire (a length-delimited one with its length); it stops
// at the first malformed field.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return
		}
		f(num, typ, b[:m])
		b = b[m:]
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; zero
// when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
