package envelope

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		m    Meta
	}{
		{"zero", Meta{}},
		{"time only", Meta{EnqueuedAt: 1795256386120}},
		{"all fields", Meta{EnqueuedAt: 1, ID: "0190b3c4-7a1e-7c3d-9f00-5a6b7c8d9e0f", Attempts: 3, RequestID: "req-1", IdempotencyKey: "order-42", Origin: "fairq-live-03", LastError: "status 500", NotBefore: 1795256387120, FirstReceivedAt: 1795256386200, Parked: true,
			Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
		{"trace state only", Meta{EnqueuedAt: 2, Tracestate: "vendor=a=b"}},
		{"not before only", Meta{NotBefore: 9}},
		{"negative", Meta{EnqueuedAt: -5, Attempts: -1, NotBefore: -7}},
		{"escapes", Meta{LastError: "\"quoted\" \\ back\nslash\t\x01", RequestID: "ünï©ødé 🚀"}},
		{"invalid utf-8", Meta{LastError: "bad \xff byte"}},
		{"control characters", Meta{LastError: "\b\f\r\x00\x1f\x7f \u2028\u2029"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := marshalNoHTML(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.m.Encode(); got != want {
				t.Errorf("Encode() = %s, want %s", got, want)
			}
			if got := string(tt.m.AppendEncode([]byte("prefix:"))); got != "prefix:"+want {
				t.Errorf("AppendEncode(prefix:) = %s, want prefix:%s", got, want)
			}
		})
	}
}

func TestAppendEncodeSizesWithoutAllocating(t *testing.T) {
	m := Meta{EnqueuedAt: 1795256386120, RequestID: "696c6095fa5d-1", IdempotencyKey: "order-42", Origin: "fairq-live-04"}
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		var buf [160]byte
		n = len(m.AppendEncode(buf[:0]))
	})
	if allocs != 0 || n != len(m.Encode()) {
		t.Errorf("sizing by AppendEncode: %v allocations, length %d; want 0 and %d", allocs, n, len(m.Encode()))
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Meta
		wantErr bool
	}{
		{name: "encoded", in: `{"t":17,"i":"id-1","a":2,"r":"r1","k":"k1","q":"fairq-live-00","e":"boom","n":1795256387120,"f":18}`,
			want: Meta{EnqueuedAt: 17, ID: "id-1", Attempts: 2, RequestID: "r1", IdempotencyKey: "k1", Origin: "fairq-live-00", LastError: "boom", NotBefore: 1795256387120, FirstReceivedAt: 18}},
		{name: "trace context", in: `{"t":17,"i":"id-1","tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","ts":"congo=t61rcWkgMzE"}`,
			want: Meta{EnqueuedAt: 17, ID: "id-1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE"}},
		{name: "trace state first", in: `{"ts":"a=1","t":3}`, want: Meta{EnqueuedAt: 3, Tracestate: "a=1"}},
		{name: "trace parent twice", in: `{"t":1,"tp":"a","tp":"b"}`, want: Meta{EnqueuedAt: 1, Traceparent: "b"}},
		{name: "trace parent not a string", in: `{"t":1,"tp":1}`, wantErr: true},
		{name: "two-letter key of a newer release", in: `{"t":1,"tx":"y"}`, want: Meta{EnqueuedAt: 1}},
		{name: "parked", in: `{"t":17,"a":1,"p":true}`, want: Meta{EnqueuedAt: 17, Attempts: 1, Parked: true}},
		{name: "parked false", in: `{"t":17,"p":false}`, want: Meta{EnqueuedAt: 17}},
		{name: "parked not a boolean", in: `{"t":17,"p":1}`, wantErr: true},
		{name: "written before ids existed", in: `{"t":17,"a":2,"q":"fairq-live-00"}`, want: Meta{EnqueuedAt: 17, Attempts: 2, Origin: "fairq-live-00"}},
		{name: "written before not-before existed", in: `{"t":17,"a":2}`, want: Meta{EnqueuedAt: 17, Attempts: 2}},
		{name: "not before first", in: `{"n":5,"t":1}`, want: Meta{EnqueuedAt: 1, NotBefore: 5}},
		{name: "not before twice", in: `{"t":1,"n":5,"n":6}`, want: Meta{EnqueuedAt: 1, NotBefore: 6}},
		{name: "not before a string", in: `{"t":1,"n":"5"}`, wantErr: true},
		{name: "spaces and order", in: ` { "q" : "x", "t" : 5 } `, want: Meta{EnqueuedAt: 5, Origin: "x"}},
		{name: "escapes", in: `{"t":1,"e":"a\"b\\c\u00e9"}`, want: Meta{EnqueuedAt: 1, LastError: "a\"b\\cé"}},
		{name: "unknown field of a newer release", in: `{"t":1,"z":[1,2]}`, want: Meta{EnqueuedAt: 1}},
		{name: "empty object", in: `{}`, want: Meta{}},
		{name: "not json", in: `t=1`, wantErr: true},
		{name: "wrong type", in: `{"t":"1"}`, wantErr: true},
		{name: "leading zero", in: `{"t":01}`, wantErr: true},
		{name: "truncated", in: `{"t":1`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Decode(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decode(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// marshalNoHTML is encoding/json's Marshal without HTML escaping, the
// reference Encode must match.
func marshalNoHTML(m Meta) (string, error) {
	var b jsonBuffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", err
	}
	return string(b[:len(b)-1]), nil // Encode adds a newline
}

type jsonBuffer []byte

func (b *jsonBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// FuzzDecode checks that the fast path agrees with encoding/json on every
// input, and that Encode round-trips whatever Decode accepts.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"t":1795256386120,"a":1,"r":"696c6095fa5d-1","q":"fairq-live-04"}`,
		`{"t":1,"e":"a\"b"}`, `{}`, `{"t":-0}`, `{"t":1,"t":2}`, `{"a":9999999999999999999}`,
		`{"r":"\xff"}`, ` {"t":1}`, `{"k":""}`, `null`, `{"t":1e3}`,
		`{"t":1,"n":1795256387120}`, `{"n":-0}`, `{"n":01}`, `{"n":9223372036854775808}`,
		`{"t":1,"tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","ts":"k=v"}`, `{"tp":"x","tp":"y"}`, `{"ts":1}`, `{"tq":"x"}`, `{"P":"x"}`, `{"S":"x"}`, `{"TP":"x"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Decode(s)
		var want Meta
		wantErr := json.Unmarshal([]byte(s), &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Decode(%q) error = %v, encoding/json error = %v", s, err, wantErr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Decode(%q) differs from encoding/json (-json +got):\n%s", s, diff)
		}
		back, err := Decode(got.Encode())
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)) error = %v", got, err)
		}
		// Encode replaces invalid UTF-8, as encoding/json does when it
		// writes; compare what survives a write.
		var norm Meta
		ref, _ := marshalNoHTML(got)
		_ = json.Unmarshal([]byte(ref), &norm)
		if diff := cmp.Diff(norm, back); diff != "" {
			t.Fatalf("round trip of %+v (-want +got):\n%s", got, diff)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	s := Meta{EnqueuedAt: 1795256386120, Attempts: 1, RequestID: "696c6095fa5d-1", Origin: "fairq-live-04"}.Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	m := Meta{EnqueuedAt: 1795256386120, Attempts: 1, RequestID: "696c6095fa5d-1", Origin: "fairq-live-04"}
	b.ReportAllocs()
	for b.Loop() {
		_ = m.Encode()
	}
}

func BenchmarkAppendEncode(b *testing.B) {
	m := Meta{EnqueuedAt: 1795256386120, Attempts: 1, RequestID: "696c6095fa5d-1", Origin: "fairq-live-04"}
	buf := make([]byte, 0, 160)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.AppendEncode(buf[:0])
	}
}

// FuzzEncode checks that Encode writes what encoding/json writes.
func FuzzEncode(f *testing.F) {
	f.Add(int64(1795256386120), "0190b3c4-7a1e-7c3d-9f00-5a6b7c8d9e0f", 1, "req", "key", "fairq-live-00", "status 500\n", int64(0), int64(1795256386200))
	f.Add(int64(-1), "", 0, "\xff\u2028", "", "", "\"\\", int64(1795256387120), int64(-3))
	f.Fuzz(func(t *testing.T, at int64, id string, attempts int, r, k, q, e string, notBefore, firstReceived int64) {
		m := Meta{EnqueuedAt: at, ID: id, Attempts: attempts, RequestID: r, IdempotencyKey: k, Origin: q, LastError: e, NotBefore: notBefore, FirstReceivedAt: firstReceived, Parked: at%2 == 0}
		want, err := marshalNoHTML(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Encode(); got != want {
			t.Fatalf("Encode(%+v) = %s, want %s", m, got, want)
		}
	})
}

// BenchmarkDecodeEncodingJSON is the reference Decode is measured against.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	s := []byte(Meta{EnqueuedAt: 1795256386120, Attempts: 1, RequestID: "696c6095fa5d-1", Origin: "fairq-live-04"}.Encode())
	b.ReportAllocs()
	for b.Loop() {
		var m Meta
		if err := json.Unmarshal(s, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeEncodingJSON is the reference Encode is measured against.
func BenchmarkEncodeEncodingJSON(b *testing.B) {
	m := Meta{EnqueuedAt: 1795256386120, Attempts: 1, RequestID: "696c6095fa5d-1", Origin: "fairq-live-04"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNewID(t *testing.T) {
	now := time.UnixMilli(1795256386120)
	a, b := NewID(now), NewID(now)
	if a == b {
		t.Fatalf("two ids made at once are equal: %s", a)
	}
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for _, id := range []string{a, b} {
		if len(id) != IDLength || !re.MatchString(id) {
			t.Errorf("NewID() = %q, want a UUID version 7", id)
		}
	}
	// The first 48 bits are the time in milliseconds.
	if got, want := strings.ReplaceAll(a[:13], "-", ""), fmt.Sprintf("%012x", now.UnixMilli()); got != want {
		t.Errorf("time part %s, want %s", got, want)
	}
	if later := NewID(now.Add(time.Millisecond)); later < a {
		t.Errorf("an id made later sorts first: %s < %s", later, a)
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	now := time.Now()
	for b.Loop() {
		_ = NewID(now)
	}
}
