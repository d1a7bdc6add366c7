package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/gateway"
)

type entryResult struct {
	Status     int    `json:"status"`
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	Queue      string `json:"queue"`
	EnqueuedAt string `json:"enqueued_at"`
	Code       string `json:"code"`
	Detail     string `json:"detail"`
	RetryAfter int64  `json:"retry_after"`
}

type batchAnswer struct {
	Results []entryResult `json:"results"`
}

func (f *fixture) batch(t *testing.T, key string, messages ...string) (*http.Response, []entryResult) {
	t.Helper()
	w := f.do(t, request{path: "/v1/messages/batch", key: key, body: `{"messages":[` + strings.Join(messages, ",") + `]}`})
	if w.Code != http.StatusOK {
		t.Fatalf("batch: %d %s", w.Code, w.Body)
	}
	return w.Result(), decode[batchAnswer](t, w).Results
}

// brief keeps what a test compares of a result.
func brief(rs []entryResult) []entryResult {
	out := make([]entryResult, len(rs))
	for i, r := range rs {
		out[i] = entryResult{Status: r.Status, Code: r.Code, RetryAfter: r.RetryAfter}
	}
	return out
}

func TestBatch(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendWindow = 20 * time.Millisecond })
	_, got := f.batch(t, acmeKey,
		`{"body":"first","attributes":{"n":"1"}}`,
		`{"body":{"second":true}}`,
		`{"body":"bad","color":"red"}`,
		`"not an object"`,
		`{"body":"`+strings.Repeat("x", 256<<10)+`"}`,
		`{"body":"last","delay_seconds":0}`,
	)
	want := []entryResult{{Status: 202}, {Status: 202}, {Status: 400, Code: "invalid_request"}, {Status: 400, Code: "invalid_request"}, {Status: 413, Code: "too_large"}, {Status: 202}}
	if diff := cmp.Diff(want, brief(got)); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if !strings.Contains(got[2].Detail, `unknown field messages[2]."color"`) || !strings.Contains(got[3].Detail, "messages[3] must be an object") {
		t.Errorf("details name the message: %q, %q", got[2].Detail, got[3].Detail)
	}
	// The accepted messages are on their queues, in order of the results.
	bodies := map[string]string{}
	for _, q := range f.names.Live {
		msgs, _ := f.mem.Receive(t.Context(), q, receiveAll)
		for _, m := range msgs {
			bodies[fairqID(t, m)] = m.Body
			if m.Attributes[envelope.AttrTenant] != "acme" {
				t.Errorf("message of tenant %q", m.Attributes[envelope.AttrTenant])
			}
		}
	}
	for i, wantBody := range map[int]string{0: "first", 1: `{"second":true}`, 5: "last"} {
		if bodies[got[i].ID] != wantBody || got[i].Tenant != "acme" || got[i].Queue == "" || got[i].EnqueuedAt == "" {
			t.Errorf("result %d %+v: body %q, want %q", i, got[i], bodies[got[i].ID], wantBody)
		}
	}
	if len(bodies) != 3 {
		t.Errorf("%d messages on the queues, want 3", len(bodies))
	}
	// Three messages over four queues share no call, but do not make more
	// than one call per queue.
	if calls, _ := f.flaky.Sends(); calls > 3 {
		t.Errorf("%d send calls for 3 messages", calls)
	}
}

func TestBatchCoalesces(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendWindow = 50 * time.Millisecond })
	msgs := make([]string, 40)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"body":"m%d"}`, i)
	}
	_, got := f.batch(t, acmeKey, msgs...)
	for i, r := range got {
		if r.Status != 202 {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	// 40 messages dealt over 4 queues: 10 per queue, one call each.
	if calls, entries := f.flaky.Sends(); calls != 4 || entries != 40 {
		t.Errorf("%d calls for %d messages, want 4 for 40", calls, entries)
	}
}

func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	text := func(s string) *string { return &s }
	many := `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"body":"x"},`, 101), ",") + `]}`
	tests := []struct {
		name       string
		r          request
		wantStatus int
		wantDetail string
	}{
		{"no key", request{body: `{"messages":[{"body":"x"}]}`}, 401, ""},
		{"content type", request{key: acmeKey, body: `{"messages":[{"body":"x"}]}`, contentType: text("text/plain")}, 415, ""},
		{"idempotency header", request{key: acmeKey, body: `{"messages":[{"body":"x"}]}`, header: map[string]string{"Idempotency-Key": "k"}}, 400, "idempotency_key"},
		{"malformed", request{key: acmeKey, body: `{"messages":[`}, 400, "truncated"},
		{"no messages", request{key: acmeKey, body: `{}`}, 400, "messages is required"},
		{"empty", request{key: acmeKey, body: `{"messages":[]}`}, 400, "empty"},
		{"not an array", request{key: acmeKey, body: `{"messages":{"body":"x"}}`}, 400, "array"},
		{"101 messages", request{key: acmeKey, body: many}, 400, "101 messages, at most 100"},
		{"unknown field", request{key: acmeKey, body: `{"messages":[{"body":"x"}],"tenant":"globex"}`}, 400, `unknown field "tenant"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			tt.r.path = "/v1/messages/batch"
			w := f.do(t, tt.r)
			if w.Code != tt.wantStatus || !strings.Contains(decode[problem](t, w).Detail, tt.wantDetail) {
				t.Errorf("%d %s, want %d mentioning %q", w.Code, w.Body, tt.wantStatus, tt.wantDetail)
			}
			if f.depth(t) != 0 {
				t.Error("a refused batch enqueued messages")
			}
		})
	}
}

func TestBatchAdmission(t *testing.T) {
	t.Parallel()
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		resp, got := f.batch(t, slowKey, `{"body":"1"}`, `{"body":"2"}`, `{"body":"3"}`, `{"body":"4"}`)
		want := []entryResult{{Status: 202}, {Status: 202}, {Status: 429, Code: "rate_limited", RetryAfter: 1}, {Status: 429, Code: "rate_limited", RetryAfter: 1}}
		if diff := cmp.Diff(want, brief(got)); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("RateLimit-Limit") != "2" {
			t.Errorf("headers %v", resp.Header)
		}
	})
	t.Run("backlog", func(t *testing.T) {
		t.Parallel()
		bl := &fixedBacklog{}
		bl.set("bp", 1998) // room for 2; rate 0.2/s, bucket of 1
		f := setup(t, withTenants(bpTenant), func(c *gateway.Config) { c.Backlog = bl })
		_, got := f.batch(t, "bp-key", `{"body":"1"}`, `{"body":"2"}`, `{"body":"3"}`, `{"body":"4"}`)
		want := []entryResult{{Status: 202}, {Status: 429, Code: "rate_limited", RetryAfter: 5}, {Status: 429, Code: "backlog_full", RetryAfter: 1}, {Status: 429, Code: "backlog_full", RetryAfter: 1}}
		if diff := cmp.Diff(want, brief(got)); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
	})
}

func TestBatchIdempotency(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, first := f.batch(t, acmeKey, `{"body":"a","idempotency_key":"A"}`, `{"body":"a","idempotency_key":"A"}`, `{"body":"b","idempotency_key":"B"}`, `{"body":"c"}`,
		`{"body":"a again","idempotency_key":"A"}`)
	// A key repeated with the same message is answered once; with another
	// message it is a misuse of the key.
	want := []entryResult{{Status: 202}, {Status: 200}, {Status: 202}, {Status: 202}, {Status: 422, Code: "idempotency_key_reused"}}
	if diff := cmp.Diff(want, brief(first)); diff != "" {
		t.Fatalf("first batch (-want +got):\n%s", diff)
	}
	if first[1].ID != first[0].ID {
		t.Errorf("a key repeated within a batch got ids %s and %s", first[0].ID, first[1].ID)
	}
	_, again := f.batch(t, acmeKey, `{"body":"b","idempotency_key":"B"}`, `{"body":"a","idempotency_key":"A"}`)
	if diff := cmp.Diff([]entryResult{{Status: 200}, {Status: 200}}, brief(again)); diff != "" {
		t.Fatalf("second batch (-want +got):\n%s", diff)
	}
	if again[0].ID != first[2].ID || again[1].ID != first[0].ID {
		t.Errorf("repeats answered %s, %s; want %s, %s", again[0].ID, again[1].ID, first[2].ID, first[0].ID)
	}
	// The single-message endpoint shares the keys.
	w := f.do(t, request{key: acmeKey, body: `{"body":"a"}`, header: map[string]string{"Idempotency-Key": "A"}})
	if w.Code != http.StatusOK || decode[accepted](t, w).ID != first[0].ID {
		t.Errorf("single repeat of a batch key: %d %s", w.Code, w.Body)
	}
	if n := f.depth(t); n != 3 {
		t.Errorf("%d messages, want 3", n)
	}
}
