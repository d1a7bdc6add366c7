package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzEnqueue sends arbitrary bodies and headers through the whole
// handler: no input panics or makes a 5xx, and a refused request enqueues
// nothing.
func FuzzEnqueue(f *testing.F) {
	fx := setup(f)
	for _, seed := range []struct{ body, ctype, idem, trace string }{
		{`{"body":"x"}`, "application/json", "", ""},
		{`{"body":{"k":[1,2]},"attributes":{"a":"b"},"delay_seconds":3}`, "application/json; charset=utf-8", "key-1", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{`{"body":"x","attributes":{"fairq-tenant":"evil"}}`, "application/json", "", ""},
		{`{"body":"\u0000"}`, "application/json", "", ""},
		{"{\"body\":\"\xff\"}", "application/json", "\x7f", "ff-x"},
		{`not json`, "text/plain", "", ""},
	} {
		f.Add(seed.body, seed.ctype, seed.idem, seed.trace)
	}
	f.Fuzz(func(t *testing.T, body, ctype, idem, trace string) {
		before := fx.depth(t)
		h := map[string]string{"traceparent": trace}
		if idem != "" {
			h["Idempotency-Key"] = idem
		}
		w := fx.do(t, request{key: acmeKey, body: body, contentType: &ctype, header: h})
		switch w.Code {
		case http.StatusAccepted:
			if fx.depth(t) != before+1 {
				t.Fatalf("202 without a message")
			}
		case http.StatusOK: // a repeated Idempotency-Key
		case http.StatusUnprocessableEntity:
			// The fuzzer reuses an Idempotency-Key with another message:
			// refused with its stable code, and nothing enqueued.
			if !strings.Contains(w.Body.String(), `"code":"idempotency_key_reused"`) {
				t.Fatalf("422 for body %q: %s", body, w.Body)
			}
			if fx.depth(t) != before {
				t.Fatalf("422, yet a message was enqueued")
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests:
			if fx.depth(t) != before {
				t.Fatalf("%d, yet a message was enqueued", w.Code)
			}
		default:
			t.Fatalf("status %d for body %q: %s", w.Code, body, w.Body)
		}
	})
}
