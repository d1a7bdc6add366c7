package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// Limits of a message request.
const (
	MaxDelaySeconds         = 900
	MaxAttributeName        = 256
	MaxIdempotencyKey       = 128
	maxDetailName           = 64 // longest field or attribute name quoted in an error
	reservedAttributePrefix = "fairq-"
)

// message is a decoded and validated message request.
type message struct {
	body  string
	attrs map[string]string // the caller's attributes only
	delay time.Duration
	// idempotencyKey comes from the header for a single message and from
	// the entry in a batch.
	idempotencyKey string
}

// decodeMessage decodes and checks the JSON of one message:
//
//	{"body": string or any JSON, "attributes": {name: string}, "delay_seconds": 0-900}
//
// A body that is a JSON string is the message body; any other JSON value
// is stored as its (compacted) JSON text. Unknown fields, wrong types,
// more than envelope.MaxUserAttributes attributes, attribute names SQS
// refuses or fairq reserves, and characters SQS refuses are
// invalid_request errors that name the problem. The size is checked by the
// caller, which knows the reserved attributes.
//
// Every message first takes fastMessage's fast path (encoding/json/v2); what
// that one refuses comes back here to decodeMessageFull, which words any
// error.
func decodeMessage(data []byte, batchEntry bool) (message, error) {
	if !utf8.Valid(data) {
		return message{}, errorf(CodeInvalidRequest, "request body is not valid UTF-8")
	}
	if m, ok := fastMessage(data, batchEntry); ok {
		return m, nil
	}
	return decodeMessageFull(data, batchEntry)
}

// decodeMessageFull is decodeMessage through encoding/json.
func decodeMessageFull(data []byte, batchEntry bool) (message, error) {
	fields, err := decodeObject(data, "request body")
	if err != nil {
		return message{}, err
	}
	return messageOf(fields, "", batchEntry)
}

// decodeObject decodes one JSON object and nothing after it.
func decodeObject(data []byte, what string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, jsonError(err, what)
	}
	if fields == nil {
		return nil, errorf(CodeInvalidRequest, "%s must be a JSON object, not null", what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errorf(CodeInvalidRequest, "%s has data after its JSON object", what)
	}
	return fields, nil
}

// messageOf checks the fields of one message; prefix names it in errors
// ("messages[3]." in a batch).
func messageOf(fields map[string]json.RawMessage, prefix string, batchEntry bool) (message, error) {
	var unknown []string
	for name := range fields {
		switch name {
		case "body", "attributes", "delay_seconds":
		case "idempotency_key":
			if !batchEntry {
				unknown = append(unknown, name)
			}
		default:
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return message{}, errorf(CodeInvalidRequest, "unknown field %s%s", prefix, quoteName(slices.Min(unknown)))
	}
	raw, ok := fields["body"]
	if !ok {
		return message{}, errorf(CodeInvalidRequest, "%sbody is required", prefix)
	}
	var m message
	var err error
	if m.body, err = bodyOf(raw, prefix); err != nil {
		return message{}, err
	}
	if raw, ok := fields["attributes"]; ok {
		if m.attrs, err = attributesOf(raw, prefix); err != nil {
			return message{}, err
		}
	}
	if raw, ok := fields["delay_seconds"]; ok {
		if m.delay, err = delayOf(raw, prefix); err != nil {
			return message{}, err
		}
	}
	if raw, ok := fields["idempotency_key"]; ok && !isJSONNull(raw) {
		var k string
		if !isJSONString(raw) || json.Unmarshal(raw, &k) != nil {
			return message{}, errorf(CodeInvalidRequest, "%sidempotency_key must be a string", prefix)
		}
		if err := checkIdempotencyKey(k); err != nil {
			return message{}, errorf(CodeInvalidRequest, "%sidempotency_key %s", prefix, err.Detail)
		}
		m.idempotencyKey = k
	}
	return m, nil
}

// quoteName quotes a name taken from a request for an error detail,
// cutting it short.
func quoteName(s string) string {
	if len(s) > maxDetailName {
		cut := maxDetailName
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

func isJSONString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func isJSONNull(raw json.RawMessage) bool { return string(raw) == "null" }

func bodyOf(raw json.RawMessage, prefix string) (string, error) {
	var body string
	switch {
	case isJSONNull(raw):
		return "", errorf(CodeInvalidRequest, "%sbody is required, not null", prefix)
	case isJSONString(raw):
		if err := json.Unmarshal(raw, &body); err != nil {
			return "", jsonError(err, prefix+"body")
		}
	default:
		var buf bytes.Buffer
		buf.Grow(len(raw))
		if err := json.Compact(&buf, raw); err != nil {
			return "", jsonError(err, prefix+"body")
		}
		body = buf.String()
	}
	if body == "" {
		return "", errorf(CodeInvalidRequest, "%sbody must not be empty", prefix)
	}
	if i := invalidTextAt(body); i >= 0 {
		return "", errorf(CodeInvalidRequest, "%sbody has a character SQS does not accept at byte %d (allowed: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF)", prefix, i)
	}
	return body, nil
}

func attributesOf(raw json.RawMessage, prefix string) (map[string]string, error) {
	if isJSONNull(raw) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errorf(CodeInvalidRequest, "%sattributes must be an object of strings", prefix)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, jsonError(err, prefix+"attributes")
	}
	if len(fields) > envelope.MaxUserAttributes {
		return nil, errorf(CodeInvalidRequest, "%sattributes has %d attributes, at most %d", prefix, len(fields), envelope.MaxUserAttributes)
	}
	attrs := make(map[string]string, len(fields)+3) // room for the reserved three
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := fields[name]
		if err := checkAttributeName(name); err != nil {
			return nil, errorf(CodeInvalidRequest, "%sattributes: %s", prefix, err.Detail)
		}
		var s string
		if !isJSONString(v) || json.Unmarshal(v, &s) != nil {
			return nil, errorf(CodeInvalidRequest, "%sattributes.%s must be a string", prefix, name)
		}
		if s == "" {
			return nil, errorf(CodeInvalidRequest, "%sattributes.%s must not be empty", prefix, name)
		}
		if i := invalidTextAt(s); i >= 0 {
			return nil, errorf(CodeInvalidRequest, "%sattributes.%s has a character SQS does not accept at byte %d", prefix, name, i)
		}
		attrs[name] = s
	}
	return attrs, nil
}

// checkAttributeName applies SQS's rules for message attribute names and
// keeps fairq's own names for fairq.
func checkAttributeName(name string) *Error {
	if name == "" || len(name) > MaxAttributeName {
		return errorf(CodeInvalidRequest, "attribute name %s must be 1–%d characters", quoteName(name), MaxAttributeName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errorf(CodeInvalidRequest, "attribute name %s may hold only letters, digits, '-', '_' and '.'", quoteName(name))
		}
	}
	// The name is ASCII: the prefixes are compared without a lowercased
	// copy.
	switch {
	case name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, ".."):
		return errorf(CodeInvalidRequest, "attribute name %s must not start or end with '.' or hold '..'", quoteName(name))
	case hasPrefixFold(name, "aws.") || hasPrefixFold(name, "amazon."):
		return errorf(CodeInvalidRequest, "attribute name %s: names starting with AWS. or Amazon. are reserved by SQS", quoteName(name))
	case hasPrefixFold(name, reservedAttributePrefix) || strings.EqualFold(name, envelope.AttrTraceparent):
		return errorf(CodeInvalidRequest, "attribute name %s is reserved by fairq (names starting with %q, and traceparent, which is taken from the header)", quoteName(name), reservedAttributePrefix)
	}
	return nil
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func delayOf(raw json.RawMessage, prefix string) (time.Duration, error) {
	if isJSONNull(raw) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > MaxDelaySeconds {
		return 0, errorf(CodeInvalidRequest, "%sdelay_seconds must be a whole number from 0 to %d", prefix, MaxDelaySeconds)
	}
	return time.Duration(n) * time.Second, nil
}

// checkIdempotencyKey: 1–128 printable ASCII characters.
func checkIdempotencyKey(k string) *Error {
	if k == "" || len(k) > MaxIdempotencyKey {
		return errorf(CodeInvalidRequest, "must be 1–%d printable ASCII characters", MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return errorf(CodeInvalidRequest, "must be 1–%d printable ASCII characters", MaxIdempotencyKey)
		}
	}
	return nil
}

// jsonError turns an encoding/json error into an invalid_request detail.
func jsonError(err error, what string) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &Error{Code: CodeInvalidRequest, Detail: fmt.Sprintf("%s is malformed JSON at byte %d: %v", what, syn.Offset, syn), Err: err}
	case errors.As(err, &typ):
		return &Error{Code: CodeInvalidRequest, Detail: fmt.Sprintf("%s must be a JSON object", what), Err: err}
	case errors.Is(err, io.EOF):
		return &Error{Code: CodeInvalidRequest, Detail: what + " is empty; want a JSON object", Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Code: CodeInvalidRequest, Detail: what + " is truncated JSON", Err: err}
	}
	return &Error{Code: CodeInvalidRequest, Detail: what + " is not valid JSON", Err: err}
}

// invalidTextAt returns the byte offset of the first character SQS does not
// accept in a message (#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
// #x10000-#x10FFFF, in valid UTF-8), or -1.
func invalidTextAt(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r >= 0xD800 && r <= 0xDFFF || r == 0xFFFE || r == 0xFFFF {
			return i
		}
		i += size
	}
	return -1
}

// messageSize returns the size SQS counts for a message with these
// attributes.
func messageSize(body string, attrs map[string]string) int { return queue.Size(body, attrs) }
