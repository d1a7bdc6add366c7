package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/queue"
)

// inflight is a received message the worker holds: from the receive until
// its outcome is decided.
type inflight struct {
	queue    string
	handle   string
	id       string
	received time.Time
	until    time.Time // when its visibility ends, as far as the worker knows
	stopAt   time.Time // its job's inactivity deadline: no extension after it; zero before dispatch

	call chan struct{} // closed when the heartbeat call extending it ends; nil while none is under way
	lost bool          // an extension failed for good: the receipt handle is no longer valid

	// claim is the message's dedupe claim while its job runs: its id and
	// the token the heartbeat renews its lease with; zero without one.
	claim dedupe.Lease
}

// heartbeat is the watchdog that keeps held messages invisible while their
// jobs run: every interval (default VisibilityTimeout/3) it extends, with
// ChangeVisibility batches of up to ten per queue, every held message whose
// visibility has less than VisibilityTimeout-interval/2 left, to
// VisibilityTimeout from now, never past 12 hours after its receive (SQS's
// limit), and not once its job is past its inactivity timeout. A job
// shorter than about interval/2 costs no heartbeat.
//
// A failed extension is retried at the next beat while the message is
// still invisible; one that fails because the receipt handle is no longer
// valid (the visibility already ran out) is not retried. The job is never
// cancelled for it: once its visibility has run out the message is
// delivered again whatever this worker does, and cancelling would throw
// away work that may be nearly done; the price is a possible duplicate,
// which a standard queue's handlers must tolerate anyway.
//
// Each call is bounded by callTimeout (the interval, at most 10 s), so
// that a queue that does not answer holds up neither the beats nor the
// jobs that end meanwhile: a job's outcome waits (in remove) only for the
// one call extending its own message, never for the rest of the beat.
type heartbeat struct {
	backend     Backend
	vt          time.Duration
	interval    time.Duration
	callTimeout time.Duration
	now         func() time.Time
	log         *slog.Logger
	metrics     *metrics
	dedupe      Deduper // nil: no claims to renew

	mu  sync.Mutex
	set map[*inflight]struct{}
}

// heartbeatCallMax caps the timeout of one heartbeat call.
const heartbeatCallMax = 10 * time.Second

func newHeartbeat(b Backend, vt, interval time.Duration, now func() time.Time, log *slog.Logger, m *metrics) *heartbeat {
	return &heartbeat{
		backend:     b,
		vt:          vt,
		interval:    interval,
		callTimeout: min(interval, heartbeatCallMax),
		now:         now,
		log:         log,
		metrics:     m,
		set:         make(map[*inflight]struct{}),
	}
}

// add starts watching f.
func (h *heartbeat) add(f *inflight) {
	h.mu.Lock()
	h.set[f] = struct{}{}
	n := len(h.set)
	h.mu.Unlock()
	h.metrics.inFlight.Set(float64(n))
}

// dispatched records that f's job started and ends at deadline: the
// heartbeat does not extend f past it (the watchdog stops at
// inactivity_timeout), so that a handler that does not return at its
// deadline does not hold the message for ever.
func (h *heartbeat) dispatched(f *inflight, deadline time.Time) {
	h.mu.Lock()
	f.stopAt = deadline
	h.mu.Unlock()
}

// claimed records f's dedupe claim, for the beats to renew; a zero lease
// forgets it.
func (h *heartbeat) claimed(f *inflight, l dedupe.Lease) {
	h.mu.Lock()
	f.claim = l
	h.mu.Unlock()
}

// remove stops watching f. If a heartbeat call is extending f, remove
// waits for it (at most callTimeout), so that the caller's own visibility
// change or delete comes after it; a beat that has not yet reached f
// leaves it out.
func (h *heartbeat) remove(f *inflight) {
	h.mu.Lock()
	delete(h.set, f)
	n := len(h.set)
	wait := f.call
	h.mu.Unlock()
	h.metrics.inFlight.Set(float64(n))
	if wait != nil {
		<-wait
	}
}

// run beats every interval until ctx ends.
func (h *heartbeat) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.beat(ctx)
		}
	}
}

type extension struct {
	f      *inflight
	target time.Time
}

// beat extends what is due, one call per queue and batch of ten in turn.
func (h *heartbeat) beat(ctx context.Context) {
	now := h.now()
	due := make(map[string][]extension)
	h.mu.Lock()
	for f := range h.set {
		if f.lost || f.until.Sub(now) > h.vt-h.interval/2 || !f.stopAt.IsZero() && now.After(f.stopAt) {
			continue
		}
		target := now.Add(h.vt)
		if limit := f.received.Add(queue.MaxVisibility - time.Second); target.After(limit) {
			target = limit
		}
		if target.Sub(now) < time.Second || !target.After(f.until) {
			continue // at the 12-hour limit: nothing left to extend
		}
		due[f.queue] = append(due[f.queue], extension{f, target})
	}
	h.mu.Unlock()

	for q, exts := range due {
		for len(exts) > 0 && ctx.Err() == nil {
			chunk := exts[:min(len(exts), queue.MaxBatch)]
			exts = exts[len(chunk):]
			h.extend(ctx, q, now, chunk)
		}
	}
	h.renew(ctx)
}

// renew renews the dedupe claims of the running jobs, in one call: a
// claim's lease is a visibility timeout, so that it lapses with the
// message's visibility when the worker dies.
func (h *heartbeat) renew(ctx context.Context) {
	if h.dedupe == nil {
		return
	}
	var leases []dedupe.Lease
	h.mu.Lock()
	for f := range h.set {
		if f.claim.Token != "" {
			leases = append(leases, f.claim)
		}
	}
	h.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	defer cancel()
	if err := h.dedupe.Renew(cctx, leases); err != nil && ctx.Err() == nil {
		h.log.Warn("dedupe claims not renewed: a copy of a running message may run meanwhile", "n", len(leases), "err", err)
	}
}

// extend makes one ChangeVisibility call for the messages of chunk still
// held, bounded by callTimeout; now is the time the beat computed their
// targets from.
func (h *heartbeat) extend(ctx context.Context, q string, now time.Time, chunk []extension) {
	call := make(chan struct{})
	var exts []extension
	h.mu.Lock()
	for _, e := range chunk {
		if _, held := h.set[e.f]; held {
			e.f.call = call
			exts = append(exts, e)
		}
	}
	h.mu.Unlock()
	if len(exts) == 0 {
		return
	}
	changes := make([]queue.VisibilityChange, len(exts))
	for i, e := range exts {
		changes[i] = queue.VisibilityChange{ReceiptHandle: e.f.handle, Timeout: e.target.Sub(now)}
	}
	cctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	errs, err := h.backend.ChangeVisibility(cctx, q, changes)
	cancel()

	failed := make([]error, len(exts))
	h.mu.Lock()
	for i, e := range exts {
		f := e.f
		f.call = nil
		ferr := err
		if ferr == nil && i < len(errs) {
			ferr = errs[i]
		}
		failed[i] = ferr
		if ferr == nil {
			f.until = e.target
			continue
		}
		if errors.Is(ferr, queue.ErrReceiptHandle) || !f.until.After(h.now()) {
			f.lost = true
		}
	}
	close(call)
	h.mu.Unlock()

	for i, e := range exts {
		if failed[i] == nil {
			h.metrics.heartbeats.Inc()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		h.metrics.heartbeatFailures.Inc()
		h.log.Warn("heartbeat failed: the message may be delivered again while its job runs",
			"queue", q, "id", e.f.id, "lost", e.f.lost, "err", failed[i])
	}
}
