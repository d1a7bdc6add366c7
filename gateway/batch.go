package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
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
// checked, admitted and sent as POST /v1/messages would, answered 200 with
// one result per message in request order. A message's idempotency_key
// plays the part of the Idempotency-Key header, which a batch refuses.
// Admission takes tokens for the batch at once: the first messages get
// them, the rest are refused (rate_limited, or backlog_full beyond what
// the backlog leaves room for).
func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	t, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := s.batchRequest(w, r, t)
	if err != nil {
		s.reject(w, r, t, err)
		return
	}
	var retry int64
	for _, res := range results {
		if res.Status >= 400 {
			s.m.rejected.WithLabelValues(s.m.labels.of(t.ID), string(res.Code)).Inc()
			s.stats.rejected(t.ID, 1)
		}
		retry = max(retry, res.RetryAfter)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	writeJSON(w, http.StatusOK, batchAnswer{Results: results})
}

func (s *Server) batchRequest(w http.ResponseWriter, r *http.Request, t tenant.Tenant) ([]entryResult, error) {
	if err := checkJSONContent(r); err != nil {
		return nil, err
	}
	if _, ok := r.Header[HeaderIdempotencyKey]; ok {
		return nil, errorf(CodeInvalidRequest, "a batch takes no Idempotency-Key header: give each message an idempotency_key")
	}
	bp := bodyBuffers.Get().(*[]byte)
	data, err := appendBody((*bp)[:0], w, r, int64(s.cfg.MaxBatchBody))
	var raws []json.RawMessage
	if err == nil {
		raws, err = decodeBatch(data) // the raw messages are copies
	}
	putBodyBuffer(bp, data)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	n := len(raws)
	results := make([]entryResult, n)
	items := make([]sendItem, n)
	ready := make([]bool, n) // valid, and to send unless its key says otherwise
	reqID, tp := requestID(ctx), traceparentOf(r)
	keys := make([]string, n)
	for i, raw := range raws {
		msg, err := decodeEntry(raw, i)
		if err == nil {
			items[i], err = s.prepare(t, msg, reqID, tp)
		}
		if err != nil {
			results[i] = failedEntry(err)
			continue
		}
		ready[i], keys[i] = true, msg.idempotencyKey
	}

	// Idempotency keys: a repeat answers the first message; a key used
	// twice in the batch is answered once, for its first use.
	holds := make([]*held, n)
	dupOf := make(map[int]int)
	firstUse := make(map[string]int)
	defer func() {
		for i, h := range holds {
			if h == nil {
				continue
			}
			var answer []byte
			if results[i].Status == http.StatusAccepted {
				answer, _ = json.Marshal(accepted{ID: results[i].ID, Tenant: results[i].Tenant, Queue: results[i].Queue, EnqueuedAt: results[i].EnqueuedAt})
			}
			s.idemEnd(ctx, h, answer)
		}
	}()
	for i := range n {
		if !ready[i] || keys[i] == "" {
			continue
		}
		if j, dup := firstUse[keys[i]]; dup {
			dupOf[i], ready[i] = j, false
			continue
		}
		firstUse[keys[i]] = i
		first, h, err := s.idemBegin(ctx, t.ID, keys[i])
		switch {
		case err != nil:
			results[i], ready[i] = failedEntry(err), false
		case first != nil:
			var a accepted
			if err := json.Unmarshal(first, &a); err != nil {
				results[i] = failedEntry(&Error{Code: CodeInternal, Detail: "internal error", Err: err})
			} else {
				results[i] = acceptedEntry(http.StatusOK, a)
				s.m.replayed.WithLabelValues(s.m.labels.of(t.ID)).Inc()
			}
			ready[i] = false
		default:
			holds[i] = h
		}
	}

	// Admission for the batch at once.
	var send []int
	for i := range n {
		if ready[i] {
			send = append(send, i)
		}
	}
	if len(send) > 0 {
		d, room, err := s.admit(ctx, t, len(send))
		setRateLimitHeaders(w.Header(), d)
		lim := d.Limit
		admitted := make([]sendItem, 0, len(send))
		for k, i := range send {
			switch {
			case err != nil:
				results[i] = failedEntry(err)
			case k >= room:
				results[i] = failedEntry(&Error{Code: CodeBacklogFull, RetryAfter: time.Second,
					Detail: "tenant " + t.ID + " reached its max_backlog within this batch"})
			case k >= d.Allowed:
				results[i] = failedEntry(rateLimited(t, lim, d.RetryAfter))
			default:
				admitted = append(admitted, items[i])
				continue
			}
			send[k] = -1
		}
		// All at once, so that the batch's messages bound for one queue
		// share its calls.
		pending := s.submitAll(t, admitted)
		p := 0
		for _, i := range send {
			if i < 0 {
				continue
			}
			a, err := s.await(t, pending[p])
			p++
			if err != nil {
				results[i] = failedEntry(err)
			} else {
				results[i] = acceptedEntry(http.StatusAccepted, a)
			}
		}
	}
	for i, j := range dupOf {
		results[i] = results[j]
		if results[i].Status == http.StatusAccepted {
			results[i].Status = http.StatusOK
		}
	}
	return results, nil
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
	if m, ok := scanMessage(raw, true); ok { // decodeMessage's fast path
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
