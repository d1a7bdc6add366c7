package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/envelope"
)

// FuzzDecodeMessage: no input panics, and whatever is accepted is a message
// SQS would take.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range messageSeeds {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, batchEntry bool) {
		m, err := decodeMessage(data, batchEntry)
		if utf8.Valid(data) {
			// The fast path takes only what encoding/json's path takes,
			// with the same result, and the answer is the full path's.
			full, fullErr := decodeMessageFull(data, batchEntry)
			if fast, ok := fastMessage(data, batchEntry); ok {
				if fullErr != nil {
					t.Fatalf("fast path took %q; the full path refuses it: %v", data, fullErr)
				}
				if diff := cmp.Diff(full, fast, cmp.AllowUnexported(message{})); diff != "" {
					t.Fatalf("%q: fast path differs from the full path (-full +fast):\n%s", data, diff)
				}
			}
			if diff := cmp.Diff(errorDetail(fullErr), errorDetail(err)); diff != "" {
				t.Fatalf("%q: error differs from the full path's (-full +got):\n%s", data, diff)
			}
			if diff := cmp.Diff(full, m, cmp.AllowUnexported(message{})); err == nil && diff != "" {
				t.Fatalf("%q: message differs from the full path's (-full +got):\n%s", data, diff)
			}
		}
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
		`{"messages":[{"body":"x","idempotency_key":"k"},{"body":"y","idempotency_key":"k","idempotency_key":null}]}`,
		`{"messages":[ {"body" : {"a":[1, 2]} , "attributes":{"k":"v"}} ]}`,
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
			if fast, ok := fastMessage(raw, true); ok {
				var fields map[string]json.RawMessage
				if err := json.Unmarshal(raw, &fields); err != nil {
					t.Fatalf("entry %d: fast path took %q; encoding/json refuses it: %v", i, raw, err)
				}
				full, err := messageOf(fields, "", true)
				if err != nil {
					t.Fatalf("entry %d: fast path took %q; the full path refuses it: %v", i, raw, err)
				}
				if diff := cmp.Diff(full, fast, cmp.AllowUnexported(message{})); diff != "" {
					t.Fatalf("entry %d: fast path differs from the full path (-full +fast):\n%s", i, diff)
				}
			}
			if _, err := decodeEntry(raw, i); err != nil {
				e, ok := err.(*Error)
				if !ok || e.Code != CodeInvalidRequest || !strings.Contains(e.Detail, fmt.Sprintf("messages[%d]", i)) {
					t.Fatalf("entry %d: error %#v does not name it", i, err)
				}
			}
		}
	})
}

// messageSeeds are the fuzz tests' first inputs: messages clients send and
// the corners of the contract.
var messageSeeds = []string{
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
	" \t{ \"body\" : { \"a\" : [ 1 , -2.5e+3 , true , false , null , \"s p\" ] } ,\n\"delay_seconds\" : 12 }\r\n",
	`{"body":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud83d \udc00x"}`,
	`{"body":"x","attributes":{"k\u0069nd":"v\u00e9","b":"\ud800"}}`,
	`{"body":"x","body":"y"}`,
	`{"body":"x","attributes":{"a":"1","a":"2"}}`,
	`{"body":"x","attributes":{"a":"1"},"attributes":null}`,
	`{"bod\u0079":"x"}`,
	`{"Body":"x"}`,
	`{"body":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`{"body":{"a":01}}`,
	`{"body":-0.0e-0,"delay_seconds":0}`,
	`{"body":"x","delay_seconds":900,"idempotency_key":null}`,
	`{"body":"x","delay_seconds":901}`,
	`{"body":"x","delay_seconds":5.0}`,
	`{"body":"x","attributes":{},"idempotency_key":"\u0041b"}`,
	`{"body":"","attributes":{"a":""}}`,
	`{"body":"x"}{}`,
	`{"body":"x",}`,
	`{"body":"x","attributes":{"a0":"v","a1":"v","a2":"v","a3":"v","a4":"v","a5":"v","a6":"v"}}`,
	// Repeats, nulls and names where a decoder into a struct may part
	// from the full path, which takes the last of a repeated name.
	`{"body":"x","body":null}`,
	`{"body":"x","attributes":{"a":"1"},"attributes":{"b":"2"}}`,
	`{"body":"x","attributes":{"a":null}}`,
	`{"body":"x","attributes":{"a":"x","a":null}}`,
	`{"body":"x","attributes":{"a":1,"a":"x"}}`,
	`{"body":"x","idempotency_key":"k","idempotency_key":null}`,
	`{"body":"x","delay_seconds":5,"delay_seconds":null}`,
	`{"BODY":"x"}`,
	`{"body":"x","attributeſ":{"a":"b"}}`,
	`{"body":"x","idempotency_\u006bey":"k"}`,
	`{"body":"x","delay_seconds":"5"}`,
	`{"body":"x","delay_seconds":900.0}`,
	`{"body":"x","delay_seconds":18446744073709551616}`,
	`{"body":1e400}`,
	"{\"body\":{\"a\":\"\x01\"}}",
	"{\"body\":\"a\tb\"}",
	`{"body":{"a":"\ud800"},"attributes":{"b":"\u0000"}}`,
	`{"body":{"a":1,"a":2}}`,
	`{"body":"x"}]`,
	`{"body":"x"}  `,
	deepBody(10001), // deeper than encoding/json goes
}

// deepBody is a message whose body nests n arrays.
func deepBody(n int) string {
	return `{"body":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
}

// errorDetail is what a client is told of a decoding error, "" for none.
func errorDetail(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "not an *Error: " + err.Error()
	}
	return string(e.Code) + ": " + e.Detail
}
