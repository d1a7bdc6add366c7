package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bytedance/sonic"
	goccy "github.com/goccy/go-json"
	"github.com/goccy/go-json/jsontext"
	goccyv2 "github.com/goccy/go-json/v2"
	"github.com/google/go-cmp/cmp"
	segmentio "github.com/segmentio/encoding/json"

	"github.com/fairq/fairq/envelope"
)

// The fast paths of decodeMessage that JSON libraries make, measured
// against scanMessage on its contract: each returns ok only for a message
// decodeMessageFull accepts, with the same result, and leaves the rest to
// it. The library reads the JSON; the checks (sizes, characters, names,
// the delay's range) stay fairq's own. FuzzFastPaths holds each to
// decodeMessageFull, BenchmarkFastPaths measures them.

// fastPath is a candidate for decodeMessage's fast path.
type fastPath struct {
	name string
	fast func(data []byte, batchEntry bool) (message, bool)
}

// fastPaths are the hand scanner and the candidates from libraries.
var fastPaths = []fastPath{
	{"scanner", scanMessage},
	{"goccy", goccyMessage},
	{"segmentio", segmentioMessage},
	{"sonic", sonicMessage},
}

// decodeWith is decodeMessage with fast as its fast path.
func decodeWith(fast func([]byte, bool) (message, bool)) func([]byte, bool) (message, error) {
	return func(data []byte, batchEntry bool) (message, error) {
		if !utf8.Valid(data) {
			return decodeMessageFull(data, batchEntry)
		}
		if m, ok := fast(data, batchEntry); ok {
			return m, nil
		}
		return decodeMessageFull(data, batchEntry)
	}
}

// checkedMessage applies fairq's rules to what a library decoded: body is
// the body's JSON text, attrs the attributes as a map (nil for null or
// absent), delay the delay's JSON text (nil when absent), key the
// idempotency key (nil for null or absent). decodeString and compact are
// the library's.
func checkedMessage(body []byte, attrs map[string]string, delay []byte, key *string,
	decodeString func([]byte, *string) error, compact func(*bytes.Buffer, []byte) error) (message, bool) {
	var m message
	var ok bool
	if m.body, ok = bodyText(body, decodeString, compact); !ok {
		return message{}, false
	}
	if attrs != nil {
		if len(attrs) > envelope.MaxUserAttributes {
			return message{}, false
		}
		for name, v := range attrs {
			if v == "" || invalidTextAt(v) >= 0 || checkAttributeName(name) != nil {
				return message{}, false
			}
		}
		m.attrs = attrs
	}
	if len(delay) > 0 {
		d, err := delayOf(delay, "")
		if err != nil {
			return message{}, false
		}
		m.delay = d
	}
	if key != nil {
		if checkIdempotencyKey(*key) != nil {
			return message{}, false
		}
		m.idempotencyKey = *key
	}
	return m, true
}

// bodyText is bodyOf with a library: a JSON string is the body, any other
// value but null its compacted JSON text.
func bodyText(raw []byte, decodeString func([]byte, *string) error, compact func(*bytes.Buffer, []byte) error) (string, bool) {
	var body string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false
	case raw[0] == '"':
		if decodeString(raw, &body) != nil {
			return "", false
		}
	case bytes.IndexAny(raw, " \t\r\n") < 0:
		body = string(raw)
	default:
		var buf bytes.Buffer
		buf.Grow(len(raw))
		if compact(&buf, raw) != nil {
			return "", false
		}
		body = buf.String()
	}
	if body == "" || invalidTextAt(body) >= 0 {
		return "", false
	}
	return body, true
}

// goccy/go-json, through its encoding/json/v2 API: names match exactly,
// and unknown and repeated names are errors, so the attributes can be
// decoded in the same call (a repeat, which the full path takes the last
// of, is left to it).
type goccyMessageFields struct {
	Body       jsontext.Value    `json:"body"`
	Attributes map[string]string `json:"attributes"`
	Delay      jsontext.Value    `json:"delay_seconds"`
}

type goccyEntryFields struct {
	goccyMessageFields
	IdempotencyKey *string `json:"idempotency_key"`
}

var goccyOptions = goccyv2.RejectUnknownMembers(true)

func goccyString(raw []byte, s *string) error { return goccyv2.UnmarshalOf(raw, s) }

func goccyMessage(data []byte, batchEntry bool) (message, bool) {
	var f goccyEntryFields
	var err error
	if batchEntry {
		err = goccyv2.UnmarshalOf(data, &f, goccyOptions)
	} else {
		err = goccyv2.UnmarshalOf(data, &f.goccyMessageFields, goccyOptions)
	}
	if err != nil {
		return message{}, false
	}
	return checkedMessage(f.Body, f.Attributes, f.Delay, f.IdempotencyKey, goccyString, goccy.Compact)
}

// segmentio/encoding: names match exactly, unknown names are errors. A
// repeated name is decoded again into the same field, so the attributes
// are kept as JSON and decoded afterwards into a map of their own: the
// last of them counts, as in the full path.
type segmentioMessageFields struct {
	Body       json.RawMessage `json:"body"`
	Attributes json.RawMessage `json:"attributes"`
	Delay      json.RawMessage `json:"delay_seconds"`
}

type segmentioEntryFields struct {
	segmentioMessageFields
	IdempotencyKey *string `json:"idempotency_key"`
}

const segmentioFlags = segmentio.DisallowUnknownFields | segmentio.DontMatchCaseInsensitiveStructFields |
	segmentio.DontCopyRawMessage // every raw value is copied into a string afterwards

var errTrailingData = errors.New("data after the JSON value")

func segmentioParse(data []byte, v any, flags segmentio.ParseFlags) error {
	rest, err := segmentio.Parse(data, v, flags)
	if err == nil && len(rest) > 0 {
		return errTrailingData
	}
	return err
}

func segmentioString(raw []byte, s *string) error { return segmentioParse(raw, s, 0) }

func segmentioMessage(data []byte, batchEntry bool) (message, bool) {
	var f segmentioEntryFields
	var err error
	if batchEntry {
		err = segmentioParse(data, &f, segmentioFlags)
	} else {
		err = segmentioParse(data, &f.segmentioMessageFields, segmentioFlags)
	}
	// segmentio nests without a limit; encoding/json refuses a value
	// nested deeper than 10000 levels. A body with fewer brackets than
	// that cannot be so deep; one with more is left to the full path.
	if err != nil || bytes.Count(f.Body, []byte("["))+bytes.Count(f.Body, []byte("{")) > 10000 {
		return message{}, false
	}
	var attrs map[string]string
	if len(f.Attributes) > 0 {
		if segmentioParse(f.Attributes, &attrs, 0) != nil {
			return message{}, false
		}
	}
	return checkedMessage(f.Body, attrs, f.Delay, f.IdempotencyKey, segmentioString, segmentio.Compact)
}

// bytedance/sonic: names match exactly, unknown names are errors, strings
// are copies (the request's buffer is reused) and are checked for control
// characters as encoding/json checks them. As with segmentio, the
// attributes are decoded on their own. sonic has no Compact of its own.
type sonicMessageFields struct {
	Body       json.RawMessage `json:"body"`
	Attributes json.RawMessage `json:"attributes"`
	Delay      json.RawMessage `json:"delay_seconds"`
}

type sonicEntryFields struct {
	sonicMessageFields
	IdempotencyKey *string `json:"idempotency_key"`
}

var sonicAPI = sonic.Config{
	DisallowUnknownFields: true,
	CaseSensitive:         true,
	CopyString:            true,
	ValidateString:        true,
}.Froze()

func sonicString(raw []byte, s *string) error { return sonicAPI.Unmarshal(raw, s) }

func sonicMessage(data []byte, batchEntry bool) (message, bool) {
	var f sonicEntryFields
	var err error
	if batchEntry {
		err = sonicAPI.Unmarshal(data, &f)
	} else {
		err = sonicAPI.Unmarshal(data, &f.sonicMessageFields)
	}
	if err != nil {
		return message{}, false
	}
	// sonic decodes a null into a map's string as no value, keeping what
	// a repeated name had before ({"a":"x","a":null} is a = "x"), where
	// encoding/json stores "" (which fairq refuses): attributes with a
	// null are left to the full path.
	var attrs map[string]string
	if len(f.Attributes) > 0 {
		if bytes.Contains(f.Attributes, []byte("null")) && string(f.Attributes) != "null" ||
			sonicAPI.Unmarshal(f.Attributes, &attrs) != nil {
			return message{}, false
		}
	}
	return checkedMessage(f.Body, attrs, f.Delay, f.IdempotencyKey, sonicString, json.Compact)
}

// FuzzFastPaths holds every candidate fast path to decodeMessageFull: what
// one takes, the full path takes too, with the same message.
func FuzzFastPaths(f *testing.F) {
	for _, seed := range messageSeeds {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Add([]byte(deepBody(10001)), false)
	f.Fuzz(func(t *testing.T, data []byte, batchEntry bool) {
		if !utf8.Valid(data) {
			return // decodeMessage refuses it before any fast path
		}
		full, fullErr := decodeMessageFull(data, batchEntry)
		for _, p := range fastPaths {
			got, ok := p.fast(data, batchEntry)
			if !ok {
				continue
			}
			if fullErr != nil {
				t.Errorf("%s took %q (batch entry %v); the full path refuses it: %v", p.name, data, batchEntry, fullErr)
				continue
			}
			if diff := cmp.Diff(full, got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("%s: %q (batch entry %v) differs from the full path (-full +%s):\n%s", p.name, data, batchEntry, p.name, diff)
			}
		}
	})
}

// deepBody is a message whose body nests n arrays.
func deepBody(n int) string {
	return `{"body":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
}

// TestFastPaths: each candidate takes the messages clients send, with the
// full path's result, and turns away what the full path refuses.
func TestFastPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		data       string
		batchEntry bool
		taken      bool // by every fast path
	}{
		{name: "string body", data: `{"body":"hello"}`, taken: true},
		{name: "every field", data: `{"body":"x","attributes":{"kind":"email","a.b":"c"},"delay_seconds":900}`, taken: true},
		{name: "JSON body", data: `{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`, taken: true},
		{name: "JSON body compacted", data: " {\"body\" : {\"order\" : 42, \"l\":[1, -2.5e3,true,null, {}, []]}}\n", taken: true},
		{name: "escapes", data: `{"body":"{\"a\":\"\u00e9\ud83d\ude00\"}\n\t\\\/"}`, taken: true},
		{name: "nulls", data: `{"body":"x","attributes":null,"delay_seconds":null}`, taken: true},
		{name: "batch entry key", data: `{"body":"x","idempotency_key":"k-1"}`, batchEntry: true, taken: true},

		{name: "key in a single message", data: `{"body":"x","idempotency_key":"k"}`},
		{name: "null key in a single message", data: `{"body":"x","idempotency_key":null}`},
		{name: "unknown field", data: `{"body":"x","priority":1}`},
		{name: "field in capitals", data: `{"BODY":"x"}`},
		{name: "field folded to ASCII", data: `{"body":"x","attributeſ":{"a":"b"}}`},
		{name: "null body", data: `{"body":null}`},
		{name: "null body after one", data: `{"body":"x","body":null}`},
		{name: "null attribute", data: `{"body":"x","attributes":{"a":null}}`},
		{name: "null attribute after one", data: `{"body":"x","attributes":{"a":"x","a":null}}`},
		{name: "no body", data: `{}`},
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
			data := []byte(tc.data)
			full, fullErr := decodeMessageFull(data, tc.batchEntry)
			if tc.taken && fullErr != nil {
				t.Fatalf("the full path refuses a message the case expects taken: %v", fullErr)
			}
			if !tc.taken && fullErr == nil {
				t.Fatalf("the full path takes a message the case expects refused: %+v", full)
			}
			for _, p := range fastPaths {
				got, ok := p.fast(data, tc.batchEntry)
				if ok != tc.taken {
					t.Errorf("%s took it: %v, want %v", p.name, ok, tc.taken)
					continue
				}
				if diff := cmp.Diff(full, got, cmp.AllowUnexported(message{})); ok && diff != "" {
					t.Errorf("%s differs from the full path (-full +%s):\n%s", p.name, p.name, diff)
				}
			}
		})
	}
}

// TestFastPathsCopy: a decoded message keeps nothing of the request's
// buffer, which the gateway reuses for the next request.
func TestFastPathsCopy(t *testing.T) {
	t.Parallel()
	const data = `{"body":"a body","attributes":{"kind":"email"},"idempotency_key":"k-1"}`
	const jsonBody = `{"body":{"order":42},"attributes":{"kind":"email"}}`
	for _, p := range fastPaths {
		for _, in := range []string{data, jsonBody} {
			buf := []byte(in)
			m, ok := p.fast(buf, true)
			if !ok {
				t.Fatalf("%s did not take %s", p.name, in)
			}
			want, err := decodeMessageFull([]byte(in), true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = 'X'
			}
			if diff := cmp.Diff(want, m, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("%s: the message changed with the buffer (-want +got):\n%s", p.name, diff)
			}
		}
	}
}

// BenchmarkFastPaths decodes messages through decodeMessage with each
// candidate fast path, and through encoding/json alone: the load test's
// message (a small JSON body), a small string body, and 64 KiB bodies of
// each kind.
func BenchmarkFastPaths(b *testing.B) {
	var text, items strings.Builder
	for text.Len() < 64<<10 {
		text.WriteString(`Order 42 for \"ACME\": 3 × widgets, shipped.\n`)
	}
	for i := 0; items.Len() < 64<<10; i++ {
		fmt.Fprintf(&items, `{"id":%d,"name":"item %d","price":12.5,"tags":["a","b"]},`, i, i)
	}
	inputs := []struct{ name, data string }{
		{"small-json", `{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`},
		{"small-string", `{"body":"{\"order\":42,\"note\":\"a short job\"}","attributes":{"kind":"email"}}`},
		{"64KiB-string", `{"body":"` + text.String() + `","attributes":{"kind":"bench"}}`},
		{"64KiB-json", `{"body":{"items":[` + strings.TrimSuffix(items.String(), ",") + `]},"attributes":{"kind":"bench"}}`},
	}
	paths := []struct {
		name   string
		decode func([]byte, bool) (message, error)
	}{{"encoding-json", decodeMessageFull}}
	for _, p := range fastPaths {
		paths = append(paths, struct {
			name   string
			decode func([]byte, bool) (message, error)
		}{p.name, decodeWith(p.fast)})
	}
	for _, in := range inputs {
		data := []byte(in.data)
		for _, p := range fastPaths {
			if _, ok := p.fast(data, false); !ok {
				b.Fatalf("%s does not take the %s message", p.name, in.name)
			}
		}
		for _, p := range paths {
			b.Run(in.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := p.decode(data, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
