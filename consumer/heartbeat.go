package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

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

	beating bool // a heartbeat call for it is under way
	lost    bool // an extension failed for good: the receipt handle is no longer valid
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
// cancelled for it: see the package documentation.
type heartbeat struct {
	backend  Backend
	vt       time.Duration
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
	metrics  *metrics

	mu    sync.Mutex
	set   map[*inflight]struct{}
	round chan struct{} // closed when the beat under way ends; nil between beats
}

func newHeartbeat(b Backend, vt, interval time.Duration, now func() time.Time, log *slog.Logger, m *metrics) *heartbeat {
	return &heartbeat{
		backend:  b,
		vt:       vt,
		interval: interval,
		now:      now,
		log:      log,
		metrics:  m,
		set:      make(map[*inflight]struct{}),
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
// heartbeat does not extend f past it (DESIGN.md §6: the watchdog stops at
// inactivity_timeout), so that a handler that does not return at its
// deadline does not hold the message for ever.
func (h *heartbeat) dispatched(f *inflight, deadline time.Time) {
	h.mu.Lock()
	f.stopAt = deadline
	h.mu.Unlock()
}

// remove stops watching f. If a beat is extending f, remove waits for it,
// so that the caller's own visibility change or delete comes after it.
func (h *heartbeat) remove(f *inflight) {
	h.mu.Lock()
	delete(h.set, f)
	n := len(h.set)
	var wait chan struct{}
	if f.beating {
		wait = h.round
	}
	h.mu.Unlock()
	h.metrics.inFlight.Set(float64(n))
	if wait != nil {
		<-wait
	}
}

// held returns the messages being watched.
func (h *heartbeat) held() []*inflight {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*inflight, 0, len(h.set))
	for f := range h.set {
		out = append(out, f)
	}
	return out
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

// beat extends what is due.
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
		f.beating = true
		due[f.queue] = append(due[f.queue], extension{f, target})
	}
	if len(due) == 0 {
		h.mu.Unlock()
		return
	}
	round := make(chan struct{})
	h.round = round
	h.mu.Unlock()

	type result struct {
		ext extension
		err error
	}
	var results []result
	for q, exts := range due {
		for len(exts) > 0 {
			chunk := exts[:min(len(exts), queue.MaxBatch)]
			exts = exts[len(chunk):]
			changes := make([]queue.VisibilityChange, len(chunk))
			for i, e := range chunk {
				changes[i] = queue.VisibilityChange{ReceiptHandle: e.f.handle, Timeout: e.target.Sub(now)}
			}
			errs, err := h.backend.ChangeVisibility(ctx, q, changes)
			for i, e := range chunk {
				r := result{ext: e, err: err}
				if err == nil && i < len(errs) {
					r.err = errs[i]
				}
				results = append(results, r)
			}
		}
	}

	h.mu.Lock()
	for _, r := range results {
		f := r.ext.f
		f.beating = false
		if r.err == nil {
			f.until = r.ext.target
			continue
		}
		if errors.Is(r.err, queue.ErrReceiptHandle) || !f.until.After(h.now()) {
			f.lost = true
		}
	}
	h.round = nil
	close(round)
	h.mu.Unlock()

	for _, r := range results {
		if r.err == nil {
			h.metrics.heartbeats.Inc()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		h.metrics.heartbeatFailures.Inc()
		h.log.Warn("heartbeat failed: the message may be delivered again while its job runs",
			"queue", r.ext.f.queue, "id", r.ext.f.id, "lost", r.ext.f.lost, "err", r.err)
	}
}
