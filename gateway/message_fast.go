package gateway

import (
	"encoding/json"
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/fairq/fairq/envelope"
)

// fastMessage is decodeMessage's fast path, taken by every message:
// encoding/json/v2 (go-json-experiment/json, the source of the standard
// library's) decodes it into a struct, without the maps of raw values
// encoding/json needs to refuse unknown fields, which cost the enqueue
// handler more than anything else it does; fairq's own checks follow. It
// returns ok only for a message the full path (decodeObject, messageOf)
// accepts, with the same result. Anything else makes it return false, and
// the caller takes the full path, which finds the error and words it:
// malformed JSON, an unknown field or a field's name in other letters
// (names match exactly), a repeated name (which the full path takes the
// last of), a lone surrogate escape (which encoding/json replaces with
// U+FFFD), a value a check refuses. A fuzz test holds the two paths
// together. data must be valid UTF-8.
func fastMessage(data []byte, batchEntry bool) (message, bool) {
	var f fastEntry
	var err error
	if batchEntry {
		err = jsonv2.Unmarshal(data, &f, fastOptions)
	} else {
		err = jsonv2.Unmarshal(data, &f.fastFields, fastOptions)
	}
	if err != nil {
		return message{}, false
	}
	if !f.Body.ok {
		return message{}, false
	}
	m := message{body: f.Body.text}
	if f.Attributes.refused {
		return message{}, false
	}
	m.attrs = f.Attributes.attrs
	if len(f.Delay) > 0 {
		if m.delay, err = delayOf(json.RawMessage(f.Delay), ""); err != nil {
			return message{}, false
		}
	}
	if f.IdempotencyKey != nil {
		if checkIdempotencyKey(*f.IdempotencyKey) != nil {
			return message{}, false
		}
		m.idempotencyKey = *f.IdempotencyKey
	}
	return m, true
}

// fastFields are the fields of a message. The delay is kept as JSON,
// checked as the full path checks it.
type fastFields struct {
	Body       fastBody       `json:"body"`
	Attributes fastAttributes `json:"attributes"`
	Delay      jsontext.Value `json:"delay_seconds"`
}

// fastEntry is a batch entry, which may hold an idempotency key.
type fastEntry struct {
	fastFields
	IdempotencyKey *string `json:"idempotency_key"` // nil for null
}

// fastOptions: encoding/json/v2's semantics (names match
// exactly; repeated names, invalid UTF-8 and nesting deeper than 10000
// levels are errors; strings are copies, as the request's buffer is
// reused), with unknown fields refused.
var fastOptions = jsonv2.RejectUnknownMembers(true)

// The kinds of token the fast path tells apart, as jsontext.Kind names
// them: the first byte of the token.
const (
	kindString      jsontext.Kind = '"'
	kindNull        jsontext.Kind = 'n'
	kindBeginObject jsontext.Kind = '{'
	kindEndObject   jsontext.Kind = '}'
)

// fastBody is the body as bodyOf reads it: a JSON string is the body, any
// other value but null its compacted JSON text. ok is false for a body the
// full path refuses.
type fastBody struct {
	text string
	ok   bool
}

// compactOptions make jsontext.AppendFormat compact a value as
// json.Compact does: white space out, strings and numbers as they are.
var compactOptions = []jsontext.Options{jsontext.PreserveRawStrings(true), jsontext.Multiline(false)}

// UnmarshalJSONFrom reads the body from the decoder's buffer: the body's
// string is the one copy made of it.
func (b *fastBody) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*b = fastBody{}
	switch dec.PeekKind() {
	case kindString:
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		b.text = tok.String()
	default:
		raw, err := dec.ReadValue()
		if err != nil || raw.Kind() == kindNull {
			return err
		}
		if compact(raw) {
			b.text = string(raw)
			break
		}
		// A small body is compacted on the stack; it is copied once,
		// into its string.
		var small [512]byte
		v, err := jsontext.AppendFormat(small[:0], raw, compactOptions...)
		if err != nil {
			return err
		}
		b.text = string(v)
	}
	b.ok = b.text != "" && invalidTextAt(b.text) < 0
	return nil
}

// fastAttributes are the attributes as attributesOf reads them, nil for
// null or none. refused is set for attributes the full path refuses.
type fastAttributes struct {
	attrs   map[string]string
	refused bool
}

// errNotAttributes stops the decoding of a message whose attributes are
// not an object of strings, which the full path refuses.
var errNotAttributes = errors.New("attributes must be an object of strings")

// UnmarshalJSONFrom reads the attributes token by token: the map is made
// once their number is known, with room for fairq's three, as
// attributesOf makes it.
func (a *fastAttributes) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*a = fastAttributes{}
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return err
	case tok.Kind() == kindNull:
		return nil
	case tok.Kind() != kindBeginObject:
		return errNotAttributes
	}
	var pairs [envelope.MaxUserAttributes][2]string
	n := 0
	for dec.PeekKind() != kindEndObject {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String() // before the next call, which voids tok
		if n == len(pairs) || dec.PeekKind() != kindString {
			return errNotAttributes
		}
		if tok, err = dec.ReadToken(); err != nil {
			return err
		}
		pairs[n] = [2]string{name, tok.String()}
		n++
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	a.attrs = make(map[string]string, n+3)
	for _, p := range pairs[:n] {
		name, v := p[0], p[1]
		if v == "" || invalidTextAt(v) >= 0 || checkAttributeName(name) != nil {
			a.refused = true
		}
		a.attrs[name] = v // a repeated name, which the decoder refuses, would be the last, as in the full path
	}
	return nil
}

// compact reports whether a valid JSON value has no white space outside
// its strings, so that compacting it would change nothing: the common
// case, which then costs a scan instead of a re-encoding.
func compact(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			i++ // the escaped byte, which may be a quote
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
