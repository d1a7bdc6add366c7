package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFastMessage: the fast path takes the messages clients send, with the
// result of the full path, and leaves the rest to the full path.
// FuzzDecodeMessage holds the two paths together on any input.
func TestFastMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		data       string
		batchEntry bool
		want       message
		taken      bool // by the fast path
	}{
		{name: "string body", data: `{"body":"hello"}`, taken: true, want: message{body: "hello"}},
		{name: "every field", data: `{"body":"x","attributes":{"kind":"email","a.b":"c"},"delay_seconds":900}`, taken: true,
			want: message{body: "x", attrs: map[string]string{"kind": "email", "a.b": "c"}, delay: 900 * time.Second}},
		{name: "JSON body", data: `{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`, taken: true,
			want: message{body: `{"order":42,"note":"load test"}`, attrs: map[string]string{"kind": "bench"}}},
		{name: "JSON body compacted", data: " {\"body\" : {\"order\" : 42, \"note\":\"a b\" , \"l\":[1, -2.5e3,true,null, {}, []]}}\n", taken: true,
			want: message{body: `{"order":42,"note":"a b","l":[1,-2.5e3,true,null,{},[]]}`}},
		{name: "escapes decoded", data: `{"body":"{\"a\":\"\u00e9\ud83d\ude00\"}\n\t\\\/"}`, taken: true,
			want: message{body: "{\"a\":\"é😀\"}\n\t\\/"}},
		{name: "escapes in a JSON body kept", data: `{"body":{"a":"\u00e9\n"}}`, taken: true, want: message{body: `{"a":"\u00e9\n"}`}},
		{name: "escaped quote then space", data: `{"body":{"a":"q\" x\\", "b" :[ "\\\" "]}}`, taken: true, want: message{body: `{"a":"q\" x\\","b":["\\\" "]}`}},
		{name: "space after an escaped quote", data: `{"body":["\"", 1]}`, taken: true, want: message{body: `["\"",1]`}},
		{name: "compact JSON body kept", data: `{"body":[{"a":"x y\t"},1.5e-3,"\""]}`, taken: true, want: message{body: `[{"a":"x y\t"},1.5e-3,"\""]`}},
		{name: "escaped field name", data: `{"bod\u0079":"x"}`, taken: true, want: message{body: "x"}},
		{name: "nulls", data: `{"body":"x","attributes":null,"delay_seconds":null}`, taken: true, want: message{body: "x"}},
		{name: "empty attributes", data: `{"body":"x","attributes":{}}`, taken: true, want: message{body: "x", attrs: map[string]string{}}},
		{name: "minus zero delay", data: `{"body":"x","delay_seconds":-0}`, taken: true, want: message{body: "x"}},
		{name: "batch entry key", data: `{"body":"x","idempotency_key":"k-1"}`, batchEntry: true, taken: true, want: message{body: "x", idempotencyKey: "k-1"}},
		{name: "batch entry null key", data: `{"body":"x","idempotency_key":null}`, batchEntry: true, taken: true, want: message{body: "x"}},
		{name: "number body", data: `{"body":0}`, taken: true, want: message{body: "0"}},

		// Left to the full path: it accepts these, and they are rare.
		{name: "repeated field", data: `{"body":"x","body":"y"}`},
		{name: "repeated attribute", data: `{"body":"x","attributes":{"a":"1","a":"2"}}`},
		{name: "repeated name in a JSON body", data: `{"body":{"a":1,"a":2}}`},
		{name: "lone surrogate", data: `{"body":"\ud800"}`},

		// Refused by the full path.
		{name: "key in a single message", data: `{"body":"x","idempotency_key":"k"}`},
		{name: "null key in a single message", data: `{"body":"x","idempotency_key":null}`},
		{name: "unknown field", data: `{"body":"x","priority":1}`},
		{name: "field in capitals", data: `{"BODY":"x"}`},
		{name: "field folded to ASCII", data: `{"body":"x","attributeſ":{"a":"b"}}`},
		{name: "null body", data: `{"body":null}`},
		{name: "null body after one", data: `{"body":"x","body":null}`},
		{name: "no body", data: `{}`},
		{name: "null attribute", data: `{"body":"x","attributes":{"a":null}}`},
		{name: "null attribute after one", data: `{"body":"x","attributes":{"a":"x","a":null}}`},
		{name: "reserved attribute", data: `{"body":"x","attributes":{"fairq-tenant":"t"}}`},
		{name: "nine attributes", data: `{"body":"x","attributes":{"a0":"v","a1":"v","a2":"v","a3":"v","a4":"v","a5":"v","a6":"v","a7":"v","a8":"v"}}`},
		{name: "control character", data: "{\"body\":{\"a\":\"\x01\"}}"},
		{name: "NUL escaped", data: `{"body":"a\u0000"}`},
		{name: "delay too long", data: `{"body":"x","delay_seconds":901}`},
		{name: "delay not whole", data: `{"body":"x","delay_seconds":5.0}`},
		{name: "delay as a string", data: `{"body":"x","delay_seconds":"5"}`},
		{name: "trailing data", data: `{"body":"x"} {}`},
		{name: "trailing bracket", data: `{"body":"x"}]`},
		{name: "leading zero", data: `{"body":{"a":01}}`},
		{name: "deeper than encoding/json goes", data: deepBody(10001)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := fastMessage([]byte(tc.data), tc.batchEntry)
			if ok != tc.taken {
				t.Fatalf("fastMessage(%.80s) took it: %v, want %v", tc.data, ok, tc.taken)
			}
			full, err := decodeMessageFull([]byte(tc.data), tc.batchEntry)
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("fastMessage(%s) (-want +got):\n%s", tc.data, diff)
			}
			if err != nil {
				t.Fatalf("full path: %v", err)
			}
			if diff := cmp.Diff(full, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("differs from the full path (-full +fast):\n%s", diff)
			}
		})
	}
}

// TestFastMessageCopy: a decoded message keeps nothing of the request's
// buffer, which the gateway reuses for the next request.
func TestFastMessageCopy(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"body":"a body","attributes":{"kind":"email"},"idempotency_key":"k-1"}`,
		`{"body":{"order":42},"attributes":{"kind":"email"}}`,
	} {
		buf := []byte(in)
		got, ok := fastMessage(buf, true)
		if !ok {
			t.Fatalf("fastMessage(%s) did not take it", in)
		}
		want, err := decodeMessageFull([]byte(in), true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(message{})); diff != "" {
			t.Errorf("%s: the message changed with the buffer (-want +got):\n%s", in, diff)
		}
	}
}

// BenchmarkDecodeMessage decodes messages through the fast path and
// through encoding/json alone: the load test's message (a small JSON
// body), a small string body, and 64 KiB bodies of each kind.
func BenchmarkDecodeMessage(b *testing.B) {
	var text, items strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(`Order 42 for \"ACME\": 3 × widgets, shipped.\n`)
	}
	for i := 0; items.Len() < 64<<10; i++ {
		fmt.Fprintf(&items, `{"id":%d,"name":"item %d","price":12.5,"tags":["a","b"]},`, i, i)
	}
	for _, in := range []struct{ name, data string }{
		{"small-json", `{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`},
		{"small-string", `{"body":"{\"order\":42,\"note\":\"a short job\"}","attributes":{"kind":"email"}}`},
		{"64KiB-string", `{"body":"` + text.String() + `","attributes":{"kind":"bench"}}`},
		{"64KiB-json", `{"body":{"items":[` + strings.TrimSuffix(items.String(), ",") + `]},"attributes":{"kind":"bench"}}`},
	} {
		data := []byte(in.data)
		if _, ok := fastMessage(data, false); !ok {
			b.Fatalf("the fast path does not take the %s message", in.name)
		}
		for _, path := range []struct {
			name   string
			decode func([]byte, bool) (message, error)
		}{{"fast", decodeMessage}, {"full", decodeMessageFull}} {
			b.Run(in.name+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := path.decode(data, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
