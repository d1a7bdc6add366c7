package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fairq/fairq/throttle"
)

// The answer to a message is written for every message the gateway takes,
// so it is written by hand, with what encoding/json and Header.Set would
// write, from pooled buffers and shared header values.

// Header names as Header.Set stores them (canonical form), so that they
// are set without being canonicalised on every answer.
const (
	headerContentType        = "Content-Type"
	headerCacheControl       = "Cache-Control"
	headerRateLimitLimit     = "Ratelimit-Limit"     // RateLimit-Limit
	headerRateLimitRemaining = "Ratelimit-Remaining" // RateLimit-Remaining
	headerRateLimitReset     = "Ratelimit-Reset"     // RateLimit-Reset
	headerTraceparent        = "Traceparent"         // HeaderTraceparent
)

// Header values set on most answers, shared by all of them. Nothing writes
// into a header's value slice in place: Header.Set replaces it and
// Header.Add appends, which copies a full slice (these have no spare
// capacity).
var (
	valueJSON        = []string{"application/json"}
	valueProblemJSON = []string{"application/problem+json"}
	valueNoStore     = []string{"no-store"}
)

// answerBuffers holds the buffers of answers written by hand.
var answerBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// writeAccepted answers with an accepted message: what writeJSON writes
// for it, without reflection.
func writeAccepted(w http.ResponseWriter, status int, a accepted) {
	bp := answerBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"id":`...)
	b = appendJSONString(b, a.ID)
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, a.Tenant)
	b = append(b, `,"queue":`...)
	b = appendJSONString(b, a.Queue)
	b = append(b, `,"enqueued_at":`...)
	b = appendJSONString(b, a.EnqueuedAt)
	b = append(b, "}\n"...)
	h := w.Header()
	h[headerContentType] = valueJSON
	h[headerCacheControl] = valueNoStore
	w.WriteHeader(status)
	w.Write(b) // Write does not keep b (io.Writer)
	*bp = b
	answerBuffers.Put(bp)
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // escapes as encoding/json does; cannot fail for a string
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// setRateLimitHeaders writes the RateLimit fields of an admission answer.
// The three values share one string and one backing array.
func setRateLimitHeaders(h http.Header, d throttle.Decision) {
	if d.Limit.Burst == 0 && d.Limit.Rate == 0 {
		return // no decision was made
	}
	reset := int64(0)
	if d.ResetAfter > 0 {
		reset = ceilSeconds(d.ResetAfter)
	}
	var buf [3 * 20]byte
	b := strconv.AppendInt(buf[:0], int64(max(d.Limit.Burst, 1)), 10)
	i := len(b)
	b = strconv.AppendInt(b, int64(max(d.Remaining, 0)), 10)
	j := len(b)
	b = strconv.AppendInt(b, reset, 10)
	s := string(b)
	v := []string{s[:i], s[i:j], s[j:]}
	h[headerRateLimitLimit] = v[0:1:1]
	h[headerRateLimitRemaining] = v[1:2:2]
	h[headerRateLimitReset] = v[2:3:3]
}

// timeLayout is RFC 3339 in UTC with milliseconds, the form of times in
// answers.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// formatTime writes t in UTC as timeLayout: by hand for years 0–9999,
// without parsing the layout, as every answer holds a time.
func formatTime(t time.Time) string {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Format(timeLayout)
	}
	hour, minute, sec := t.Clock()
	b := []byte("0000-00-00T00:00:00.000Z")
	putDigits(b[0:4], year)
	putDigits(b[5:7], int(month))
	putDigits(b[8:10], day)
	putDigits(b[11:13], hour)
	putDigits(b[14:16], minute)
	putDigits(b[17:19], sec)
	putDigits(b[20:23], t.Nanosecond()/int(time.Millisecond))
	return string(b)
}

// putDigits writes v in decimal into b, zero-padded to len(b).
func putDigits(b []byte, v int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// writeJSON answers with a JSON value.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	h := w.Header()
	h[headerContentType] = valueJSON
	h[headerCacheControl] = valueNoStore
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
