package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/idempotency"
	"github.com/fairq/fairq/internal/batch"
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

// handleEnqueue serves POST /v1/messages: one message, through enqueue.
func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	t, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	es := [1]entry{}
	es[0].msg, err = s.readMessage(w, r, t)
	if err != nil {
		s.reject(w, r, t, err)
		return
	}
	d := s.enqueue(r.Context(), t, es[:], requestID(r.Context()), traceOf(r))
	setRateLimitHeaders(w.Header(), d)
	e := &es[0]
	switch {
	case e.err != nil:
		s.reject(w, r, t, e.err)
	case e.replay:
		w.Header().Set(HeaderIdempotentReplayed, "true")
		writeAccepted(w, http.StatusOK, e.res)
	default:
		writeAccepted(w, http.StatusAccepted, e.res)
	}
}

// readMessage reads and decodes the body of POST /v1/messages, after the
// checks that need no body (see precheck).
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request, t tenant.Tenant) (message, error) {
	if err := checkJSONContent(r); err != nil {
		return message{}, err
	}
	var key string
	if k, ok := r.Header[HeaderIdempotencyKey]; ok {
		if len(k) != 1 {
			return message{}, errorf(CodeInvalidRequest, "send one Idempotency-Key header, not %d", len(k))
		}
		if err := checkIdempotencyKey(k[0]); err != nil {
			return message{}, errorf(CodeInvalidRequest, "Idempotency-Key %s", err.Detail)
		}
		key = k[0]
	}
	if err := s.precheck(t); err != nil {
		return message{}, err
	}
	b, err := s.readBody(w, r, t, 3*int64(s.cfg.MaxMessageSize)+bodySlack)
	if err != nil {
		return message{}, err
	}
	msg, err := decodeMessage(b.data, false) // keeps nothing of the body
	b.release()
	msg.idempotencyKey = key
	return msg, err
}

// precheck refuses, before the body is read, a request that would be
// refused anyway: its tenant is paused with its ingest, or was refused
// admission moments ago and no token has come back since, or the queue
// backend is known to be down.
func (s *Server) precheck(t tenant.Tenant) error {
	if t.PauseIngest {
		s.m.prechecked.WithLabelValues(string(CodeTenantPaused)).Inc()
		return &Error{Code: CodeTenantPaused, Detail: "tenant " + t.ID + " is paused, new messages included, by an operator; retry once it is resumed"}
	}
	if err := s.refused.check(t.ID, s.cfg.Now()); err != nil {
		s.m.prechecked.WithLabelValues(string(err.Code)).Inc()
		return err
	}
	if s.backend.isDown() {
		s.m.prechecked.WithLabelValues(string(CodeUnavailable)).Inc()
		return &Error{Code: CodeUnavailable, Detail: "the queue service is unreachable; retry", RetryAfter: probeEvery}
	}
	return nil
}

// entry is one message on its way through enqueue.
type entry struct {
	msg message
	// err is the message's refusal or failure; once set, the message goes
	// no further.
	err error
	// uncertain marks an err of a send that may still have reached the
	// queue (a timeout): its idempotency key keeps the message's id.
	uncertain bool
	fp        string // fingerprint of the message, when it has an idempotency key
	item      sendItem
	hold      *held // the idempotency key this entry owns
	// replay is set when res is the answer of an earlier request with
	// the same idempotency key.
	replay bool
	// dupOf is 1 + the index of an earlier entry of the batch with the
	// same idempotency key, which answers for this one; 0: none.
	dupOf int
	res   accepted
}

// waiting reports whether the entry is still to be sent.
func (e *entry) waiting() bool { return e.err == nil && !e.replay && e.dupOf == 0 }

// enqueue takes messages of one tenant (one for POST /v1/messages, up to
// MaxBatchMessages for a batch) through the steps every message takes, in
// order: prepare (attributes, size, id), idempotency (a repeat answers the
// first message; a key used twice in a batch is answered once),
// admission for all of them at once, then submit all to the batcher, so
// that those bound for one queue share its calls, and await SQS's answer.
// An entry whose err is set on the way in (it failed to decode) is left
// as it is. It returns the admission decision, for the RateLimit headers.
func (s *Server) enqueue(ctx context.Context, t tenant.Tenant, es []entry, reqID string, tc callerTrace) throttle.Decision {
	for i := range es {
		e := &es[i]
		if e.err != nil {
			continue
		}
		if e.msg.idempotencyKey != "" {
			e.fp = idempotency.Fingerprint(e.msg.body, e.msg.attrs, e.msg.delay)
		}
		e.item, e.err = s.prepare(t, e.msg, reqID, tc)
	}
	s.claimKeys(ctx, t, es)
	d := s.admitAll(ctx, t, es)
	s.startProducers(ctx, t.ID, es)
	s.sendAll(t, es)
	endProducers(es)
	s.resolveKeys(ctx, es)
	for i := range es {
		if e := &es[i]; e.dupOf > 0 {
			first := &es[e.dupOf-1]
			e.err, e.res, e.replay = first.err, first.res, first.err == nil
		}
	}
	return d
}

// claimKeys claims the idempotency keys of the entries that have one.
func (s *Server) claimKeys(ctx context.Context, t tenant.Tenant, es []entry) {
	var firstUse map[string]int
	for i := range es {
		e := &es[i]
		if e.err != nil || e.msg.idempotencyKey == "" {
			continue
		}
		if j, ok := firstUse[e.msg.idempotencyKey]; ok {
			if es[j].fp != e.fp {
				e.err = idemError(idempotency.Claim{Outcome: idempotency.Reused})
			} else {
				e.dupOf = j + 1
			}
			continue
		}
		if len(es) > 1 {
			if firstUse == nil {
				firstUse = make(map[string]int)
			}
			firstUse[e.msg.idempotencyKey] = i
		}
		c, h, err := s.idemClaim(ctx, t.ID, e.msg.idempotencyKey, e.fp, e.item.meta.ID)
		switch {
		case err != nil:
			e.err = err
		case c.Outcome == idempotency.Owned:
			e.hold = h
			if c.ID != "" {
				e.item.meta.ID = c.ID // an earlier attempt's, which may be on a queue already
			}
		case c.Outcome == idempotency.Done:
			if err := json.Unmarshal(c.Answer, &e.res); err != nil {
				e.err = &Error{Code: CodeInternal, Detail: "internal error", Err: err}
				break
			}
			e.replay = true
			s.m.replayed.WithLabelValues(s.m.labels.of(t.ID)).Inc()
		default:
			e.err = idemError(c)
		}
	}
}

// admitAll admits the entries still to be sent, all at once: the first
// get the tokens, the rest are refused (rate_limited, or backlog_full
// beyond what the backlog leaves room for). A refusal of all of them is
// remembered for precheck.
func (s *Server) admitAll(ctx context.Context, t tenant.Tenant, es []entry) throttle.Decision {
	n := 0
	for i := range es {
		if es[i].waiting() {
			n++
		}
	}
	if n == 0 {
		return throttle.Decision{}
	}
	d, room, err := s.admit(ctx, t, n)
	if e := (*Error)(nil); errors.As(err, &e) && (e.Code == CodeRateLimited || e.Code == CodeBacklogFull) {
		s.refused.note(t.ID, e, s.cfg.Now()) // nothing was admitted
	}
	k := 0
	for i := range es {
		e := &es[i]
		if !e.waiting() {
			continue
		}
		switch {
		case err != nil:
			e.err = err
		case k >= room:
			e.err = &Error{Code: CodeBacklogFull, RetryAfter: time.Second,
				Detail: "tenant " + t.ID + " reached its max_backlog within this batch"}
		case k >= d.Allowed:
			e.err = rateLimited(t, d.Limit, d.RetryAfter)
		}
		k++
	}
	return d
}

// sendAll submits the admitted entries to the batcher at once and waits
// for each one's answer.
func (s *Server) sendAll(t tenant.Tenant, es []entry) {
	if len(es) == 1 { // POST /v1/messages: no slices to make
		if e := &es[0]; e.waiting() {
			e.res, e.uncertain, e.err = s.await(t, e.item, s.submit(t, e.item))
		}
		return
	}
	var items []sendItem
	for i := range es {
		if es[i].waiting() {
			items = append(items, es[i].item)
		}
	}
	if len(items) == 0 {
		return
	}
	ps := s.submitAll(t, items)
	k := 0
	for i := range es {
		e := &es[i]
		if !e.waiting() {
			continue
		}
		e.res, e.uncertain, e.err = s.await(t, e.item, ps[k])
		k++
	}
}

// resolveKeys resolves the idempotency keys the entries hold: the answer
// of a message sent, the key kept with its id if the send may have landed,
// else forgotten.
func (s *Server) resolveKeys(ctx context.Context, es []entry) {
	for i := range es {
		e := &es[i]
		if e.hold == nil {
			continue
		}
		switch {
		case e.err == nil:
			answer, _ := json.Marshal(e.res) // cannot fail: strings
			s.idemResolve(ctx, e.hold, resolveComplete, answer)
		case e.uncertain:
			s.idemResolve(ctx, e.hold, resolveAbandon, nil)
		default:
			s.idemResolve(ctx, e.hold, resolveRelease, nil)
		}
		e.hold = nil
	}
}

// reject answers an error for an authenticated tenant and counts it.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, t tenant.Tenant, err error) {
	_, e := problemOf(err)
	s.m.rejected.WithLabelValues(s.m.labels.of(t.ID), string(e.Code)).Inc()
	s.stats.rejected(t.ID, 1)
	s.cfg.Activity.Refused(t.ID, string(e.Code), 1)
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

// prepare makes the queue entry of a message: the caller's attributes and
// fairq's own (fairq-tenant from the key, never from the request), sized
// as SQS counts it against MaxMessageSize. fairq-meta is sized with the
// longest live queue name (and, when the gateway traces, the producer
// span's traceparent) and set for real once the queue is picked. The
// caller's traceparent stays the traceparent attribute, as before fairq
// traced; its tracestate goes in fairq-meta.
func (s *Server) prepare(t tenant.Tenant, msg message, reqID string, tc callerTrace) (sendItem, error) {
	attrs := msg.attrs
	if attrs == nil {
		attrs = make(map[string]string, 3)
	}
	attrs[envelope.AttrTenant] = t.ID
	if tc.parent != "" {
		attrs[envelope.AttrTraceparent] = tc.parent
	}
	now := s.cfg.Now()
	meta := envelope.Meta{EnqueuedAt: now.UnixMilli(), ID: envelope.NewID(now), RequestID: reqID, IdempotencyKey: msg.idempotencyKey, Origin: s.longest, Tracestate: tc.state}
	// Sized now, with the longest queue name, and encoded once the queue
	// is picked.
	var buf [256]byte
	size := messageSize(msg.body, attrs) + len(envelope.AttrMeta) + len("String") + len(meta.AppendEncode(buf[:0])) + s.traceparentRoom()
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
	if t.Limits.MaxBacklog > 0 {
		b, known, err := s.backlogOf(ctx, t)
		switch {
		case err != nil && ctx.Err() != nil:
			return throttle.Decision{}, 0, ctx.Err()
		case err != nil:
			return throttle.Decision{}, 0, err // failing closed: 503
		case known:
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

// backlogOf returns tenant t's backlog (Backlog.Get), read again from a
// fresher count when the first has t at or above its max_backlog. The
// first comes from a cache that steps down every 100 ms: a gateway that
// refused on it until then took the room it showed at once, the tenant's
// messages arriving in bursts of up to ten on the few queues of its
// shard, and a quiet tenant's message on one of them waited out the send
// window for company that the next refusal kept away (12–15 ms instead of
// 3 in the fleet experiment). On the fresher count the room is taken
// about as it comes, a message or two at a time; reading it costs a
// Redis call at most every 10 ms per tenant at its max_backlog.
func (s *Server) backlogOf(ctx context.Context, t tenant.Tenant) (int64, bool, error) {
	b, known, err := s.cfg.Backlog.Get(ctx, t.ID)
	if err != nil || !known || b < int64(t.Limits.MaxBacklog) {
		return b, known, err
	}
	if f, ok := s.cfg.Backlog.(freshBacklog); ok {
		return f.Fresh(ctx, t.ID)
	}
	return b, known, nil
}

func rateLimited(t tenant.Tenant, lim throttle.Limit, retry time.Duration) *Error {
	return &Error{Code: CodeRateLimited, RetryAfter: retry,
		Detail: "tenant " + t.ID + " is over its ingest rate of " + strconv.FormatFloat(lim.Rate, 'g', 4, 64) + " messages/s (burst " + strconv.Itoa(lim.Burst) + ")"}
}

// backlogWait estimates how long until a backlog falls by excess at the
// tenant's processing rate, a hint, since it depends on the workers. It is
// the Retry-After of backlog_full, which the wire rounds up to whole
// seconds, and how long the gateway remembers the refusal (refusals): not
// rounded there, so that a tenant held at its max_backlog is admitted
// about as fast as its messages end, not in one burst a second. Such a
// burst lands on the few queues of the tenant's shard at once and makes
// the quiet tenants that share them wait for it.
func backlogWait(excess int64, rate float64) time.Duration {
	if rate <= 0 {
		return time.Minute
	}
	return min(max(time.Duration(float64(excess)/rate*float64(time.Second)), time.Millisecond), time.Hour)
}

// pendingSend is a message handed to the batcher.
type pendingSend struct {
	q    int
	name string
	tk   batch.Ticket[sendItem, sendResult]
	err  error // not submitted
}

// submit picks the tenant's queue for one message and hands it to the
// batcher. Stop waits for a submit under way, so that its message is
// flushed.
func (s *Server) submit(t tenant.Tenant, item sendItem) pendingSend {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.phase != phaseOpen {
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
// batcher at once (SubmitAll), so that those bound for the same
// queue share a call.
func (s *Server) submitAll(t tenant.Tenant, items []sendItem) []pendingSend {
	ps := make([]pendingSend, len(items))
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.phase != phaseOpen {
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
	q := s.pickQueue(t.ID)
	if q < 0 || q >= len(s.cfg.Names.Live) {
		return pendingSend{q: -1, err: &Error{Code: CodeInternal, Detail: "internal error", Err: errors.New("picker chose a queue out of range")}}, false
	}
	name := s.cfg.Names.Live[q]
	nameProducer(item, name)
	item.meta.Origin = name
	item.attrs[envelope.AttrMeta] = item.meta.Encode()
	return pendingSend{q: q, name: name}, true
}

// await waits for SQS's answer for a submitted message of t, and returns
// the answer for its client; on failure, uncertain tells whether the
// message may have reached the queue all the same. It waits even if the
// client leaves: the send is bounded by SendTimeout, and its outcome must
// reach the picker and the idempotency key.
func (s *Server) await(t tenant.Tenant, item sendItem, p pendingSend) (a accepted, uncertain bool, err error) {
	err = p.err
	if err == nil {
		var res sendResult
		res, err = p.tk.Wait(context.Background()) // however long the send takes: SendTimeout bounds it
		if err == nil {
			err, uncertain = res.err, res.uncertain
		}
	}
	if err != nil {
		if p.q >= 0 {
			s.cfg.Picker.Sent(p.q, -1)
		}
		return accepted{}, uncertain, err
	}
	s.m.admitted.WithLabelValues(s.m.labels.of(t.ID)).Inc()
	s.stats.admitted(t.ID, 1)
	s.cfg.Activity.Accepted(t.ID, 1)
	return accepted{
		ID:         item.meta.ID,
		Tenant:     t.ID,
		Queue:      p.name,
		EnqueuedAt: formatTime(time.UnixMilli(item.meta.EnqueuedAt)),
	}, false, nil
}
