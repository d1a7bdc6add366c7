package consumer

import (
	"context"
	"math"
	"time"

	"github.com/fairq/fairq/internal/clock"
	"github.com/fairq/fairq/queue"
)

// Every queue has a receive loop of its own (a poller), so that no live
// queue starves, and a queue that stays deep gets extra loops. A loop
// plans each receive from what it has seen (plan, a pure function), makes
// it (receive) and records what it brought (record); the reason for each
// rule sits beside it. docs/architecture.md tells how the loops share the
// slots.

// batchWait is the long-poll wait in batch mode: short, since the queue
// just had messages, so that a queue that has emptied gives its reserved
// slots back soon.
const batchWait = time.Second

// gatherMin is the number of messages the receive window must be expected
// to gather for a loop to pause for it.
const gatherMin = 2

// rateHorizon is over how long a live queue's loop measures the queue's
// rate: the messages it received, each counted at 1/e of its weight after
// this long. On a live queue one receive's messages over the time since
// the one before is one sender's burst, not the queue's rate: a tenant
// whose messages came 40 a second in clumps of seven made a queue of 25 a
// second look like 140, and the loop paused for a window that gathered
// nothing more while every tenant on the queue waited it out (a quiet
// tenant sharing both its queues with a noisy one: p99 from 6 ms alone
// to 45 ms). The overflow and backlog queues' messages come back in waves, SQS
// delays being whole seconds: there the latest receive's burst is the
// wave at hand, and the pause gathers the rest of it into full receives.
const rateHorizon = time.Second

// shortPollPause is how long a loop in watch mode pauses, holding no slot,
// after a short poll found its queue empty: a message arriving there waits
// at most about this long.
const shortPollPause = time.Second

// overflowWaitMax is how long in all the overflow loop waits for slots
// behind the live loops, since its queue last came back empty, before it
// queues with them.
const overflowWaitMax = 2 * time.Second

// growAfter and shrinkAfter are the streaks of full and of not-full
// receives after which a queue gets an extra loop or an extra loop ends.
const (
	growAfter   = 5
	shrinkAfter = 2
)

// receiveRetryMax caps the pause after failed receives.
const receiveRetryMax = 30 * time.Second

// class is the kind of queue a loop receives from.
type class int

const (
	classLive class = iota
	classOverflow
	classBacklog
)

// poller is one receive loop.
type poller struct {
	w      *Worker
	loops  *pollers
	queue  string
	class  class
	extra  bool // an extra loop on a deep queue
	tuning tuning
	seen   seen
	// overflowWait is, for the overflow loop, how much longer it waits
	// for slots behind the live loops before it queues with them.
	overflowWait time.Duration
	lastReturn   time.Time // when its latest receive returned
	counted      bool      // counted in loops.batching
}

// newPoller returns a loop on queue q, which has never received.
func (w *Worker) newPoller(q string, c class) *poller {
	p := &poller{w: w, loops: w.loops, queue: q, class: c, tuning: w.loops.tuning, seen: seen{first: true, got: queue.MaxBatch}}
	if c == classOverflow {
		p.overflowWait = overflowWaitMax
	}
	return p
}

// extraLoop returns an extra loop on p's queue. It starts in batch mode,
// since the queue is deep, and with what is left of p's overflowWait.
func (p *poller) extraLoop() *poller {
	e := p.w.newPoller(p.queue, p.class)
	e.extra, e.overflowWait, e.seen.batch = true, p.overflowWait, true
	return e
}

// tuning is what a loop's plans take from the worker's settings.
type tuning struct {
	wait          time.Duration // Config.ReceiveWait
	window        time.Duration // Config.ReceiveWindow; not positive: off
	batchNeed     int           // slots a loop in batch mode waits for
	maxWatchSlots int64         // slots loops in watch mode may hold while another loop is in batch mode
}

// gathers reports whether a queue bringing rate messages a second fills
// the receive window with at least gatherMin messages.
func (t tuning) gathers(rate float64) bool {
	return t.window > 0 && rate*t.window.Seconds() >= gatherMin
}

// seen is what a loop has seen of its queue: what it plans from.
type seen struct {
	first    bool    // no receive made yet
	batch    bool    // batch mode: the latest receive brought messages; else watch mode
	got      int     // messages the latest receive that brought any brought
	rate     float64 // messages a second the latest receive brought, since the one before
	recent   float64 // messages received, each weighing less by e every rateHorizon: the queue's rate times rateHorizon
	gather   bool    // the latest receive was partial, on a queue that fills the receive window
	fulls    int     // receives in a row that filled their slots
	partials int     // receives in a row that brought messages but did not
	failures int     // failed receives in a row
}

// count records a receive that brought got messages, since after the
// one before.
func (s *seen) count(got int, since time.Duration) {
	s.recent = s.recent*math.Exp(-since.Seconds()/rateHorizon.Seconds()) + float64(got)
	if since > 0 {
		s.rate = float64(got) / since.Seconds()
	}
}

// rate returns the rate, messages a second, at which the loop's queue
// brings messages, as its plans weigh it (see rateHorizon): a live
// queue's over about rateHorizon, the others' over the latest receive.
func (p *poller) rate() float64 {
	if p.class == classLive {
		return p.seen.recent / rateHorizon.Seconds()
	}
	return p.seen.rate
}

// receivePlan is how a loop makes its next receive.
type receivePlan struct {
	pause time.Duration // waited first, holding no slot
	need  int           // slots it waits for
	most  int           // slots it takes if free: the receive's Max
	wait  time.Duration // the long-poll wait
	short bool          // a short poll (wait 0)
}

// plan decides the loop's next receive from what it has seen. A loop in
// watch mode completes the plan with contended once it holds its slot.
func (p *poller) plan() receivePlan {
	s, t := &p.seen, p.tuning
	pl := receivePlan{need: 1, most: 1, wait: t.wait}
	if s.first {
		// Short, so that every live queue is known soon: the backlog
		// loop waits for that.
		pl.wait = min(pl.wait, batchWait)
	}
	if !s.batch {
		// Watch mode: one slot for one message, so that an idle worker
		// holds few slots and makes one empty receive per queue per
		// ReceiveWait.
		return pl
	}
	// Twice what the latest receive brought, or what the window gathers
	// at the queue's rate: room to grow to batches of ten on a deep
	// queue, but no slots held for messages the queue does not have.
	pl.most = min(queue.MaxBatch, max(2, 2*s.got, int(2*p.rate()*t.window.Seconds())))
	// Waiting for a batch of slots (a tenth of them) makes a busy
	// worker receive in full batches rather than a message per freed slot.
	pl.need = min(t.batchNeed, pl.most)
	pl.wait = min(pl.wait, batchWait)
	if s.gather {
		// Messages come fast enough for the window to gather more: the
		// pause makes the next receive fuller, for at most the window's
		// latency on a queue that is busy anyway. A slower queue is not
		// paused: it would save little, and every tenant on it would pay.
		pl.pause = t.window
	}
	return pl
}

// contention is what a loop in watch mode sees of the others once it
// holds its slot.
type contention struct {
	spare      int   // free slots
	contenders int64 // loops competing for slots
	watchSlots int64 // slots held by loops in watch mode, its own included
	batching   int64 // loops in batch mode
	waiting    int   // loops waiting for slots
}

// contended completes the plan of a loop in watch mode from what the
// other loops are doing.
func (pl receivePlan) contended(t tuning, c contention) receivePlan {
	if int64(c.spare) < c.contenders && (c.batching > 0 || c.waiting > 0 || c.spare < t.batchNeed) {
		// Fewer free slots than loops: a long poll on an empty queue
		// would keep its slot from a queue with work — one has work, or
		// a loop waits for a slot, or too few are left for a batch if
		// work comes — so it lasts only batchWait. An idle worker with a
		// batch of slots to spare long-polls every queue it watches: a
		// receive per queue per ReceiveWait, rather than one a second.
		pl.wait = min(pl.wait, batchWait)
	}
	if c.watchSlots > t.maxWatchSlots && c.batching > 0 {
		// While another queue has work, at most a quarter of the slots
		// sit in long polls on empty queues. Beyond that a loop makes a
		// short poll and, finding nothing, pauses without a slot: it
		// costs the busy queues milliseconds of a slot, not a long poll
		// (SQS's shortest is a second).
		pl.wait, pl.short = 0, true
	}
	return pl
}

// receipt is one receive: what it held and what it brought.
type receipt struct {
	at      time.Time // when it was made: when its messages count as received
	msgs    []queue.Message
	err     error
	slots   int           // slots it held: its Max
	since   time.Duration // since the previous receive returned, or since it was made for the first
	short   bool          // it was a short poll
	prio    prio          // the priority its slots were served at
	release func(int)     // gives its slots back
}

// next is what a loop does after a receive.
type next struct {
	end     bool          // the loop ends
	grow    bool          // the queue may be deep enough for an extra loop
	retryIn time.Duration // the receive failed: pause, still contending for slots
	idleFor time.Duration // pause out of contention for slots
}

// record adds receipt r to what the loop has seen and says what it does
// next. It does no I/O.
func (p *poller) record(r receipt) next {
	s := &p.seen
	s.first, s.gather = false, false
	got := len(r.msgs)
	s.count(got, r.since)
	if r.err != nil {
		s.failures++
		return next{retryIn: min(receiveRetryMax, time.Second<<min(s.failures-1, 5))}
	}
	s.failures = 0
	if got == 0 {
		if p.extra {
			return next{end: true} // the queue is drained: no extra loop needed
		}
		s.batch, s.fulls, s.partials = false, 0, 0
		p.overflowWait = overflowWaitMax // drained: behind the live loops again
		if r.short {
			return next{idleFor: shortPollPause}
		}
		return next{}
	}
	s.got = got
	if got == r.slots { // as many as it had slots for: the queue may hold more
		s.fulls, s.partials = s.fulls+1, 0
	} else {
		s.fulls, s.partials = 0, s.partials+1
	}
	if p.extra && s.partials >= shrinkAfter {
		return next{end: true}
	}
	s.gather = s.batch && got < r.slots && p.tuning.gathers(p.rate())
	s.batch = true
	// Extra loops only for a clearly deep queue: loops on one queue race
	// for its messages, and a long poll that loses comes back empty early.
	return next{grow: s.fulls >= growAfter}
}

// run is the loop: plan, receive, record, until ctx ends.
func (p *poller) run(ctx, jobCtx context.Context) {
	w, loops := p.w, p.loops
	defer loops.running.Done()
	w.metrics.pollers.Inc()
	defer w.metrics.pollers.Dec()
	if p.extra {
		defer loops.extras.Add(-1)
	}
	defer loops.contenders.Add(-1) // added by spawn
	// The backlog loop waits for the live loops' first receives: until
	// then, what capacity is spare is not known.
	if p.class == classBacklog && p.outOfContention(func() error { return loops.live.waitPolled(ctx) }) != nil {
		return
	}
	defer p.countBatching(false)
	p.countBatching(p.seen.batch)
	for ctx.Err() == nil {
		pl := p.plan()
		if pl.pause > 0 && clock.Sleep(ctx, pl.pause) != nil {
			return
		}
		r, ok := p.receive(ctx, pl)
		if !ok || r.err != nil && ctx.Err() != nil {
			return
		}
		nx := p.record(r)
		p.countBatching(p.seen.batch)
		p.report(r, nx)
		for _, m := range r.msgs {
			w.jobs.Add(1)
			go w.process(jobCtx, p.queue, m, r.at, w.hold(r.release))
		}
		if !p.follow(ctx, jobCtx, r, nx) {
			return
		}
	}
}

// follow does what record said to do after receipt r; false if the loop
// ends.
func (p *poller) follow(ctx, jobCtx context.Context, r receipt, nx next) bool {
	switch {
	case nx.end:
		return false
	case nx.grow && p.loops.grow(p.w.slots, r.prio):
		p.seen.fulls = 0
		p.w.spawn(ctx, jobCtx, p.extraLoop())
	case nx.retryIn > 0:
		return clock.Sleep(ctx, nx.retryIn) == nil
	case nx.idleFor > 0:
		return p.outOfContention(func() error { return clock.Sleep(ctx, nx.idleFor) }) == nil
	}
	return true
}

// receive makes the planned receive: it reserves the slots, completes a
// watch-mode plan, receives, and gives back the slots the receive did not
// fill. false means the worker is stopping: the slots are given back, and
// so is what the receive brought, at once.
func (p *poller) receive(ctx context.Context, pl receivePlan) (receipt, bool) {
	w := p.w
	n, pr, release, err := p.reserve(ctx, pl)
	if err != nil {
		return receipt{}, false
	}
	spare := w.slots.available()
	w.metrics.busy.Set(float64(w.cfg.Connections - spare))
	if !p.seen.batch {
		pl = pl.contended(p.tuning, contention{
			spare:      spare,
			contenders: p.loops.contenders.Load(),
			watchSlots: p.loops.watchSlots.Add(1),
			batching:   p.loops.batching.Load(),
			waiting:    w.slots.waitingLoops(),
		})
		defer p.loops.watchSlots.Add(-1)
	}
	r := receipt{at: w.cfg.NowFunc(), slots: n, short: pl.short, prio: pr, release: release}
	r.msgs, r.err = w.receive(p.queue, queue.ReceiveOptions{Max: n, Wait: pl.wait, Visibility: w.cfg.VisibilityTimeout})
	if ctx.Err() != nil {
		w.giveBack(ctx, p.queue, r.msgs)
		release(n)
		return receipt{}, false
	}
	returned := w.cfg.NowFunc()
	r.since = returned.Sub(r.at)
	if !p.lastReturn.IsZero() {
		r.since = returned.Sub(p.lastReturn) // the cycle its messages arrived in
	}
	p.lastReturn = returned
	release(n - len(r.msgs))
	return r, true
}

// report counts a receive, logs its failure and records a live queue's
// fill for the backlog's share.
func (p *poller) report(r receipt, nx next) {
	w := p.w
	if r.err != nil {
		w.metrics.receiveErrors.WithLabelValues(p.queue).Inc()
		w.log.Warn("receive failed", "queue", p.queue, "err", r.err, "retry_in", nx.retryIn)
		return
	}
	w.metrics.receives.WithLabelValues(p.queue).Inc()
	if p.class == classLive {
		p.loops.live.set(p.queue, len(r.msgs), r.slots)
	}
	if len(r.msgs) == 0 {
		w.metrics.emptyReceives.WithLabelValues(p.queue).Inc()
	}
}

// countBatching keeps loops.batching in step with the loop's mode.
func (p *poller) countBatching(batch bool) {
	switch {
	case batch && !p.counted:
		p.loops.batching.Add(1)
	case !batch && p.counted:
		p.loops.batching.Add(-1)
	}
	p.counted = batch
}

// outOfContention runs f with the loop not counted as a contender for
// slots: while it waits for something else than slots, or for slots no
// other loop wants.
func (p *poller) outOfContention(f func() error) error {
	p.loops.contenders.Add(-1)
	defer p.loops.contenders.Add(1)
	return f()
}

// priority returns the priority of the loop's next reservation.
func (p *poller) priority() prio {
	switch {
	case p.class == classBacklog:
		return prioIdle
	case p.class == classOverflow:
		return prioOverflow
	case !p.seen.batch && p.loops.live.isIdle():
		// Every live queue is caught up: watching them yields to the
		// backlog, which then takes what is free.
		return prioIdle
	}
	return prioLive
}

// reserve reserves slots for the loop's receive and returns how many, the
// priority they were served at and the function that gives them back.
func (p *poller) reserve(ctx context.Context, pl receivePlan) (int, prio, func(int), error) {
	w := p.w
	if p.class == classBacklog {
		// The backlog takes only capacity the live and overflow work
		// leaves, and while the live queues are not caught up it is no
		// contender: the live loops need not shorten their polls for it.
		if p.loops.live.backlogShare() != shareAll {
			p.loops.contenders.Add(-1)
			defer p.loops.contenders.Add(1)
		}
		n, err := w.slots.acquireSpare(ctx, prioIdle, pl.need, pl.most, p.loops.live.backlogShare)
		return n, prioIdle, w.slots.releaseSpare, err
	}
	n, pr, err := p.acquire(ctx, p.priority(), pl.need, pl.most)
	return n, pr, w.slots.release, err
}

// acquire reserves slots at priority pr and returns the priority it was
// served at.
func (p *poller) acquire(ctx context.Context, pr prio, need, most int) (int, prio, error) {
	w := p.w
	if pr == prioOverflow {
		// Overflow is served from what the live loops leave, but only
		// for overflowWait in all; then it queues with them until it is
		// drained, so that a steady live load does not starve it.
		if p.overflowWait > 0 {
			t0 := w.cfg.NowFunc()
			wctx, cancel := context.WithTimeout(ctx, p.overflowWait)
			n, err := w.slots.acquire(wctx, pr, need, most)
			cancel()
			p.overflowWait -= w.cfg.NowFunc().Sub(t0)
			if err == nil || ctx.Err() != nil {
				return n, pr, err
			}
		}
		pr = prioLive
	}
	n, err := w.slots.acquire(ctx, pr, need, most)
	return n, pr, err
}

// receiveSlack is what a receive may take beyond its long-poll wait
// before it is given up.
const receiveSlack = 10 * time.Second

// receive makes one receive call. Stopping the worker does not cut it
// short: a long poll abandoned by its client may still be handed messages
// by SQS, which would stay hidden for a visibility timeout, so the call is
// let finish (at most its wait) and what it brings is given back. Only a
// kill (a crash, in tests) or receiveSlack past the wait ends it. The
// in-memory backend takes messages only in the call that returns them:
// there a stop cuts the long polls short, and `fairq dev` stops at once
// instead of after up to ReceiveWait.
func (w *Worker) receive(q string, opts queue.ReceiveOptions) ([]queue.Message, error) {
	ctx, cancel := context.WithTimeout(w.receiveCtx, opts.Wait+receiveSlack)
	defer cancel()
	return w.cfg.Backend.Receive(ctx, q, opts)
}

// giveBack gives back received messages the worker will not start, as it
// stops or its loop loses the queue: each goes back to q at once, this
// receive not counted (job.giveBack).
func (w *Worker) giveBack(ctx context.Context, q string, msgs []queue.Message) {
	now := w.cfg.NowFunc()
	for _, m := range msgs {
		j := &job{w: w, d: newDelivery(q, m), ctx: ctx,
			f: &inflight{queue: q, handle: m.ReceiptHandle, id: m.ID, received: now}}
		j.giveBack()
	}
}
