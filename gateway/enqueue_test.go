package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/queue"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name      string
		body      string
		header    map[string]string
		wantBody  string
		wantAttrs map[string]string // the caller's
		wantTrace string
		delayed   bool
	}{
		{
			name:     "string body",
			body:     `{"body":"hello, world"}`,
			wantBody: "hello, world",
		},
		{
			name:     "JSON body is stored as its text",
			body:     `{"body": {"order": 42, "items": ["a", "b"], "note": "é\t"} }`,
			wantBody: `{"order":42,"items":["a","b"],"note":"é\t"}`,
		},
		{
			name:     "escapes in a JSON body stay escapes",
			body:     `{"body": {"a": "\u0001"}}`,
			wantBody: `{"a":"\u0001"}`,
		},
		{
			name:     "number body",
			body:     `{"body": 12.5e3}`,
			wantBody: `12.5e3`,
		},
		{
			name:      "attributes, delay, traceparent and idempotency key",
			body:      `{"body":"x","attributes":{"kind":"email","Priority.Level":"high"},"delay_seconds":30}`,
			header:    map[string]string{"traceparent": tp, "Idempotency-Key": "order-42"},
			wantBody:  "x",
			wantAttrs: map[string]string{"kind": "email", "Priority.Level": "high"},
			wantTrace: tp,
			delayed:   true,
		},
		{
			name:     "an invalid traceparent is dropped",
			body:     `{"body":"x"}`,
			header:   map[string]string{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
			wantBody: "x",
		},
		{
			name:     "supplementary characters and escapes",
			body:     `{"body":"\ud83d\ude00 \u00e9 \"q\""}`,
			wantBody: "😀 é \"q\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			w := f.do(t, request{key: acmeKey, body: tt.body, header: tt.header})
			if w.Code != http.StatusAccepted {
				t.Fatalf("status %d, want 202: %s", w.Code, w.Body)
			}
			got := decode[accepted](t, w)
			reqID := w.Header().Get("X-Request-Id")
			if got.Tenant != "acme" || got.ID == "" || !strings.HasPrefix(got.Queue, "t-live-") {
				t.Errorf("answer %+v", got)
			}
			if got.EnqueuedAt != "2030-05-06T07:08:09.123Z" {
				t.Errorf("enqueued_at %q, want the clock's time in RFC 3339 UTC with ms", got.EnqueuedAt)
			}
			for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
				if w.Header().Get(h) == "" {
					t.Errorf("no %s header on an admission answer", h)
				}
			}
			if tt.delayed {
				d, _ := f.mem.Depth(context.Background(), got.Queue)
				if d.Delayed != 1 {
					t.Fatalf("depth %+v, want one delayed message", d)
				}
				return // not receivable for 30 s; the attributes were checked by the other cases
			}
			msg := f.receive(t, got.Queue)
			if len(got.ID) != envelope.IDLength || got.ID == msg.ID {
				t.Errorf("answer's id %q: want fairq's own id, not the queue's %q", got.ID, msg.ID)
			}
			if msg.Body != tt.wantBody {
				t.Errorf("body %q, want %q", msg.Body, tt.wantBody)
			}
			meta, err := envelope.Decode(msg.Attributes[envelope.AttrMeta])
			if err != nil {
				t.Fatal(err)
			}
			wantMeta := envelope.Meta{EnqueuedAt: f.clock.Now().UnixMilli(), ID: got.ID, RequestID: reqID, IdempotencyKey: tt.header["Idempotency-Key"], Origin: got.Queue}
			if diff := cmp.Diff(wantMeta, meta); diff != "" {
				t.Errorf("fairq-meta (-want +got):\n%s", diff)
			}
			want := map[string]string{envelope.AttrTenant: "acme", envelope.AttrMeta: msg.Attributes[envelope.AttrMeta]}
			for k, v := range tt.wantAttrs {
				want[k] = v
			}
			if tt.wantTrace != "" {
				want[envelope.AttrTraceparent] = tt.wantTrace
			}
			if diff := cmp.Diff(want, msg.Attributes); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnqueueRefusals(t *testing.T) {
	t.Parallel()
	text := func(s string) *string { return &s }
	attrs := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"a%d":"v"`, i)
		}
		return `{"body":"x","attributes":{` + b.String() + `}}`
	}
	// The largest body that fits 256 KiB with fairq's attributes; one more
	// byte is too large.
	big := func(extra int) string {
		return `{"body":"` + strings.Repeat("a", 256<<10-fairqOverhead+extra) + `"}`
	}
	tests := []struct {
		name       string
		r          request
		wantStatus int
		wantCode   string
		wantDetail string
	}{
		{"no key", request{body: `{"body":"x"}`}, 401, "unauthorized", "missing API key"},
		{"wrong key", request{key: "nope", body: `{"body":"x"}`}, 401, "unauthorized", "unknown API key"},
		{"basic auth", request{header: map[string]string{"Authorization": "Basic YTpi"}, body: `{"body":"x"}`}, 401, "unauthorized", ""},
		{"empty bearer", request{header: map[string]string{"Authorization": "Bearer "}, body: `{"body":"x"}`}, 401, "unauthorized", ""},
		{"text/plain", request{key: acmeKey, body: `{"body":"x"}`, contentType: text("text/plain")}, 415, "unsupported_media_type", "text/plain"},
		{"no content type", request{key: acmeKey, body: `{"body":"x"}`, contentType: text("")}, 415, "unsupported_media_type", ""},
		{"latin1", request{key: acmeKey, body: `{"body":"x"}`, contentType: text("application/json; charset=latin1")}, 415, "unsupported_media_type", ""},
		{"malformed", request{key: acmeKey, body: `{"body":"x"`}, 400, "invalid_request", "truncated"},
		{"syntax", request{key: acmeKey, body: `{"body" "x"}`}, 400, "invalid_request", "malformed JSON"},
		{"empty", request{key: acmeKey, body: ``}, 400, "invalid_request", "empty"},
		{"array", request{key: acmeKey, body: `[{"body":"x"}]`}, 400, "invalid_request", "JSON object"},
		{"null", request{key: acmeKey, body: `null`}, 400, "invalid_request", "not null"},
		{"trailing data", request{key: acmeKey, body: `{"body":"x"} {}`}, 400, "invalid_request", "after"},
		{"unknown field", request{key: acmeKey, body: `{"body":"x","bdy":1}`}, 400, "invalid_request", `unknown field "bdy"`},
		{"case matters", request{key: acmeKey, body: `{"Body":"x"}`}, 400, "invalid_request", `unknown field "Body"`},
		{"tenant in body", request{key: acmeKey, body: `{"body":"x","tenant":"globex"}`}, 400, "invalid_request", `unknown field "tenant"`},
		{"idempotency_key in body", request{key: acmeKey, body: `{"body":"x","idempotency_key":"k"}`}, 400, "invalid_request", `unknown field "idempotency_key"`},
		{"no body", request{key: acmeKey, body: `{"attributes":{}}`}, 400, "invalid_request", "body is required"},
		{"null body", request{key: acmeKey, body: `{"body":null}`}, 400, "invalid_request", "body is required"},
		{"empty body", request{key: acmeKey, body: `{"body":""}`}, 400, "invalid_request", "must not be empty"},
		{"NUL in body", request{key: acmeKey, body: `{"body":"a\u0000"}`}, 400, "invalid_request", "at byte 1"},
		{"U+FFFF in body", request{key: acmeKey, body: `{"body":"\uffff"}`}, 400, "invalid_request", "SQS does not accept"},
		{"U+FFFF in a JSON body", request{key: acmeKey, body: "{\"body\":{\"a\":\"\xef\xbf\xbf\"}}"}, 400, "invalid_request", "SQS does not accept"},
		{"invalid UTF-8", request{key: acmeKey, body: "{\"body\":\"\xff\"}"}, 400, "invalid_request", "UTF-8"},
		{"attributes not an object", request{key: acmeKey, body: `{"body":"x","attributes":["a"]}`}, 400, "invalid_request", "object of strings"},
		{"attribute not a string", request{key: acmeKey, body: `{"body":"x","attributes":{"n":1}}`}, 400, "invalid_request", "attributes.n must be a string"},
		{"eight attributes", request{key: acmeKey, body: attrs(8)}, 400, "invalid_request", "8 attributes, at most 7"},
		{"attribute name with a space", request{key: acmeKey, body: `{"body":"x","attributes":{"a b":"v"}}`}, 400, "invalid_request", `"a b"`},
		{"attribute name AWS.", request{key: acmeKey, body: `{"body":"x","attributes":{"AWS.x":"v"}}`}, 400, "invalid_request", "reserved by SQS"},
		{"attribute name with ..", request{key: acmeKey, body: `{"body":"x","attributes":{"a..b":"v"}}`}, 400, "invalid_request", "'..'"},
		{"attribute name ends with .", request{key: acmeKey, body: `{"body":"x","attributes":{"a.":"v"}}`}, 400, "invalid_request", "'.'"},
		{"attribute name too long", request{key: acmeKey, body: `{"body":"x","attributes":{"` + strings.Repeat("a", 257) + `":"v"}}`}, 400, "invalid_request", "1–256"},
		{"fairq-tenant", request{key: acmeKey, body: `{"body":"x","attributes":{"fairq-tenant":"globex"}}`}, 400, "invalid_request", "reserved by fairq"},
		{"Fairq-Meta", request{key: acmeKey, body: `{"body":"x","attributes":{"Fairq-Meta":"{}"}}`}, 400, "invalid_request", "reserved by fairq"},
		{"traceparent attribute", request{key: acmeKey, body: `{"body":"x","attributes":{"traceparent":"00-x"}}`}, 400, "invalid_request", "reserved by fairq"},
		{"empty attribute", request{key: acmeKey, body: `{"body":"x","attributes":{"a":""}}`}, 400, "invalid_request", "must not be empty"},
		{"bad attribute text", request{key: acmeKey, body: `{"body":"x","attributes":{"a":"\u0002"}}`}, 400, "invalid_request", "attributes.a has a character"},
		{"delay 901", request{key: acmeKey, body: `{"body":"x","delay_seconds":901}`}, 400, "invalid_request", "delay_seconds"},
		{"delay -1", request{key: acmeKey, body: `{"body":"x","delay_seconds":-1}`}, 400, "invalid_request", "delay_seconds"},
		{"delay 1.5", request{key: acmeKey, body: `{"body":"x","delay_seconds":1.5}`}, 400, "invalid_request", "whole number"},
		{"delay string", request{key: acmeKey, body: `{"body":"x","delay_seconds":"5"}`}, 400, "invalid_request", "delay_seconds"},
		{"idempotency key too long", request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"Idempotency-Key": strings.Repeat("k", 129)}}, 400, "invalid_request", "Idempotency-Key"},
		{"idempotency key not printable", request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"Idempotency-Key": "a\tb"}}, 400, "invalid_request", "Idempotency-Key"},
		{"one byte too large", request{key: acmeKey, body: big(1)}, 413, "too_large", "at most 262144"},
		{"raw body over the cap", request{key: acmeKey, body: `{"body":"` + strings.Repeat("\\u00e9", 140<<10) + `"}`}, 413, "too_large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			w := f.do(t, tt.r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			p := decode[problem](t, w)
			if p.Code != tt.wantCode || !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("problem %s %q, want %s mentioning %q", p.Code, p.Detail, tt.wantCode, tt.wantDetail)
			}
			if tt.wantStatus == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if n := f.depth(t); n != 0 {
				t.Errorf("%d messages enqueued by a refused request", n)
			}
			if calls, _ := f.flaky.Sends(); calls != 0 {
				t.Errorf("%d sends for a refused request", calls)
			}
		})
	}
	// The boundary itself is accepted.
	f := setup(t)
	if w := f.do(t, request{key: acmeKey, body: big(0)}); w.Code != http.StatusAccepted {
		t.Errorf("a message of exactly 256 KiB: status %d: %.300s", w.Code, w.Body)
	}
}

// fairqOverhead is the size of the attributes the gateway adds to a message
// of the fixture's acme, with a generated request id of the fixture's form.
var fairqOverhead = func() int {
	meta := envelope.Meta{EnqueuedAt: time.Date(2030, 5, 6, 7, 8, 9, 123_000_000, time.UTC).UnixMilli(), ID: strings.Repeat("x", envelope.IDLength), RequestID: strings.Repeat("x", 14), Origin: "t-live-00"}
	return len(envelope.AttrTenant) + len("String") + len("acme") + len(envelope.AttrMeta) + len("String") + len(meta.Encode())
}()

func TestProblemAndRequestID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tests := []struct {
		name   string
		sent   string
		keeps  bool
		status int
	}{
		{"caller's id kept", "req-123_ABC.x:y/z", true, 401},
		{"128 characters kept", strings.Repeat("r", 128), true, 401},
		{"129 characters replaced", strings.Repeat("r", 129), false, 401},
		{"space replaced", "a b", false, 401},
		{"non-ASCII replaced", "é", false, 401},
		{"none generated", "", false, 401},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.sent != "" {
				h["X-Request-Id"] = tt.sent
			}
			w := f.do(t, request{body: `{"body":"x"}`, header: h})
			id := w.Header().Get("X-Request-Id")
			if tt.keeps && id != tt.sent || !tt.keeps && (id == tt.sent || id == "") {
				t.Fatalf("X-Request-Id %q for %q sent", id, tt.sent)
			}
			if seen[id] {
				t.Fatalf("request id %q given twice", id)
			}
			seen[id] = true
			p := decode[problem](t, w)
			want := problem{Type: "urn:fairq:problem:unauthorized", Title: "Unauthorized", Status: 401,
				Detail: "missing API key: send Authorization: Bearer <key>", Code: "unauthorized", RequestID: id}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
		})
	}
	// Every answer carries an id, successes and routing errors too.
	for _, r := range []request{
		{method: "GET", path: "/healthz"},
		{method: "GET", path: "/nowhere"},
		{method: "DELETE", path: "/v1/messages"},
		{key: acmeKey, body: `{"body":"x"}`},
	} {
		if w := f.do(t, r); w.Header().Get("X-Request-Id") == "" {
			t.Errorf("%s %s: status %d without X-Request-Id", r.method, r.path, w.Code)
		}
	}
	if w := f.do(t, request{method: "DELETE", path: "/v1/messages"}); w.Code != http.StatusMethodNotAllowed || decode[problem](t, w).Code != "invalid_request" {
		t.Errorf("DELETE /v1/messages: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, request{method: "GET", path: "/nowhere"}); w.Code != http.StatusNotFound || decode[problem](t, w).Code != "not_found" {
		t.Errorf("GET /nowhere: %d %s", w.Code, w.Body)
	}
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	f := setup(t)
	send := func(key string) (int, map[string]string) {
		w := f.do(t, request{key: key, body: `{"body":"x"}`})
		h := map[string]string{}
		for _, k := range []string{"Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
			h[k] = w.Header().Get(k)
		}
		if w.Code == http.StatusTooManyRequests {
			if p := decode[problem](t, w); p.Code != "rate_limited" {
				t.Errorf("429 with code %s", p.Code)
			}
		}
		return w.Code, h
	}
	type answer struct {
		Status int
		Header map[string]string
	}
	var got []answer
	for range 3 {
		s, h := send(slowKey)
		got = append(got, answer{s, h})
	}
	want := []answer{
		{202, map[string]string{"Retry-After": "", "RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "1"}},
		{202, map[string]string{"Retry-After": "", "RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "2"}},
		{429, map[string]string{"Retry-After": "1", "RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("answers (-want +got):\n%s", diff)
	}
	// Another tenant is not affected.
	if s, _ := send(acmeKey); s != http.StatusAccepted {
		t.Errorf("acme while slow is limited: %d", s)
	}
	// Waiting what Retry-After said is enough.
	f.clock.Advance(time.Second)
	if s, h := send(slowKey); s != http.StatusAccepted {
		t.Errorf("after Retry-After: %d %v", s, h)
	}
	if n := f.depth(t); n != 4 {
		t.Errorf("%d messages on the queues, want 4", n)
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if w := f.do(t, request{method: "GET", path: "/healthz"}); w.Code != 200 {
		t.Errorf("healthz %d", w.Code)
	}
	if w := f.do(t, request{method: "GET", path: "/readyz"}); w.Code != 200 {
		t.Errorf("readyz %d: %s", w.Code, w.Body)
	}
	f.flaky.FailDepth(errors.New("connection refused"))
	if w := f.do(t, request{method: "GET", path: "/readyz"}); w.Code != 200 {
		t.Errorf("readyz within the cache: %d", w.Code)
	}
	f.clock.Advance(time.Second)
	w := f.do(t, request{method: "GET", path: "/readyz"})
	if w.Code != http.StatusServiceUnavailable || decode[problem](t, w).Code != "unavailable" || w.Header().Get("Retry-After") == "" {
		t.Errorf("readyz with the backend down: %d %s", w.Code, w.Body)
	}
	f.flaky.FailDepth(nil)
	f.clock.Advance(time.Second)
	if w := f.do(t, request{method: "GET", path: "/readyz"}); w.Code != 200 {
		t.Errorf("readyz once back: %d", w.Code)
	}
	if err := f.srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := f.do(t, request{method: "GET", path: "/readyz"}); w.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz after Stop: %d", w.Code)
	}
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusServiceUnavailable {
		t.Errorf("enqueue after Stop: %d", w.Code)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	f.do(t, request{key: acmeKey, body: `{"bdy":"x"}`})
	w := f.do(t, request{method: "GET", path: "/metrics"})
	if w.Code != 200 {
		t.Fatalf("metrics %d", w.Code)
	}
	for _, want := range []string{
		`fairq_http_requests_total{route="/v1/messages",status="202"} 1`,
		`fairq_http_requests_total{route="/v1/messages",status="400"} 1`,
		`fairq_admitted_total{tenant="acme"} 1`,
		`fairq_rejected_total{reason="invalid_request",tenant="acme"} 1`,
		`fairq_send_batch_size_count 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if strings.Contains(w.Body.String(), acmeKey) {
		t.Error("an API key in /metrics")
	}
}

// panicky is a Picker that panics.
type panicky struct{}

func (panicky) Pick(string) int { panic("picker bug") }
func (panicky) Sent(int, int)   {}

func TestPanicIsA500(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.Picker = panicky{} })
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	if w.Code != 500 || decode[problem](t, w).Code != "internal" {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if w := f.do(t, request{method: "GET", path: "/healthz"}); w.Code != 200 {
		t.Errorf("server unwell after a panic: %d", w.Code)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := gateway.New(gateway.Config{MaxMessageSize: 2 << 20})
	for _, want := range []string{"Backend", "live queue", "Picker", "Tenants", "MaxMessageSize"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want a complaint about %s", err, want)
		}
	}
}

// TestSizeLimitIsConfigurable: a gateway for 1 MiB queues takes what a
// 256 KiB one refuses.
func TestSizeLimitIsConfigurable(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.MaxMessageSize = 1 << 20 })
	body := `{"body":"` + strings.Repeat("a", 512<<10) + `"}`
	if w := f.do(t, request{key: acmeKey, body: body}); w.Code != http.StatusAccepted {
		t.Fatalf("512 KiB under a 1 MiB limit: %d %.200s", w.Code, w.Body)
	}
	body = `{"body":"` + strings.Repeat("a", 1<<20) + `"}`
	w := f.do(t, request{key: acmeKey, body: body})
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(decode[problem](t, w).Detail, strconv.Itoa(1<<20)) {
		t.Fatalf("1 MiB body under a 1 MiB limit: %d %.200s", w.Code, w.Body)
	}
}

// TestNoImpersonation: the tenant of a message is the tenant of the key,
// whatever else the request says.
func TestNoImpersonation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, r := range []request{
		{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"X-Fairq-Tenant": "globex", "fairq-tenant": "globex", "X-Tenant": "globex"}},
		{key: acmeKey, path: "/v1/messages?tenant=globex", body: `{"body":"x"}`},
		{key: acmeKey, body: `{"body":"{\"tenant\":\"globex\",\"fairq-tenant\":\"globex\"}"}`},
	} {
		if w := f.do(t, r); w.Code != http.StatusAccepted || decode[accepted](t, w).Tenant != "acme" {
			t.Errorf("%+v: %d %s", r, w.Code, w.Body)
		}
	}
	for _, body := range []string{
		`{"body":"x","tenant":"globex"}`,
		`{"body":"x","attributes":{"fairq-tenant":"globex"}}`,
		`{"body":"x","attributes":{"FAIRQ-TENANT":"globex"}}`,
		`{"body":"x","attributes":{"fairq-meta":"{}"}}`,
	} {
		if w := f.do(t, request{key: acmeKey, body: body}); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", body, w.Code)
		}
	}
	if w := f.do(t, request{key: acmeKey + ", Bearer " + globexKey, body: `{"body":"x"}`}); w.Code != http.StatusUnauthorized {
		t.Errorf("two keys in one header: %d, want 401", w.Code)
	}
	for _, q := range f.names.Live {
		msgs, err := f.mem.Receive(context.Background(), q, queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Attributes[envelope.AttrTenant] != "acme" {
				t.Errorf("a message of tenant %q from acme's key", m.Attributes[envelope.AttrTenant])
			}
		}
	}
}
