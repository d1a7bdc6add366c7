package gateway

import (
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fairq/fairq/envelope"
)

// scanMaxDepth bounds the nesting of a JSON body the fast path compacts;
// deeper bodies take the full path.
const scanMaxDepth = 64

// scanMessage is decodeMessage's fast path, taken by every message: one
// pass over the JSON, without the maps and reflection of encoding/json,
// which cost the enqueue handler more than anything else it does. It
// returns ok only for a message the full path (decodeObject, messageOf)
// accepts, with the same result; anything it is not sure of — malformed
// JSON, an unknown or repeated field, a lone surrogate escape, a value a
// check refuses, nesting deeper than scanMaxDepth — makes it return false,
// and the caller takes the full path, which finds the error and words it.
// A fuzz test holds the two paths together. data must be valid UTF-8.
func scanMessage(data []byte, batchEntry bool) (message, bool) {
	s := jsonScanner{data: data}
	if !s.next('{') {
		return message{}, false
	}
	var m message
	var seen uint8 // a bit per field, to turn repeats away
	const (
		seenBody = 1 << iota
		seenAttributes
		seenDelay
		seenKey
	)
	for {
		name, ok := s.rawString()
		if !ok || !s.next(':') {
			return message{}, false
		}
		switch string(name) { // no allocation: the compiler compares the bytes
		case "body":
			if seen&seenBody != 0 {
				return message{}, false
			}
			seen |= seenBody
			m.body, ok = s.body()
		case "attributes":
			if seen&seenAttributes != 0 {
				return message{}, false
			}
			seen |= seenAttributes
			m.attrs, ok = s.attributes()
		case "delay_seconds":
			if seen&seenDelay != 0 {
				return message{}, false
			}
			seen |= seenDelay
			m.delay, ok = s.delay()
		case "idempotency_key":
			if !batchEntry || seen&seenKey != 0 {
				return message{}, false
			}
			seen |= seenKey
			m.idempotencyKey, ok = s.idempotencyKey()
		default:
			return message{}, false
		}
		if !ok {
			return message{}, false
		}
		if s.next(',') {
			continue
		}
		if !s.next('}') {
			return message{}, false
		}
		break
	}
	s.space()
	if s.i != len(s.data) || seen&seenBody == 0 {
		return message{}, false
	}
	return m, true
}

// jsonScanner reads JSON from data at i.
type jsonScanner struct {
	data []byte
	i    int
	buf  []byte // scratch for unescaping, made on first use
}

// scratch returns the empty scratch buffer, large enough for any string
// or value of data once unescaped or compacted.
func (s *jsonScanner) scratch() []byte {
	if s.buf == nil {
		s.buf = make([]byte, 0, len(s.data))
	}
	return s.buf[:0]
}

// space skips JSON whitespace.
func (s *jsonScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips whitespace and then c, if c is there.
func (s *jsonScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.space()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// literal skips lit ("null", "true", "false") if it is next.
func (s *jsonScanner) literal(lit string) bool {
	if len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// rawString skips a well-formed JSON string and returns what is between
// its quotes, escapes as they are.
func (s *jsonScanner) rawString() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return s.data[start : s.i-1], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if s.i+1 >= len(s.data) {
				return nil, false
			}
			switch s.data[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if hex4(s.data[s.i+2:]) < 0 {
					return nil, false
				}
				s.i += 6
			default:
				return nil, false
			}
		default:
			s.i++
		}
	}
	return nil, false
}

// string reads a JSON string and returns its value, unescaped as
// encoding/json does; a lone surrogate (which encoding/json replaces with
// U+FFFD) is left to the full path.
func (s *jsonScanner) string() (string, bool) {
	raw, ok := s.rawString()
	if !ok {
		return "", false
	}
	esc := 0
	for esc < len(raw) && raw[esc] != '\\' {
		esc++
	}
	if esc == len(raw) {
		return string(raw), true
	}
	b := append(s.scratch(), raw[:esc]...)
	for i := esc; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		switch raw[i+1] { // rawString checked the escapes
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := rune(hex4(raw[i+2:]))
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair makes one character; a lone half is left to
				// the full path.
				if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return "", false
				}
				if r = utf16.DecodeRune(r, rune(hex4(raw[i+2:]))); r == unicode.ReplacementChar {
					return "", false
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, raw[i+1])
		}
		i += 2
	}
	return string(b), true
}

// hex4 returns the value of four hex digits at the start of b, or -1.
func hex4(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	v := 0
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		v = v<<4 | int(c)
	}
	return v
}

// body reads the body field as bodyOf does: a JSON string is the body,
// any other value but null its compacted JSON text.
func (s *jsonScanner) body() (string, bool) {
	var body string
	switch s.peek() {
	case '"':
		var ok bool
		if body, ok = s.string(); !ok {
			return "", false
		}
	case 'n', 0:
		return "", false
	default:
		start := s.i
		spaced, ok := s.value(0)
		if !ok {
			return "", false
		}
		if !spaced {
			body = string(s.data[start:s.i])
			break
		}
		body = string(compactValid(s.scratch(), s.data[start:s.i]))
	}
	if body == "" || invalidTextAt(body) >= 0 {
		return "", false
	}
	return body, true
}

// value skips one well-formed JSON value and reports whether there is
// whitespace within it, which json.Compact would take out.
func (s *jsonScanner) value(depth int) (spaced, ok bool) {
	if depth > scanMaxDepth {
		return false, false
	}
	// more skips the whitespace before the next token, noting it.
	more := func() {
		start := s.i
		s.space()
		spaced = spaced || s.i > start
	}
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.rawString()
		return false, ok
	case c == '{':
		s.i++
		if more(); s.next('}') {
			return spaced, true
		}
		for {
			if _, ok := s.rawString(); !ok {
				return false, false
			}
			if more(); !s.next(':') {
				return false, false
			}
			more()
			sp, ok := s.value(depth + 1)
			if !ok {
				return false, false
			}
			spaced = spaced || sp
			switch more(); {
			case s.next(','):
				more()
			case s.next('}'):
				return spaced, true
			default:
				return false, false
			}
		}
	case c == '[':
		s.i++
		if more(); s.next(']') {
			return spaced, true
		}
		for {
			more()
			sp, ok := s.value(depth + 1)
			if !ok {
				return false, false
			}
			spaced = spaced || sp
			switch more(); {
			case s.next(','):
			case s.next(']'):
				return spaced, true
			default:
				return false, false
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return false, s.number()
	}
	return false, s.literal("true") || s.literal("false") || s.literal("null")
}

// compactValid appends the well-formed JSON value v to b without the
// whitespace between its tokens, as json.Compact does.
func compactValid(b, v []byte) []byte {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			b = append(b, c, v[i+1])
			i++
			continue
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		b = append(b, c)
	}
	return b
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	d := s.data
	i := s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// attributes reads the attributes field as attributesOf does, turning
// away repeated names, which attributesOf takes the last of.
func (s *jsonScanner) attributes() (map[string]string, bool) {
	if s.peek() == 'n' {
		return nil, s.literal("null")
	}
	if !s.next('{') {
		return nil, false
	}
	// Names and values are gathered first: a map is made once their
	// number is known, with room for fairq's three, as attributesOf does.
	var pairs [envelope.MaxUserAttributes][2]string
	n := 0
	if !s.next('}') {
		for {
			if n == len(pairs) {
				return nil, false
			}
			name, ok := s.string()
			if !ok || !s.next(':') || s.peek() != '"' {
				return nil, false
			}
			v, ok := s.string()
			if !ok || v == "" || invalidTextAt(v) >= 0 || checkAttributeName(name) != nil {
				return nil, false
			}
			for _, p := range pairs[:n] {
				if p[0] == name {
					return nil, false
				}
			}
			pairs[n] = [2]string{name, v}
			n++
			if s.next(',') {
				continue
			}
			if !s.next('}') {
				return nil, false
			}
			break
		}
	}
	attrs := make(map[string]string, n+3)
	for _, p := range pairs[:n] {
		attrs[p[0]] = p[1]
	}
	return attrs, true
}

// delay reads delay_seconds as delayOf does: null, or a whole number from
// 0 to MaxDelaySeconds written plainly ("-0" is left to the full path).
func (s *jsonScanner) delay() (time.Duration, bool) {
	switch c := s.peek(); {
	case c == 'n':
		return 0, s.literal("null")
	case c == '0':
		s.i++
		return 0, true
	case '1' <= c && c <= '9':
		n := 0
		for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
			n = n*10 + int(s.data[s.i]-'0')
			if n > MaxDelaySeconds {
				return 0, false
			}
			s.i++
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// idempotencyKey reads a batch entry's idempotency_key: null, or a string
// checkIdempotencyKey accepts.
func (s *jsonScanner) idempotencyKey() (string, bool) {
	switch s.peek() {
	case 'n':
		return "", s.literal("null")
	case '"':
		k, ok := s.string()
		if !ok || checkIdempotencyKey(k) != nil {
			return "", false
		}
		return k, true
	}
	return "", false
}
