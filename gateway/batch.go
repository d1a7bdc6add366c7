package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/fairq/fairq/tenant"
)

// Batch limits.
const (
	MaxBatchMessages    = 100
	MaxBatchBodyDefault = 8 << 20
)

// entryResult is the outcome of one message of a batch.
type entryResult struct {
	Status     int    `json:"status"`
	ID         string `json:"id,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	Queue      string `json:"queue,omitempty"`
	EnqueuedAt string `json:"enqueued_at,omitempty"`
	Code       Code   `json:"code,omitempty"`
	Detail     string `json:"detail,omitempty"`
	// RetryAfter, in seconds, for a 429 or 503 entry.
	RetryAfter int64 `json:"retry_after,omitempty"`
}

type batchAnswer struct {
	Results []entryResult `json:"results"`
}

func acceptedEntry(status int, a accepted) entryResult {
	return entryResult{Status: status, ID: a.ID, Tenant: a.Tenant, Queue: a.Queue, EnqueuedAt: a.EnqueuedAt}
}

func failedEntry(err error) entryResult {
	status, e := problemOf(err)
	r := entryResult{Status: status, Code: e.Code, Detail: e.Detail}
	if e.RetryAfter > 0 {
		r.RetryAfter = ceilSeconds(e.RetryAfter)
	}
	return r
}

// handleBatch serves POST /v1/messages/batch: up to 100 messages, each
// taken through enqueue as POST /v1/messages takes one, answered 200 with
// one result per message in request order. A message's idempotency_key
// plays the part of the Idempotency-Key header, which a batch refuses.
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	t, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	es, err := s.readBatch(w, r, t)
	if err != nil {
		s.reject(w, r, t, err)
		return
	}
	d := s.enqueue(r.Context(), t, es, requestID(r.Context()), traceOf(r))
	setRateLimitHeaders(w.Header(), d)
	results := make([]entryResult, len(es))
	var retry int64
	for i := range es {
		e := &es[i]
		switch {
		case e.err != nil:
			results[i] = failedEntry(e.err)
			s.m.rejected.WithLabelValues(s.m.labels.of(t.ID), string(results[i].Code)).Inc()
			s.stats.rejected(t.ID, 1)
			s.cfg.Activity.Refused(t.ID, string(results[i].Code), 1)
			retry = max(retry, results[i].RetryAfter)
		case e.replay:
			results[i] = acceptedEntry(http.StatusOK, e.res)
		default:
			results[i] = acceptedEntry(http.StatusAccepted, e.res)
		}
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	writeJSON(w, http.StatusOK, batchAnswer{Results: results})
}

// readBatch reads and decodes the body of POST /v1/messages/batch into
// its entries; an entry that does not decode carries its error.
func (s *Server) readBatch(w http.ResponseWriter, r *http.Request, t tenant.Tenant) ([]entry, error) {
	if err := checkJSONContent(r); err != nil {
		return nil, err
	}
	if _, ok := r.Header[HeaderIdempotencyKey]; ok {
		return nil, errorf(CodeInvalidRequest, "a batch takes no Idempotency-Key header: give each message an idempotency_key")
	}
	if err := s.precheck(t); err != nil {
		return nil, err
	}
	b, err := s.readBody(w, r, t, int64(s.cfg.MaxBatchBody))
	if err != nil {
		return nil, err
	}
	raws, err := decodeBatch(b.data) // the raw messages are copies
	b.release()
	if err != nil {
		return nil, err
	}
	es := make([]entry, len(raws))
	for i, raw := range raws {
		es[i].msg, es[i].err = decodeEntry(raw, i)
	}
	return es, nil
}

// decodeBatch decodes {"messages": [...]} into its raw messages.
func decodeBatch(data []byte) ([]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errorf(CodeInvalidRequest, "request body is not valid UTF-8")
	}
	fields, err := decodeObject(data, "request body")
	if err != nil {
		return nil, err
	}
	for name := range fields {
		if name != "messages" {
			return nil, errorf(CodeInvalidRequest, "unknown field %s", quoteName(name))
		}
	}
	raw, ok := fields["messages"]
	if !ok || isJSONNull(raw) {
		return nil, errorf(CodeInvalidRequest, "messages is required")
	}
	if raw[0] != '[' {
		return nil, errorf(CodeInvalidRequest, "messages must be an array")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, jsonError(err, "messages")
	}
	switch {
	case len(raws) == 0:
		return nil, errorf(CodeInvalidRequest, "messages is empty")
	case len(raws) > MaxBatchMessages:
		return nil, errorf(CodeInvalidRequest, "messages has %d messages, at most %d", len(raws), MaxBatchMessages)
	}
	return raws, nil
}

// decodeEntry checks message i of a batch.
func decodeEntry(raw json.RawMessage, i int) (message, error) {
	if m, ok := fastMessage(raw, true); ok { // decodeMessage's fast path
		return m, nil
	}
	prefix := fmt.Sprintf("messages[%d].", i)
	if raw[0] != '{' {
		return message{}, errorf(CodeInvalidRequest, "messages[%d] must be an object", i)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return message{}, jsonError(err, fmt.Sprintf("messages[%d]", i))
	}
	return messageOf(fields, prefix, true)
}
