package gateway

import (
	"bytes"
	"encoding/json"

	goccy "github.com/goccy/go-json"
	"github.com/goccy/go-json/jsontext"
	jsonv2 "github.com/goccy/go-json/v2"

	"github.com/fairq/fairq/envelope"
)

// fastMessage is decodeMessage's fast path, taken by every message:
// goccy/go-json decodes it into a struct, without the maps of raw values
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
		err = jsonv2.UnmarshalOf(data, &f, fastOptions)
	} else {
		err = jsonv2.UnmarshalOf(data, &f.fastFields, fastOptions)
	}
	if err != nil {
		return message{}, false
	}
	var m message
	var ok bool
	if m.body, ok = fastBody(f.Body); !ok {
		return message{}, false
	}
	if f.Attributes != nil {
		if len(f.Attributes) > envelope.MaxUserAttributes {
			return message{}, false
		}
		for name, v := range f.Attributes {
			if v == "" || invalidTextAt(v) >= 0 || checkAttributeName(name) != nil {
				return message{}, false
			}
		}
		m.attrs = f.Attributes
	}
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

// fastFields are the fields of a message. The body and the delay are kept
// as JSON, checked as the full path checks them.
type fastFields struct {
	Body       jsontext.Value    `json:"body"`
	Attributes map[string]string `json:"attributes"` // nil for null
	Delay      jsontext.Value    `json:"delay_seconds"`
}

// fastEntry is a batch entry, which may hold an idempotency key.
type fastEntry struct {
	fastFields
	IdempotencyKey *string `json:"idempotency_key"` // nil for null
}

// fastOptions: goccy/go-json's encoding/json/v2 semantics (names match
// exactly; repeated names, invalid UTF-8 and nesting deeper than 10000
// levels are errors; strings are copies, as the request's buffer is
// reused), with unknown fields refused.
var fastOptions = jsonv2.RejectUnknownMembers(true)

// fastBody reads the body as bodyOf does: a JSON string is the body, any
// other value but null its compacted JSON text.
func fastBody(raw []byte) (string, bool) {
	var body string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false
	case raw[0] == '"':
		if jsonv2.UnmarshalOf(raw, &body) != nil {
			return "", false
		}
	case bytes.IndexAny(raw, " \t\r\n") < 0:
		body = string(raw) // compact already
	default:
		var buf bytes.Buffer
		buf.Grow(len(raw))
		if goccy.Compact(&buf, raw) != nil {
			return "", false
		}
		body = buf.String()
	}
	if body == "" || invalidTextAt(body) >= 0 {
		return "", false
	}
	return body, true
}
