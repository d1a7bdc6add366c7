package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestScanMessage: the fast path takes the messages clients send, with the
// result of the full path, and leaves what it is not sure of to the full
// path. FuzzDecodeMessage holds the two paths together on any input.
func TestScanMessage(t *testing.T) {
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
		{name: "JSON body compacted", data: " {\"body\" : {\"order\" : 42, \"note\":\"a b\" , \"l\":[1, -2.5e3,true,null, {}, []]}}\n", taken: true,
			want: message{body: `{"order":42,"note":"a b","l":[1,-2.5e3,true,null,{},[]]}`}},
		{name: "escapes decoded", data: `{"body":"{\"a\":\"\u00e9\ud83d\ude00\"}\n\t\\\/"}`, taken: true,
			want: message{body: "{\"a\":\"é😀\"}\n\t\\/"}},
		{name: "escapes in a JSON body kept", data: `{"body":{"a":"\u00e9\n"}}`, taken: true, want: message{body: `{"a":"\u00e9\n"}`}},
		{name: "nulls", data: `{"body":"x","attributes":null,"delay_seconds":null}`, taken: true, want: message{body: "x"}},
		{name: "empty attributes", data: `{"body":"x","attributes":{}}`, taken: true, want: message{body: "x", attrs: map[string]string{}}},
		{name: "batch entry key", data: `{"body":"x","idempotency_key":"k-1"}`, batchEntry: true, taken: true, want: message{body: "x", idempotencyKey: "k-1"}},
		{name: "batch entry null key", data: `{"body":"x","idempotency_key":null}`, batchEntry: true, taken: true, want: message{body: "x"}},
		{name: "number body", data: `{"body":0}`, taken: true, want: message{body: "0"}},

		{name: "key in a single message", data: `{"body":"x","idempotency_key":"k"}`},
		{name: "repeated field", data: `{"body":"x","body":"y"}`},
		{name: "repeated attribute", data: `{"body":"x","attributes":{"a":"1","a":"2"}}`},
		{name: "escaped field name", data: `{"bod\u0079":"x"}`},
		{name: "lone surrogate", data: `{"body":"\ud800"}`},
		{name: "minus zero delay", data: `{"body":"x","delay_seconds":-0}`},
		{name: "null body", data: `{"body":null}`},
		{name: "no body", data: `{}`},
		{name: "reserved attribute", data: `{"body":"x","attributes":{"fairq-tenant":"t"}}`},
		{name: "trailing data", data: `{"body":"x"} {}`},
		{name: "leading zero", data: `{"body":{"a":01}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := scanMessage([]byte(tc.data), tc.batchEntry)
			if ok != tc.taken {
				t.Fatalf("scanMessage(%s) took it: %v, want %v", tc.data, ok, tc.taken)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("scanMessage(%s) (-want +got):\n%s", tc.data, diff)
			}
			full, err := decodeMessageFull([]byte(tc.data), tc.batchEntry)
			if err != nil {
				t.Fatalf("full path: %v", err)
			}
			if diff := cmp.Diff(full, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("differs from the full path (-full +fast):\n%s", diff)
			}
		})
	}
}

// BenchmarkDecodeMessage decodes the message of the load test, through the
// fast path and through encoding/json.
func BenchmarkDecodeMessage(b *testing.B) {
	data := []byte(`{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`)
	for _, path := range []struct {
		name   string
		decode func([]byte, bool) (message, error)
	}{{"fast", decodeMessage}, {"full", decodeMessageFull}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := path.decode(data, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
