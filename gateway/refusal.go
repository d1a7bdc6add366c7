package gateway

import (
	"sync"
	"time"
)

// refusals remembers, for each tenant, an admission refusal that holds for
// a while: no token before RetryAfter (rate_limited), or a full backlog.
// A request of that tenant arriving meanwhile is refused from here, before
// its body is read, so that a client hammering the gateway after its 429
// costs it a header parse rather than megabytes of reading and decoding.
type refusals struct {
	m sync.Map // tenant → *refusal
}

type refusal struct {
	err   *Error
	until time.Time
}

// maxRefusalHold caps how long a refusal is remembered: a backlog can
// drain, or a limit change, sooner than the Retry-After estimate.
const maxRefusalHold = time.Second

// note remembers that e, an admission refusal with a RetryAfter, holds for
// the tenant until then (at most maxRefusalHold).
func (r *refusals) note(tenant string, e *Error, now time.Time) {
	if e.RetryAfter <= 0 {
		return
	}
	r.m.Store(tenant, &refusal{err: e, until: now.Add(min(e.RetryAfter, maxRefusalHold))})
}

// check returns the refusal that still holds for the tenant, with its
// Retry-After cut to what is left of it, or nil.
func (r *refusals) check(tenant string, now time.Time) *Error {
	v, ok := r.m.Load(tenant)
	if !ok {
		return nil
	}
	ref := v.(*refusal)
	left := ref.until.Sub(now)
	if left <= 0 {
		r.m.CompareAndDelete(tenant, v)
		return nil
	}
	e := *ref.err
	e.RetryAfter = min(e.RetryAfter, left)
	return &e
}
