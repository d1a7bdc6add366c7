package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/internal/clock"
	"github.com/fairq/fairq/parking"
	"github.com/fairq/fairq/queue"
)

// minRetryAfter is the shortest wait after a Retry-After, so that an
// application answering "Retry-After: 0" does not spin a message.
const minRetryAfter = time.Second

// ioTimeout bounds a call made after the outcome outside the batchers.
const ioTimeout = 5 * time.Second

// job is one received message on its way to an outcome.
type job struct {
	w   *Worker
	d   *delivery
	f   *inflight
	ctx context.Context // the worker's job context (ends when killed, or at the end of the grace period), with the delivery's span
	// span is the delivery's consumer span; nil without tracing.
	span trace.Span
	// slot gives the job's worker slot back; nil once given back.
	slot func(int)
}

// process takes a received message to its outcome. It holds one slot, given
// back with release when the outcome is decided (for an Exact move, before
// its wait: see timed); the batch calls that carry the outcome out (delete,
// visibility change, move) finish on their own.
func (w *Worker) process(ctx context.Context, queueName string, m queue.Message, received time.Time, release func(int)) {
	defer w.jobs.Done()
	j := &job{
		w:    w,
		d:    newDelivery(queueName, m),
		ctx:  ctx,
		slot: release,
	}
	defer j.giveSlot()
	j.d.msg.Backlog = queueName == w.cfg.Names.Backlog
	j.f = &inflight{
		queue:    queueName,
		handle:   m.ReceiptHandle,
		id:       m.ID,
		received: received,
		until:    received.Add(w.cfg.VisibilityTimeout),
	}
	w.hb.add(j.f)
	j.startSpan()
	defer j.endSpan()
	j.run()
}

func (j *job) run() {
	now := j.w.cfg.NowFunc()
	age := now.Sub(j.d.msg.EnqueuedAt)
	if j.settledEarly(now) {
		return
	}
	v, ok := j.admit()
	if !ok || j.divert(v) {
		return
	}
	if !j.claim() {
		if v.Done != nil {
			v.Done()
		}
		return
	}
	j.dispatch(age, v.Done)
}

// settledEarly settles the message before the Limiter if it is not to run:
// delivered too often, or received before its NotBefore. It reports
// whether it did. (Its age is the Limiter's: the tenant's policy.)
func (j *job) settledEarly(now time.Time) bool {
	w, d := j.w, j.d
	if n := d.attempts(); n > w.cfg.MaxRetries {
		// Earlier deliveries ended without an outcome (a crash, a lost
		// heartbeat): do not start it an extra time.
		j.deadLetter(fmt.Sprintf("delivered %d times, more than max_retries %d", n, w.cfg.MaxRetries))
		return true
	}
	if nb := d.meta.NotBeforeTime(); !nb.IsZero() && nb.After(now) {
		// A Retry-After longer than a queue's delay: not yet.
		j.event(outcomePostponed, "", nb.Sub(now).Seconds())
		j.outcome(outcomePostponed)
		j.postpone(nb, nb.Sub(now))
		return true
	}
	return false
}

// admit asks the Limiter whether the message runs now, holding the
// message while it answers Hold. It returns false if the worker was
// killed meanwhile (the message is left as after a crash) or, during a
// hold, stopped (the message is given back).
func (j *job) admit() (Verdict, bool) {
	w, d := j.w, j.d
	if w.cfg.Limiter == nil || d.task {
		return Verdict{}, true // a periodic task belongs to no tenant: no limits
	}
	d.msg.Spare = w.slots.available()
	v, err := w.cfg.Limiter.Admit(j.ctx, &d.msg)
	for err == nil && v.Action == Hold {
		if !j.hold(v) {
			return Verdict{}, false
		}
		d.msg.Spare = w.slots.available()
		v, err = w.cfg.Limiter.Admit(j.ctx, &d.msg)
	}
	if err == nil {
		return v, true
	}
	if j.abandoned() {
		w.hb.remove(j.f)
		return Verdict{}, false
	}
	// The Limiter applies its own fail-open or fail-closed policy: an
	// error that reaches here dispatches the message.
	w.log.Warn("limiter failed: dispatching", "tenant", d.msg.Tenant, "id", d.msg.ID, "err", err)
	return Verdict{}, true
}

// hold waits out a Hold verdict: until its Wake (and then its Lag), its
// Delay, or the end of the job's context. It reports whether the message
// is still to be decided on: when the worker was killed it is left as
// after a crash, and when the grace period of a stop is over it is given
// back.
func (j *job) hold(v Verdict) bool {
	w := j.w
	start := w.cfg.NowFunc()
	t := time.NewTimer(v.Delay)
	select {
	case <-v.Wake:
		if v.Lag > 0 {
			_ = clock.Sleep(j.ctx, v.Lag) // cut short by a stop, as the hold is
		}
	case <-t.C:
	case <-j.ctx.Done():
	}
	t.Stop()
	if v.Done != nil {
		v.Done()
	}
	j.d.msg.Held += w.cfg.NowFunc().Sub(start)
	switch {
	case j.releasing():
		j.giveBack()
		return false
	case j.abandoned():
		w.hb.remove(j.f)
		return false
	}
	return true
}

// giveSlot gives the job's worker slot back, if it still holds it.
func (j *job) giveSlot() {
	if j.slot != nil {
		j.slot(1)
		j.slot = nil
	}
}

// timed returns the delay a move of verdict v is sent with: v.Delay or,
// for an Exact move, its whole seconds, sent once the rest has passed.
// The job gives its slot back for that wait: nothing is left to run.
func (j *job) timed(v Verdict) time.Duration {
	rest := v.Delay % time.Second
	if !v.Exact || rest <= 0 || v.Delay >= queue.MaxDelay {
		return v.Delay
	}
	j.giveSlot()
	// Cut short when the worker stops: the message then comes back up to
	// a second early rather than wait.
	_ = clock.Sleep(j.ctx, rest)
	return v.Delay - rest
}

// divert carries out a verdict that does not run the message now, and
// reports whether it did.
func (j *job) divert(v Verdict) bool {
	w, d := j.w, j.d
	// A spill is never a visibility change, which the queue would count
	// as a delivery: without a queue to move to, the message is sent to
	// its own queue again, delayed.
	j.traceVerdict(v)
	switch v.Action {
	case Spill:
		dest := cmp.Or(w.cfg.Names.Overflow, d.queue)
		if d.queue == w.cfg.Names.Backlog {
			// Sent to the backlog queue again: from overflow the age
			// check would move it straight back here, two moves for
			// each spill.
			dest = d.queue
		}
		j.spill(dest, j.timed(v), v.Reason)
	case ToBacklog:
		j.spill(cmp.Or(w.cfg.Names.Backlog, d.queue), j.timed(v), v.Reason)
	case Drop:
		j.drop(v.Reason)
	case Park:
		j.park()
	default:
		if d.parkedFirst {
			// A parked copy whose tenant was resumed before it was
			// parked: this receive was no attempt; an ordinary copy goes
			// on in its place, so that its receives count.
			if v.Done != nil {
				v.Done()
			}
			j.move(d.queue, 0, d.attempts(), "", time.Time{}, nil, nil)
			return true
		}
		return false
	}
	return true
}

// reasonPaused labels the moves of paused tenants' messages in
// fairq_worker_spilled_total.
const reasonPaused = "paused"

// parkUnrecorded is how long a parked message stays invisible when the
// Lot could not record it, and no resume could wake it: it comes back
// then to look again.
const parkUnrecorded = time.Minute

// park holds a message of a paused tenant without running it (package
// parking). A message is first moved to the overflow queue as a parked
// copy, so that its receive count starts again and this delivery is not
// counted; that copy's first receive records it in the Lot and makes it
// invisible for ParkFor, until a resume wakes it. Without a Lot, or an
// overflow queue, the message waits out SQS's longest delay and comes back
// to look again.
func (j *job) park() {
	w, d := j.w, j.d
	if w.cfg.Parking == nil || w.cfg.Names.Overflow == "" {
		j.spill(cmp.Or(w.cfg.Names.Overflow, d.queue), queue.MaxDelay, reasonPaused)
		return
	}
	if !d.parkedFirst || d.queue != w.cfg.Names.Overflow {
		j.moveCopy(w.cfg.Names.Overflow, 0, d.attemptsBefore(), "", time.Time{}, true, func() {
			w.metrics.spilled.WithLabelValues(reasonPaused).Inc()
		}, nil)
		return
	}
	now := w.cfg.NowFunc()
	// Never past SQS's 12 hours from the receive.
	until := now.Add(min(w.cfg.ParkFor, j.f.received.Add(queue.MaxVisibility-time.Minute).Sub(now)))
	ctx, cancel := j.ioContext()
	err := w.cfg.Parking.Park(ctx, d.msg.Tenant, parking.Spot{Queue: d.queue, Handle: j.f.handle, Until: until.UnixMilli()})
	cancel()
	if err != nil {
		w.log.Warn("parked message not recorded: it comes back in a minute to look again", "tenant", d.msg.Tenant, "id", d.msg.ID, "err", err)
		until = now.Add(parkUnrecorded)
	}
	j.later(until.Sub(now), outcomeParked)
}

// dedupeTimeout bounds a call to the Deduper on a job's path.
const dedupeTimeout = 2 * time.Second

// dedupeContext returns the context of a call to the Deduper: the job's,
// or when detached the job's without its end, bounded by dedupeTimeout.
// An in-memory Deduper waits on nothing and looks at no context: it gets
// the job's context as it is, without the timer and the allocations of a
// deadline at each claim and completion.
func (j *job) dedupeContext(detached bool) (context.Context, context.CancelFunc) {
	if _, ok := j.w.cfg.Dedupe.(*dedupe.Memory); ok {
		return j.ctx, func() {}
	}
	ctx := j.ctx
	if detached {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, dedupeTimeout)
}

// claim claims the message's id with the Deduper before it is pushed. It
// reports whether the message is to run: not when a copy of it ran to
// success (deleted without a push) or runs on another worker now (sent
// back to its queue, delayed for the rest of that worker's lease, not
// counted as a delivery). Without a Deduper, or when the claim fails,
// the message runs.
func (j *job) claim() bool {
	w, d := j.w, j.d
	if w.cfg.Dedupe == nil {
		return true
	}
	ctx, cancel := j.dedupeContext(false)
	c, err := w.cfg.Dedupe.Claim(ctx, d.msg.ID)
	cancel()
	switch {
	case err != nil:
		return true // at least once: run it unclaimed
	case c.Outcome == dedupe.Duplicate:
		j.duplicate()
		return false
	case c.Outcome == dedupe.Running:
		delay := min(max(c.RetryAfter, time.Second), queue.MaxDelay)
		j.traceVerdict(Verdict{Action: Spill, Delay: delay, Reason: "running"})
		j.spill(d.queue, delay, "running")
		return false
	}
	w.hb.claimed(j.f, dedupe.Lease{ID: d.msg.ID, Token: c.Token})
	return true
}

// resolveClaim tells the Deduper how the message's run ended: done after
// a success, so that its copies are deleted; released otherwise, so that
// the next delivery runs it.
func (j *job) resolveClaim(success bool) {
	w := j.w
	l := j.f.claim
	if w.cfg.Dedupe == nil || l.Token == "" {
		return
	}
	w.hb.claimed(j.f, dedupe.Lease{})
	ctx, cancel := j.dedupeContext(true)
	defer cancel()
	var err error
	if success {
		err = w.cfg.Dedupe.Complete(ctx, l.ID, l.Token)
	} else {
		err = w.cfg.Dedupe.Release(ctx, l.ID, l.Token)
	}
	if err != nil {
		w.log.Warn("dedupe claim not resolved; it lapses with its lease", "id", l.ID, "success", success, "err", err)
	}
}

// dispatch runs the handler and applies its outcome.
func (j *job) dispatch(age time.Duration, done func()) {
	w, d := j.w, j.d
	if d.attempts() <= 1 {
		w.metrics.ageFirst.Observe(age.Seconds())
	}
	w.metrics.ageProcessing.Observe(age.Seconds())

	start := w.cfg.NowFunc()
	w.hb.dispatched(j.f, start.Add(w.cfg.InactivityTimeout))
	hctx, cancel := context.WithTimeoutCause(j.ctx, w.cfg.InactivityTimeout, ErrNoResponse)
	err := w.cfg.Handler.Handle(hctx, &d.msg)
	cancel()
	if done != nil {
		done()
	}
	took := w.cfg.NowFunc().Sub(start)
	w.metrics.duration.Observe(took.Seconds())
	if w.cfg.ObserveFunc != nil {
		w.cfg.ObserveFunc(took)
	}

	j.resolveClaim(err == nil)
	if err == nil {
		j.succeed()
		return
	}
	j.failed(err)
	switch {
	case j.abandoned():
		j.outcome(outcomeAbandoned)
		j.w.hb.remove(j.f) // left as after a crash: back after its visibility timeout
		return
	case j.releasing():
		j.release()
		return
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		j.retryAfter(ra.After)
		return
	}
	j.fail(err)
}

// abandoned reports whether the worker was killed (see Start).
func (j *job) abandoned() bool {
	return j.ctx.Err() != nil && !errors.Is(context.Cause(j.ctx), errReleasing)
}

// releasing reports whether the grace period of Stop is over.
func (j *job) releasing() bool {
	return errors.Is(context.Cause(j.ctx), errReleasing)
}

// ioContext is the context of calls made after the outcome: they are not
// cut short by the end of the job's context.
func (j *job) ioContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(j.ctx), ioTimeout)
}

// end tells the Backlog that the message ended: it is called from a
// delete's outcome, and Done does not block (see Backlog).
func (j *job) end() {
	if j.d.task {
		return
	}
	j.w.cfg.Backlog.Done(j.d.msg.Tenant, 1)
}

// succeed deletes the message.
func (j *job) succeed() {
	j.outcome(outcomeSuccess)
	j.w.hb.remove(j.f)
	j.w.deletes.add(j.d.queue, j.f.handle, func(entryErr, callErr error) {
		if failure(entryErr, callErr) != nil {
			return // logged by the batch; the message will be delivered again
		}
		j.w.metrics.processed.WithLabelValues(outcomeSuccess).Inc()
		j.end()
	})
}

// drop deletes the message unprocessed.
func (j *job) drop(reason string) {
	j.w.hb.remove(j.f)
	j.w.log.Info("message dropped", "tenant", j.d.msg.Tenant, "id", j.d.msg.ID, "queue", j.d.queue, "reason", reason)
	j.w.deletes.add(j.d.queue, j.f.handle, func(entryErr, callErr error) {
		if failure(entryErr, callErr) != nil {
			return
		}
		outcome := outcomeDropped
		if reason == ReasonPurged {
			outcome = outcomePurged
		}
		j.w.metrics.processed.WithLabelValues(outcome).Inc()
		j.end()
	})
}

// duplicate deletes a copy of a message that ran to success: it ends
// nothing (the message it copies ended already).
func (j *job) duplicate() {
	j.event(outcomeDuplicate, "", 0)
	j.outcome(outcomeDuplicate)
	j.w.hb.remove(j.f)
	j.w.log.Info("duplicate deleted", "tenant", j.d.msg.Tenant, "id", j.d.msg.ID, "queue", j.d.queue)
	j.w.deletes.add(j.d.queue, j.f.handle, func(entryErr, callErr error) {
		if failure(entryErr, callErr) == nil {
			j.w.metrics.processed.WithLabelValues(outcomeDuplicate).Inc()
		}
	})
}

// later makes the message visible again after d (a visibility change:
// SQS counts the receive).
func (j *job) later(d time.Duration, outcome string) {
	j.outcome(outcome)
	j.w.hb.remove(j.f)
	d = min(max(d, 0), j.maxVisibility())
	j.w.changes.add(j.d.queue, queue.VisibilityChange{ReceiptHandle: j.f.handle, Timeout: d}, func(entryErr, callErr error) {
		if failure(entryErr, callErr) == nil {
			j.w.metrics.processed.WithLabelValues(outcome).Inc()
		}
	})
}

// maxVisibility is the longest visibility timeout the message can still
// be given: SQS counts 12 hours from the receive.
func (j *job) maxVisibility() time.Duration {
	return max(0, j.f.received.Add(queue.MaxVisibility-time.Second).Sub(j.w.cfg.NowFunc()))
}

// release gives the message back at once, at shutdown, once it was
// pushed: the push was an attempt.
func (j *job) release() { j.later(0, outcomeReleased) }

// giveBack gives back at once, at shutdown, a message the worker received
// and did not start: a copy goes to its queue with the attempts it had
// before this receive, and the delivered copy is deleted. Made visible
// again instead, the receive would count as an attempt: when every worker
// of a fleet stopped at once, the long polls each let finish received a
// message sent meanwhile and gave it back in turn, and such a message went
// to the dead-letter queue at its first receive after the restart, never
// pushed.
func (j *job) giveBack() {
	j.outcome(outcomeReleased)
	d := j.d
	j.moveCopy(d.queue, 0, d.attemptsBefore(), "", d.meta.NotBeforeTime(), d.meta.Parked, nil, func() {
		j.w.metrics.processed.WithLabelValues(outcomeReleased).Inc()
	})
}

// retryAfter brings the message back after d without counting the
// delivery: it is sent again to its queue with the delay and its attempts
// unchanged, and the delivered copy is deleted (a visibility change would
// be counted by SQS as a receive). Beyond SQS's delay limit of 900 s it is
// sent with that delay and the time it may run again in fairq-meta
// (NotBefore): received before then, it is postponed again.
func (j *job) retryAfter(d time.Duration) {
	d = max(d, minRetryAfter)
	j.outcome(outcomeRetryAfter)
	var notBefore time.Time
	if d > queue.MaxDelay {
		notBefore = j.w.cfg.NowFunc().Add(d)
	}
	j.move(j.d.queue, min(d, queue.MaxDelay), j.d.attempts()-1, "", notBefore, nil, func() {
		j.w.metrics.processed.WithLabelValues(outcomeRetryAfter).Inc()
	})
}

// postpone sends a message received before its NotBefore back to its
// queue, delayed by wait (at most SQS's 900 s), with its attempts and
// NotBefore unchanged: not run, and not counted as a delivery.
func (j *job) postpone(notBefore time.Time, wait time.Duration) {
	j.w.log.Debug("message postponed: retry-after not over", "tenant", j.d.msg.Tenant, "id", j.d.msg.ID,
		"queue", j.d.queue, "not_before", notBefore)
	j.move(j.d.queue, min(wait, queue.MaxDelay), j.d.attempts()-1, "", notBefore, nil, nil)
}

// fail handles a failed attempt: back after backoff, or to the dead-letter
// queue after MaxRetries attempts.
func (j *job) fail(err error) {
	w := j.w
	n := j.d.attempts()
	if n >= w.cfg.MaxRetries {
		j.deadLetter(errorText(err))
		return
	}
	delay := w.backoff(n)
	w.log.Debug("attempt failed", "tenant", j.d.msg.Tenant, "id", j.d.msg.ID, "queue", j.d.queue,
		"attempt", n, "retry_in", delay, "err", err)
	j.later(delay, outcomeRetry)
}

// deadLetter moves the message to the dead-letter queue with why in
// fairq-meta; without a dead-letter queue it is deleted.
func (j *job) deadLetter(why string) {
	j.outcome(outcomeDeadLettered)
	w := j.w
	w.log.Warn("message dead-lettered", "tenant", j.d.msg.Tenant, "id", j.d.msg.ID, "queue", j.d.queue,
		"attempts", j.d.attempts(), "last_error", why)
	ended := func() {
		w.metrics.deadLettered.Inc()
		w.metrics.processed.WithLabelValues(outcomeDeadLettered).Inc()
		j.end()
	}
	if w.cfg.Names.DLQ == "" {
		w.hb.remove(j.f)
		w.deletes.add(j.d.queue, j.f.handle, func(entryErr, callErr error) {
			if failure(entryErr, callErr) == nil {
				ended()
			}
		})
		return
	}
	j.move(w.cfg.Names.DLQ, 0, j.d.attempts(), why, time.Time{}, nil, ended)
}

// spill moves the message to another queue (or its own again) without
// counting the delivery. It is counted once the copy is sent: a spill
// whose send failed leaves the message where it was, to come back after
// its visibility timeout.
func (j *job) spill(dest string, delay time.Duration, reason string) {
	j.move(dest, min(max(delay, 0), queue.MaxDelay), j.d.attempts()-1, "", time.Time{}, func() {
		j.w.metrics.spilled.WithLabelValues(reason).Inc()
	}, nil)
}

// move sends a copy of the message to dest, carrying attempts (and lastErr
// and notBefore, unless zero) in fairq-meta, calls sent, then deletes the
// delivered copy and calls then. If the send fails, the message stays where
// it is and comes back after its visibility timeout; if the delete fails,
// it is in both queues. sent and then may be nil.
func (j *job) move(dest string, delay time.Duration, attempts int, lastErr string, notBefore time.Time, sent, then func()) {
	j.moveCopy(dest, delay, attempts, lastErr, notBefore, false, sent, then)
}

// moveCopy is move, the copy marked parked or not.
func (j *job) moveCopy(dest string, delay time.Duration, attempts int, lastErr string, notBefore time.Time, parked bool, sent, then func()) {
	w := j.w
	w.hb.remove(j.f)
	e := queue.Entry{Body: j.d.raw.Body, Attributes: j.d.moved(attempts, lastErr, notBefore, parked), Delay: delay}
	w.sends.add(dest, e, func(entryErr, callErr error) {
		err := failure(entryErr, callErr)
		if errors.Is(err, queue.ErrTooLarge) && (lastErr != "" || !notBefore.IsZero()) {
			// What this move added to fairq-meta made it too large: send
			// it without, here (at shutdown the batcher runs this
			// while it takes no more entries). Without its NotBefore, a
			// message comes back after the delay and runs early.
			e.Attributes = j.d.moved(attempts, "", time.Time{}, parked)
			ctx, cancel := j.ioContext()
			errs, serr := w.sendBatch(ctx, dest, []queue.Entry{e})
			cancel()
			if serr == nil {
				serr = errs[0]
			}
			err = serr
		}
		if err != nil {
			return // logged by the batch
		}
		if sent != nil {
			sent()
		}
		w.deletes.add(j.d.queue, j.f.handle, func(entryErr, callErr error) {
			if failure(entryErr, callErr) == nil && then != nil {
				then()
			}
		})
	})
}

// backoff returns how long a message waits after its n-th failed attempt:
// exponential from BackoffBase, capped by ErrorVisibilityTimeout, with full
// jitter (uniform between 0 and that).
func (w *Worker) backoff(n int) time.Duration {
	limit := w.cfg.ErrorVisibilityTimeout
	d := w.cfg.BackoffBase
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return time.Duration(w.cfg.RandFunc() * float64(d))
}
