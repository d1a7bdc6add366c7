package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// Request headers the gateway reads.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderTraceparent    = "traceparent"
	// HeaderIdempotentReplayed marks the answer of a repeated
	// Idempotency-Key: the first request's message, nothing sent.
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// bodySlack is added to the raw request body cap for the JSON around a
// message and its attributes.
const bodySlack = 64 << 10

// accepted is the answer for a message on a queue.
type accepted struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	Queue      string `json:"queue"`
	EnqueuedAt string `json:"enqueued_at"`
}

// handleEnqueue serves POST /v1/messages.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	t, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, status, err := s.enqueueRequest(w, r, t)
	if err != nil {
		s.reject(w, r, t, err)
		return
	}
	writeAccepted(w, status, res)
}

func (s *Server) enqueueRequest(w http.ResponseWriter, r *http.Request, t tenant.Tenant) (accepted, int, error) {
	if err := checkJSONContent(r); err != nil {
		return accepted{}, 0, err
	}
	bp := bodyBuffers.Get().(*[]byte)
	data, err := appendBody((*bp)[:0], w, r, 3*int64(s.cfg.MaxMessageSize)+bodySlack)
	var msg message
	if err == nil {
		msg, err = decodeMessage(data, false) // keeps nothing of data
	}
	putBodyBuffer(bp, data)
	if err != nil {
		return accepted{}, 0, err
	}
	if k, ok := r.Header[HeaderIdempotencyKey]; ok {
		if len(k) != 1 {
			return accepted{}, 0, errorf(CodeInvalidRequest, "send one Idempotency-Key header, not %d", len(k))
		}
		if err := checkIdempotencyKey(k[0]); err != nil {
			return accepted{}, 0, errorf(CodeInvalidRequest, "Idempotency-Key %s", err.Detail)
		}
		msg.idempotencyKey = k[0]
	}
	item, err := s.prepare(t, msg, requestID(r.Context()), traceparentOf(r))
	if err != nil {
		return accepted{}, 0, err
	}
	ctx := r.Context()
	var h *held
	if msg.idempotencyKey != "" {
		first, claim, err := s.idemBegin(ctx, t.ID, msg.idempotencyKey)
		switch {
		case err != nil:
			return accepted{}, 0, err
		case first != nil:
			var res accepted
			if err := json.Unmarshal(first, &res); err != nil {
				return accepted{}, 0, &Error{Code: CodeInternal, Detail: "internal error", Err: err}
			}
			w.Header().Set(HeaderIdempotentReplayed, "true")
			s.m.replayed.WithLabelValues(s.m.labels.of(t.ID)).Inc()
			return res, http.StatusOK, nil
		}
		h = claim
		defer func() {
			if h != nil {
				s.idemEnd(ctx, h, nil) // not sent: a retry may try again
			}
		}()
	}
	d, _, err := s.admit(ctx, t, 1)
	setRateLimitHeaders(w.Header(), d)
	if err != nil {
		return accepted{}, 0, err
	}
	res, err := s.send(t, item)
	if err != nil {
		return accepted{}, 0, err
	}
	if h != nil {
		answer, _ := json.Marshal(res) // cannot fail: strings
		s.idemEnd(ctx, h, answer)
		h = nil
	}
	return res, http.StatusAccepted, nil
}

// reject answers an error for an authenticated tenant and counts it.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, t tenant.Tenant, err error) {
	_, e := problemOf(err)
	s.m.rejected.WithLabelValues(s.m.labels.of(t.ID), string(e.Code)).Inc()
	s.stats.rejected(t.ID, 1)
	s.writeError(w, r, err)
}

// authenticate returns the tenant of the request's bearer API key.
func (s *Server) authenticate(r *http.Request) (tenant.Tenant, error) {
	key, ok := bearer(r)
	if !ok {
		return tenant.Tenant{}, &Error{Code: CodeUnauthorized, Detail: "missing API key: send Authorization: Bearer <key>"}
	}
	t, err := s.cfg.Tenants.Authenticate(key)
	if err != nil {
		return tenant.Tenant{}, &Error{Code: CodeUnauthorized, Detail: "unknown API key", Err: err}
	}
	return t, nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(scheme):])
	return tok, tok != ""
}

// checkJSONContent accepts application/json, with at most a charset of
// utf-8.
func checkJSONContent(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		cs, ok := params["charset"]
		if len(params) == 0 || len(params) == 1 && ok && strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	if ct == "" {
		ct = "none"
	}
	return errorf(CodeUnsupportedMediaType, "Content-Type %s: want application/json", quoteName(ct))
}

// readBody reads the request body, refusing more than limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return appendBody(nil, w, r, limit)
}

// appendBody appends the request body to buf, refusing more than limit
// bytes.
func appendBody(buf []byte, w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	if r.ContentLength > 0 {
		buf = slices.Grow(buf, int(r.ContentLength)+1) // +1: room to read the end
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 512)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, &Error{Code: CodeInvalidRequest, Detail: "could not read the request body", Err: err}
		}
	}
}

// bodyBuffers holds the buffers request bodies are read into. A decoded
// message keeps nothing of its body's buffer (its strings are copies), so
// the buffer serves the next request.
var bodyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// maxPooledBody is the largest body buffer put back in bodyBuffers; larger
// ones are left to the garbage collector, so that a few large requests do
// not keep their memory.
const maxPooledBody = 64 << 10

// putBodyBuffer puts bp back in bodyBuffers, holding data's array if data
// was read into it.
func putBodyBuffer(bp *[]byte, data []byte) {
	if data != nil {
		if cap(data) > maxPooledBody {
			return
		}
		*bp = data[:0]
	}
	bodyBuffers.Put(bp)
}

// prepare makes the queue entry of a message: the caller's attributes and
// fairq's own (fairq-tenant from the key, never from the request), sized
// as SQS counts it against MaxMessageSize. fairq-meta is sized with the
// longest live queue name and set for real once the queue is picked.
func (s *Server) prepare(t tenant.Tenant, msg message, reqID, traceparent string) (sendItem, error) {
	attrs := msg.attrs
	if attrs == nil {
		attrs = make(map[string]string, 3)
	}
	attrs[envelope.AttrTenant] = t.ID
	if traceparent != "" {
		attrs[envelope.AttrTraceparent] = traceparent
	}
	now := s.cfg.Now()
	meta := envelope.Meta{EnqueuedAt: now.UnixMilli(), RequestID: reqID, IdempotencyKey: msg.idempotencyKey, Origin: s.longest}
	// Sized now, with the longest queue name, and encoded once the queue
	// is picked.
	var buf [160]byte
	size := messageSize(msg.body, attrs) + len(envelope.AttrMeta) + len("String") + len(meta.AppendEncode(buf[:0]))
	if size > s.cfg.MaxMessageSize {
		return sendItem{}, errorf(CodeTooLarge, "message is %d bytes as SQS counts it (body and attributes), at most %d", size, s.cfg.MaxMessageSize)
	}
	return sendItem{
		tenant: t.ID,
		meta:   meta,
		size:   size,
		body:   msg.body,
		attrs:  attrs,
		delay:  msg.delay,
	}, nil
}

// admit admits up to n messages of a tenant: it takes tokens from the
// tenant's ingest bucket, whose rate and size shrink linearly toward zero
// as the tenant's backlog goes from soft_backlog to max_backlog; at
// max_backlog nothing is admitted (backlog_full). It returns the decision
// (Allowed may be less than n), the room the backlog leaves (Allowed ≤
// room ≤ n: messages beyond room are refused as backlog_full, those
// between Allowed and room as rate_limited) and, when nothing is admitted,
// the error to answer with.
func (s *Server) admit(ctx context.Context, t tenant.Tenant, n int) (throttle.Decision, int, error) {
	lim := throttle.Limit{Rate: t.Limits.IngestRate, Burst: t.Limits.IngestBurst}
	if s.cfg.Backlog != nil && t.Limits.MaxBacklog > 0 {
		var b int64
		err := errResting
		if !s.backlog.resting() {
			b, err = s.cfg.Backlog.Get(ctx, t.ID)
		}
		switch {
		case err == errResting:
			if err := s.backlog.without(err); err != nil {
				return throttle.Decision{}, 0, err
			}
		case err != nil && ctx.Err() != nil:
			return throttle.Decision{}, 0, ctx.Err()
		case err != nil:
			if err := s.backlog.failed(ctx, err); err != nil {
				return throttle.Decision{}, 0, err
			}
		default:
			s.backlog.ok(ctx)
			maxB, soft := int64(t.Limits.MaxBacklog), int64(t.Limits.SoftBacklog)
			if b >= maxB {
				wait := backlogWait(b-maxB+1, t.Limits.ProcessRate)
				return throttle.Decision{Limit: lim, ResetAfter: wait}, 0, &Error{Code: CodeBacklogFull, RetryAfter: wait,
					Detail: "tenant " + t.ID + " has " + strconv.FormatInt(b, 10) + " messages waiting, at or above its max_backlog of " + strconv.FormatInt(maxB, 10)}
			}
			n = int(min(int64(n), maxB-b))
			if b > soft {
				lim = lim.Scale(float64(maxB-b) / float64(maxB-soft))
			}
		}
	}
	d, err := s.cfg.Limiter.Allow(ctx, ingestKey(t.ID), lim, n)
	if err != nil {
		if ctx.Err() != nil {
			return throttle.Decision{}, 0, ctx.Err()
		}
		return throttle.Decision{Limit: lim}, 0, &Error{Code: CodeUnavailable, Detail: "admission is unavailable; retry", RetryAfter: time.Second, Err: err}
	}
	if d.Allowed == 0 {
		return d, n, rateLimited(t, lim, d.RetryAfter)
	}
	return d, n, nil
}

func rateLimited(t tenant.Tenant, lim throttle.Limit, retry time.Duration) *Error {
	return &Error{Code: CodeRateLimited, RetryAfter: retry,
		Detail: "tenant " + t.ID + " is over its ingest rate of " + strconv.FormatFloat(lim.Rate, 'g', 4, 64) + " messages/s (burst " + strconv.Itoa(lim.Burst) + ")"}
}

// backlogWait estimates how long until a backlog falls by excess at the
// tenant's processing rate: the Retry-After of backlog_full, a hint, since
// it depends on the workers.
func backlogWait(excess int64, rate float64) time.Duration {
	if rate <= 0 {
		return time.Minute
	}
	return min(max(time.Duration(float64(excess)/rate*float64(time.Second)), time.Second), time.Hour)
}

// send picks the tenant's queue, sends the message through the batcher and
// waits for SQS's answer.
func (s *Server) send(t tenant.Tenant, item sendItem) (accepted, error) {
	return s.await(t, s.submit(t, item))
}

// pendingSend is a message handed to the batcher.
type pendingSend struct {
	q    int
	name string
	at   int64 // enqueue time, unix ms
	tk   Ticket[sendItem, sendResult]
	err  error // not submitted
}

// submit picks the tenant's queue and hands the message to the batcher.
// Stop waits for a submit under way, so that its message is flushed.
func (s *Server) submit(t tenant.Tenant, item sendItem) pendingSend {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped || !s.started {
		return pendingSend{q: -1, err: ErrStopped}
	}
	p, ok := s.pick(t, &item)
	if !ok {
		return p
	}
	p.tk, p.err = s.batcher.Submit(p.name, item)
	if p.err != nil {
		p.err = errors.Join(ErrStopped, p.err) // await gives the pick back
	}
	return p
}

// submitAll picks a queue for each message and hands them all to the
// batcher at once (Batcher.SubmitAll), so that those bound for the same
// queue share a call.
func (s *Server) submitAll(t tenant.Tenant, items []sendItem) []pendingSend {
	ps := make([]pendingSend, len(items))
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped || !s.started {
		for i := range ps {
			ps[i] = pendingSend{q: -1, err: ErrStopped}
		}
		return ps
	}
	names := make([]string, 0, len(items))
	picked := make([]sendItem, 0, len(items))
	for i := range items {
		var ok bool
		if ps[i], ok = s.pick(t, &items[i]); ok {
			names = append(names, ps[i].name)
			picked = append(picked, items[i])
		}
	}
	tks, err := s.batcher.SubmitAll(names, picked)
	j := 0
	for i := range ps {
		if ps[i].err != nil {
			continue
		}
		if err != nil {
			ps[i].err = errors.Join(ErrStopped, err) // await gives the pick back
			continue
		}
		ps[i].tk = tks[j]
		j++
	}
	return ps
}

// pick chooses the live queue of a message and sets its fairq-meta;
// false, with the error in the pendingSend, if the picker failed.
func (s *Server) pick(t tenant.Tenant, item *sendItem) (pendingSend, bool) {
	q := s.cfg.Picker.Pick(t.ID)
	if q < 0 || q >= len(s.cfg.Names.Live) {
		return pendingSend{q: -1, err: &Error{Code: CodeInternal, Detail: "internal error", Err: errors.New("picker chose a queue out of range")}}, false
	}
	name := s.cfg.Names.Live[q]
	item.meta.Origin = name
	item.attrs[envelope.AttrMeta] = item.meta.Encode()
	return pendingSend{q: q, name: name, at: item.meta.EnqueuedAt}, true
}

// await waits for SQS's answer for a submitted message.
// It waits even if the client leaves: the send is bounded by SendAttempts
// × SendTimeout, and its outcome must reach the picker and the
// idempotency key.
func (s *Server) await(t tenant.Tenant, p pendingSend) (accepted, error) {
	err := p.err
	var res sendResult
	if err == nil {
		res, err = p.tk.result()
		if err == nil {
			err = res.err
		}
	}
	if err != nil {
		if p.q >= 0 {
			s.cfg.Picker.Sent(p.q, -1)
		}
		return accepted{}, err
	}
	s.m.admitted.WithLabelValues(s.m.labels.of(t.ID)).Inc()
	s.stats.admitted(t.ID, 1)
	return accepted{
		ID:         res.messageID,
		Tenant:     t.ID,
		Queue:      p.name,
		EnqueuedAt: formatTime(time.UnixMilli(p.at)),
	}, nil
}

// traceparentOf returns the request's traceparent header if it is a valid
// W3C trace context, else "".
func traceparentOf(r *http.Request) string {
	// As r.Header.Get, without canonicalising the name on every request.
	if v := r.Header[headerTraceparent]; len(v) > 0 && validTraceparent(v[0]) {
		return v[0]
	}
	return ""
}

// validTraceparent checks version-traceid-parentid-flags: lowercase hex,
// version not ff, ids not all zero; version 00 is exactly 55 characters and
// later versions may add fields after a dash.
func validTraceparent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	if !lowerHex(v[0:2]) || !lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:55]) {
		return false
	}
	switch {
	case v[0:2] == "ff":
		return false
	case v[0:2] == "00" && len(v) != 55:
		return false
	case len(v) > 55 && v[55] != '-':
		return false
	case strings.Trim(v[3:35], "0") == "" || strings.Trim(v[36:52], "0") == "":
		return false
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
