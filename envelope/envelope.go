package envelope

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Attribute names fairq reserves; users have the other seven of SQS's ten.
const (
	AttrTenant      = "fairq-tenant"
	AttrMeta        = "fairq-meta"
	AttrTraceparent = "traceparent"
	// MaxUserAttributes is what SQS's limit of ten leaves to users.
	MaxUserAttributes = 7
)

// Meta is the content of the fairq-meta attribute.
type Meta struct {
	// EnqueuedAt is when the gateway accepted the message, unix ms.
	EnqueuedAt int64 `json:"t"`
	// ID is the message's identity from the gateway's 202 on: the same on
	// every copy of the message, whichever queue it moved to and however
	// often a send was tried, so that deliveries carry it as
	// X-Aws-Sqsd-Msgid and duplicates can be recognised. Empty for a
	// message fairq did not enqueue until its first move, which takes the
	// queue's message id.
	ID string `json:"i,omitempty"`
	// Attempts counts deliveries before the message's current queue;
	// SQS's receive count restarts on a move, so the total is Attempts plus
	// the current ApproximateReceiveCount.
	Attempts int `json:"a,omitempty"`
	// RequestID is the X-Request-Id of the request that enqueued it.
	RequestID string `json:"r,omitempty"`
	// IdempotencyKey is the caller's Idempotency-Key, if any.
	IdempotencyKey string `json:"k,omitempty"`
	// Origin is the queue the message was first sent to.
	Origin string `json:"q,omitempty"`
	// LastError says why the last attempt failed; set on a dead letter.
	LastError string `json:"e,omitempty"`
	// NotBefore, unix ms, is when the message may run again after asking
	// to be retried later than a queue can delay it (SQS: 900 s): until
	// then a worker that receives it sends it back, delayed, without
	// running it or counting an attempt. Zero: no such wait.
	NotBefore int64 `json:"n,omitempty"`
	// FirstReceivedAt, unix ms, is when a worker first received the
	// message, on whichever queue: kept across moves, whose copies SQS
	// counts as new messages. Zero until the first move.
	FirstReceivedAt int64 `json:"f,omitempty"`
	// Parked marks a copy made while its tenant was paused (package
	// parking): its first receive only parks it, so it is no delivery
	// attempt, and its attempts count one receive fewer.
	Parked bool `json:"p,omitempty"`
	// Traceparent and Tracestate are the W3C trace context the message
	// was produced in: the gateway's producer span when it traces; when
	// it does not, Traceparent is empty (the caller's is the traceparent
	// attribute) and Tracestate is the caller's. They are kept across
	// moves, so that every delivery of the message links to its producer.
	// Messages written before they existed have neither.
	Traceparent string `json:"tp,omitempty"`
	Tracestate  string `json:"ts,omitempty"`
}

// FirstReceived returns FirstReceivedAt as a time; the zero time when
// unset.
func (m Meta) FirstReceived() time.Time {
	if m.FirstReceivedAt == 0 {
		return time.Time{}
	}
	return time.UnixMilli(m.FirstReceivedAt)
}

// NotBeforeTime returns NotBefore as a time; the zero time when unset.
func (m Meta) NotBeforeTime() time.Time {
	if m.NotBefore == 0 {
		return time.Time{}
	}
	return time.UnixMilli(m.NotBefore)
}

// Enqueued returns EnqueuedAt as a time.
func (m Meta) Enqueued() time.Time { return time.UnixMilli(m.EnqueuedAt) }

// Encode returns the attribute value: compact JSON, the fields of Meta
// under their one-letter names, empty ones left out. It is what
// encoding/json would write, built by hand because every message carries
// one.
func (m Meta) Encode() string {
	var buf [192]byte // most values fit: one allocation, the string's
	return string(m.AppendEncode(buf[:0]))
}

// AppendEncode appends the attribute value Encode returns to b. With b on
// the stack, len(m.AppendEncode(b)) sizes the value without allocating.
func (m Meta) AppendEncode(b []byte) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, m.EnqueuedAt, 10)
	b = appendField(b, "i", m.ID)
	if m.Attempts != 0 {
		b = append(b, `,"a":`...)
		b = strconv.AppendInt(b, int64(m.Attempts), 10)
	}
	b = appendField(b, "r", m.RequestID)
	b = appendField(b, "k", m.IdempotencyKey)
	b = appendField(b, "q", m.Origin)
	b = appendField(b, "e", m.LastError)
	if m.NotBefore != 0 {
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, m.NotBefore, 10)
	}
	if m.FirstReceivedAt != 0 {
		b = append(b, `,"f":`...)
		b = strconv.AppendInt(b, m.FirstReceivedAt, 10)
	}
	if m.Parked {
		b = append(b, `,"p":true`...)
	}
	b = appendField(b, "tp", m.Traceparent)
	b = appendField(b, "ts", m.Tracestate)
	return append(b, '}')
}

func appendField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped, as encoding/json does (without its HTML escaping, which an
// attribute does not need).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // as encoding/json, for JavaScript
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Decode parses a fairq-meta attribute value. The form Encode writes is
// read by a small scanner; anything else (whitespace, escapes, fields of a
// newer release) goes through encoding/json, with the same result.
func Decode(s string) (Meta, error) {
	if m, ok := decodeFast(s); ok {
		return m, nil
	}
	var m Meta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Meta{}, fmt.Errorf("decode %s: %w", AttrMeta, err)
	}
	return m, nil
}

// decodeFast reads the exact form Encode writes: no whitespace, no escapes
// in strings, known fields (one letter, or "tp" and "ts") each at most
// once. It reports false for anything else, and Decode falls back to
// encoding/json.
func decodeFast(s string) (Meta, bool) {
	var m Meta
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return m, false
	}
	s = s[1 : len(s)-1]
	var seen [12]bool
	for first := true; s != ""; first = false {
		if !first {
			if s[0] != ',' {
				return m, false
			}
			s = s[1:]
		}
		var key byte
		if key, s = readKey(s); key == 0 {
			return m, false
		}
		idx := keyIndex(key)
		if idx < 0 || seen[idx] {
			return m, false
		}
		seen[idx] = true
		var ok bool
		if s, ok = m.decodeField(key, s); !ok {
			return m, false
		}
	}
	return m, true
}

// readKey reads a key and its colon at the start of s: "x": for the
// one-letter fields, "tp": and "ts": read as 'P' and 'S'. It returns 0 for
// anything else.
func readKey(s string) (key byte, rest string) {
	switch {
	case len(s) >= 4 && s[0] == '"' && s[2] == '"' && s[3] == ':' && s[1] != 'P' && s[1] != 'S':
		return s[1], s[4:]
	case len(s) >= 5 && s[0] == '"' && s[1] == 't' && s[3] == '"' && s[4] == ':' && (s[2] == 'p' || s[2] == 's'):
		return s[2] - ('a' - 'A'), s[5:]
	}
	return 0, s
}

// decodeField reads the value of field key at the start of s into m and
// returns what follows it.
func (m *Meta) decodeField(key byte, s string) (rest string, ok bool) {
	switch key {
	case 'p':
		switch {
		case strings.HasPrefix(s, "true"):
			m.Parked = true
			return s[4:], true
		case strings.HasPrefix(s, "false"):
			return s[5:], true
		}
		return s, false
	case 't', 'a', 'n', 'f':
		end := 0
		for end < len(s) && (s[end] == '-' || s[end] >= '0' && s[end] <= '9') {
			end++
		}
		n, err := strconv.ParseInt(s[:end], 10, 64)
		if err != nil || !canonicalInt(s[:end]) {
			return s, false
		}
		return s[end:], m.setInt(key, n)
	}
	v, rest, ok := plainString(s)
	if ok {
		m.setString(key, v)
	}
	return rest, ok
}

// setInt sets the integer field of key; false if n does not fit it.
func (m *Meta) setInt(key byte, n int64) bool {
	switch key {
	case 't':
		m.EnqueuedAt = n
	case 'n':
		m.NotBefore = n
	case 'f':
		m.FirstReceivedAt = n
	default:
		if int64(int(n)) != n {
			return false
		}
		m.Attempts = int(n)
	}
	return true
}

// setString sets the string field of key.
func (m *Meta) setString(key byte, v string) {
	switch key {
	case 'i':
		m.ID = v
	case 'r':
		m.RequestID = v
	case 'k':
		m.IdempotencyKey = v
	case 'q':
		m.Origin = v
	case 'e':
		m.LastError = v
	case 'P':
		m.Traceparent = v
	case 'S':
		m.Tracestate = v
	}
}

func keyIndex(k byte) int {
	switch k {
	case 't':
		return 0
	case 'a':
		return 1
	case 'r':
		return 2
	case 'k':
		return 3
	case 'q':
		return 4
	case 'e':
		return 5
	case 'n':
		return 6
	case 'i':
		return 7
	case 'f':
		return 8
	case 'p':
		return 9
	case 'P': // "tp"
		return 10
	case 'S': // "ts"
		return 11
	}
	return -1
}

// canonicalInt reports whether s is an integer as JSON writes it (no
// leading zeros, no "-0"), so that the fast path accepts nothing that
// encoding/json would reject.
func canonicalInt(s string) bool {
	d := s
	if d != "" && d[0] == '-' {
		d = d[1:]
	}
	return d != "" && (d[0] != '0' || len(d) == 1) && s != "-0"
}

// plainString reads a JSON string with no escapes and valid UTF-8, and
// returns it and what follows.
func plainString(s string) (v, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			v = s[1:i]
			return v, s[i+1:], utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", "", false
		}
	}
	return "", "", false
}
