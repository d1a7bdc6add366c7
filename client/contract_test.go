package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairq/fairq/client"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/openapitest"
)

// contract is the gateway's OpenAPI document as a checker of answers,
// built once for the test binary.
var contract = sync.OnceValues(func() (*openapitest.Contract, error) {
	return openapitest.NewContract(gateway.OpenAPI())
})

// checked is a transport that holds every answer the client gets from the
// gateway to the OpenAPI document, failing the test on a departure.
type checked struct {
	t        testing.TB
	base     http.RoundTripper
	contract *openapitest.Contract
}

// checkedTransport returns a checked transport over the default one. It
// builds the contract, if no test did yet, before any request is sent: the
// tests that count time from a request then do not count the build.
func checkedTransport(t testing.TB) *checked {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	return &checked{t: t, base: http.DefaultTransport, contract: c}
}

func (c *checked) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.base.RoundTrip(r)
	if err != nil {
		return res, err
	}
	for _, p := range c.contract.Check(r, res) {
		c.t.Errorf("answer departs from openapi.json: %s", p)
	}
	return res, err
}

// recorder is a testing.TB that keeps the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheckedTransportReports is the negative control of the client tests'
// transport: a server that answers the client's enqueue as the gateway
// does passes, and one whose answer names a field the document does not,
// lacks a required one or has a status the operation does not list is
// reported, though the client itself takes each answer without complaint
// or as an error it knows.
func TestCheckedTransportReports(t *testing.T) {
	t.Parallel()
	accepted := `{"id":"0197a8f2-5c3e-7b1a-9c4d-2e6f8a0b1c2d","tenant":"acme","queue":"fairq-live-0","enqueued_at":"2025-07-01T12:00:00.000Z"%s}`
	tests := []struct {
		name   string
		status int
		body   string
		want   string // in the problem reported; "" for none
	}{
		{"the gateway's answer", http.StatusAccepted, fmt.Sprintf(accepted, ""), ""},
		{"a field the schema does not name", http.StatusAccepted, fmt.Sprintf(accepted, `,"shard":[0,7]`), "shard"},
		{"a required field missing", http.StatusAccepted, `{"id":"x","tenant":"acme","enqueued_at":"2025-07-01T12:00:00.000Z"}`, "queue"},
		{"an undocumented status", http.StatusTeapot, `{"type":"about:blank","title":"teapot","status":418,"code":"teapot","request_id":"r"}`, "418"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tt.status >= 400 {
					w.Header().Set("Content-Type", "application/problem+json")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			rec := &recorder{TB: t}
			tr := checkedTransport(t)
			tr.t = rec
			c, err := client.New(srv.URL, "fq_key", client.WithHTTPClient(&http.Client{Transport: tr}),
				client.WithRetries(1, time.Millisecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Enqueue(t.Context(), client.Message{Body: "x"})
			t.Logf("client: %v; reported: %q", err, rec.errs)
			got := strings.Join(rec.errs, "\n")
			switch {
			case tt.want == "" && len(rec.errs) != 0:
				t.Errorf("reported %q, want nothing", rec.errs)
			case tt.want != "" && len(rec.errs) == 0:
				t.Error("reported nothing")
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("reported %q, want a problem naming %q", rec.errs, tt.want)
			}
		})
	}
}
