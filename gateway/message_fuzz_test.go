package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fairq/fairq/envelope"
)

// FuzzDecodeMessage: no input panics, and whatever is accepted is a message
// SQS would take.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"body":"hello"}`,
		`{"body":{"a":[1,2,{"b":null}]},"attributes":{"k":"v","x.y":"z"},"delay_seconds":900}`,
		`{"body":"\ud83d\ude00","attributes":null,"delay_seconds":null}`,
		`{"body":12.5e3}`,
		`{"body":"x","attributes":{"a0":"v","a1":"v","a2":"v","a3":"v","a4":"v","a5":"v","a6":"v","a7":"v"}}`,
		`{"body":"x","attributes":{"fairq-tenant":"other"}}`,
		`{"body":"x","idempotency_key":"k-1"}`,
		`{"body":"a\u0000"}`,
		`{"body":"x"} trailing`,
		`[1,2]`,
		`null`,
		``,
		"{\"body\":\"\xff\"}",
		`{"body":"x","delay_seconds":1e3}`,
		`{"body":"x","delay_seconds":-0}`,
		`{"body":"x","attributes":{"":"v"}}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, batchEntry bool) {
		m, err := decodeMessage(data, batchEntry)
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Code != CodeInvalidRequest || e.Detail == "" {
				t.Fatalf("error %#v, want an invalid_request *Error with a detail", err)
			}
			return
		}
		if m.body == "" || invalidTextAt(m.body) >= 0 {
			t.Fatalf("accepted body %q", m.body)
		}
		if len(m.attrs) > envelope.MaxUserAttributes {
			t.Fatalf("accepted %d attributes", len(m.attrs))
		}
		for k, v := range m.attrs {
			if checkAttributeName(k) != nil || v == "" || invalidTextAt(v) >= 0 {
				t.Fatalf("accepted attribute %q=%q", k, v)
			}
			if strings.HasPrefix(strings.ToLower(k), "fairq-") {
				t.Fatalf("accepted reserved attribute %q", k)
			}
		}
		if m.delay < 0 || m.delay.Seconds() > MaxDelaySeconds {
			t.Fatalf("accepted delay %v", m.delay)
		}
		if !batchEntry && m.idempotencyKey != "" {
			t.Fatalf("idempotency_key taken from a single message's body")
		}
		if m.idempotencyKey != "" && checkIdempotencyKey(m.idempotencyKey) != nil {
			t.Fatalf("accepted idempotency key %q", m.idempotencyKey)
		}
	})
}

// FuzzDecodeBatch: no batch body panics; an accepted batch has 1–100
// messages, each valid or refused with an invalid_request naming it.
func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"body":"x"},{"body":{"a":1},"idempotency_key":"k"}]}`,
		`{"messages":[]}`,
		`{"messages":[1,"x",null,[],{}]}`,
		`{"messages":null}`,
		`{"messages":[{"body":"x"}],"extra":1}`,
		`{"messages":[{"body":"x","attributes":{"fairq-tenant":"t"}}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raws, err := decodeBatch(data)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Code != CodeInvalidRequest {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if len(raws) < 1 || len(raws) > MaxBatchMessages {
			t.Fatalf("accepted %d messages", len(raws))
		}
		for i, raw := range raws {
			if _, err := decodeEntry(raw, i); err != nil {
				e, ok := err.(*Error)
				if !ok || e.Code != CodeInvalidRequest || !strings.Contains(e.Detail, fmt.Sprintf("messages[%d]", i)) {
					t.Fatalf("entry %d: error %#v does not name it", i, err)
				}
			}
		}
	})
}
