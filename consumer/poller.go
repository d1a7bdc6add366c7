package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/fairq/fairq/internal/clock"
	"github.com/fairq/fairq/queue"
)

// Polling (DESIGN.md §6): every queue has a receive loop of its own, so no
// live queue starves, and a loop whose receives came back full growAfter
// times in a row while slots are free gets an extra loop on its queue, up
// to Connections/10 extra loops for all queues together; an extra loop ends
// at its first empty receive or after shrinkAfter receives in a row that
// were not full. Loops on one queue compete for its messages, and a long
// poll that loses the race may come back empty early: adding loops only
// for a queue that is clearly deep keeps those empty receives rare.
//
// A loop whose last receive came back empty is in watch mode: it reserves
// one slot and long-polls for one message, so that an idle worker holds
// few slots and makes one empty receive per queue per ReceiveWait. It
// long-polls for the whole ReceiveWait only while at least as many slots
// are left free as there are loops; when slots are scarce (a busy worker,
// or hardly more slots than queues) it polls for batchWait, so that a slot
// is never held for long on a queue with nothing in it while another queue
// has work. (A worker with fewer slots than queues thus makes about one
// empty receive per second per slot while idle.) While some loop is in
// batch mode (a queue has work), at most a quarter of the slots
// (maxWatching, at least one) sit in such long polls at once: a loop
// beyond that only glances (a short poll, Wait 0) and, finding nothing,
// pauses for glancePause without a slot, so that with few slots the
// watching loops cost the busy queues milliseconds of a slot a second
// rather than a whole long poll each (SQS's shortest is a second), while
// with enough slots every queue is still watched continuously. Once a
// receive returned messages, the loop is in batch mode: it receives up to
// twice as many messages as its latest receive brought (2 to 10) with a
// short wait, so that a deep queue is soon received in batches of ten while
// a loop does not hold slots that other loops could use for messages its
// queue does not have; it waits until it can reserve a batch of that size
// or of Connections/10 slots (at least 1) if fewer, so that a busy worker
// receives in full batches. After a receive that brought fewer messages
// than it had slots for, it pauses for Config.ReceiveWindow first, so that
// messages arriving at a steady rate gather into fuller batches, if at the
// rate they came since its previous receive the window gathers at least
// gatherMin of them: a slower queue would gain little from the pause, and
// every tenant on it would pay its latency.
//
// Slots go to live loops first. The overflow loop is served from what the
// live loops leave, but only until it has waited overflowPatience in all
// for slots since a receive from the overflow queue last came back empty;
// then it queues with the live loops, until a receive comes back empty
// again. Under a steady live load the overflow queue thus takes its turn
// among the live queues, as one more queue of the pool (about one
// reservation in len(Live)+1), until it is drained: a tenant whose messages
// are all in overflow gets its share after waiting at most
// overflowPatience, rather than whatever slots happen to be left over.
//
// The backlog queue holds old work that must not delay fresh work, yet
// must drain whenever the worker has capacity to spare. The backlog loop
// waits for the live loops' first receives, then reserves slots after
// every other loop (slots.acquireSpare), as much as the latest receives of
// the live queues say is spare (liveState.backlogShare):
//
//   - every live queue came back empty ("caught up"): all that is free,
//     first come first served with the live loops watching their empty
//     queues;
//   - a live queue came back full, so it may hold more: nothing;
//   - otherwise (the live queues are drained as fast as messages come): at
//     most half, rounded down, of the slots the live and overflow work
//     leaves, so that the other half stays free for the next fresh
//     messages.
//
// Under a steady live load that leaves slots free, the backlog thus drains
// behind it, rather than only once the load stops, while fresh messages
// that have piled up are all served first.

// batchWait is the long-poll wait in batch mode: short, since the queue
// just had messages, so that a queue that has emptied gives its reserved
// slots back soon.
const batchWait = time.Second

// gatherMin is the number of messages the receive window must be expected
// to gather for a loop to pause for it.
const gatherMin = 2

// glancePause is how long a loop watching an empty queue pauses, holding no
// slot, after a short poll made because slots were scarce while other
// queues had work: a message arriving there waits at most about this long.
const glancePause = time.Second

// overflowPatience is how long in all the overflow loop waits behind the
// live loops before it queues with them until the overflow queue is
// drained.
const overflowPatience = 2 * time.Second

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

type poller struct {
	queue string
	class class
	extra bool
	// patience is, for an overflow loop, how much longer it waits for
	// slots behind the live loops before it queues with them:
	// overflowPatience less the time it waited since one of its receives
	// last came back empty. An extra loop starts with the patience of the
	// loop that spawned it.
	patience time.Duration
}

// priority returns the priority of the loop's next reservation.
func (w *Worker) priority(p poller, batch bool) prio {
	switch {
	case p.class == classBacklog:
		return prioIdle
	case p.class == classOverflow:
		return prioOverflow
	case !batch && w.live.isIdle():
		return prioIdle
	}
	return prioLive
}

// spawn starts receive loops. They count as contenders for slots from
// before the first of them runs, so that none of them takes a scarce slot
// for a long poll because the others have not started yet.
func (w *Worker) spawn(pollCtx, jobCtx context.Context, ps ...poller) {
	w.contenders.Add(int64(len(ps)))
	w.pollers.Add(len(ps))
	for _, p := range ps {
		go w.poll(pollCtx, jobCtx, p)
	}
}

// poll is one receive loop.
func (w *Worker) poll(ctx, jobCtx context.Context, p poller) {
	defer w.pollers.Done()
	w.metrics.pollers.Inc()
	defer w.metrics.pollers.Dec()
	if p.extra {
		defer w.extras.Add(-1)
	}
	defer w.contenders.Add(-1) // added by spawn

	// The backlog loop is not a contender until the live loops have had
	// their first turn.
	if p.class == classBacklog && w.aside(func() error { return w.live.waitPolled(ctx) }) != nil {
		return
	}
	batch := false // in batch mode: counted in w.batchLoops
	setBatch := func(b bool) {
		switch {
		case b && !batch:
			w.batchLoops.Add(1)
		case !b && batch:
			w.batchLoops.Add(-1)
		}
		batch = b
	}
	defer setBatch(false)
	setBatch(p.extra)
	failures := 0
	fulls, partials := 0, 0  // consecutive full and not-full receives
	got := queue.MaxBatch    // messages of the latest receive
	var lastReturn time.Time // when the latest receive returned
	var rate float64         // messages a second the latest receive brought, since the one before
	first := true
	for ctx.Err() == nil {
		need, most := 1, 1
		wait := w.cfg.ReceiveWait
		if first {
			// Short, so that every live queue is known soon: the backlog
			// waits for that.
			wait, first = min(wait, batchWait), false
		}
		if batch {
			// Twice what the latest receive brought, or what the window
			// gathers at the queue's rate: room to grow, but no slots
			// held for messages the queue does not have.
			most = min(queue.MaxBatch, max(2, 2*got, int(2*rate*w.cfg.ReceiveWindow.Seconds())))
			need = min(w.batchNeed, most)
			wait = min(wait, batchWait)
		}
		n, pr, release, err := w.reserve(ctx, &p, batch, need, most)
		if err != nil {
			return
		}
		spare := w.slots.available()
		w.metrics.busy.Set(float64(w.cfg.Connections - spare))
		glance, watching := false, false
		if !batch {
			if int64(spare) < w.contenders.Load() {
				wait = min(wait, batchWait) // slots are scarce: do not sit on this one
			}
			// While other queues have work, at most maxWatching slots
			// sit in long polls on empty queues; beyond that, a loop
			// only glances (a short poll), then pauses without a slot.
			if held := w.watching.Add(1); held > w.maxWatching && w.batchLoops.Load() > 0 {
				w.watching.Add(-1)
				wait, glance = 0, true
			} else {
				watching = true
			}
		}
		received := w.cfg.NowFunc()
		msgs, err := w.receive(p.queue, queue.ReceiveOptions{Max: n, Wait: wait, Visibility: w.cfg.VisibilityTimeout})
		if ctx.Err() != nil {
			// Stopping: what the receive brought is not started but
			// given back at once.
			w.giveBack(p.queue, msgs)
			release(n)
			if watching {
				w.watching.Add(-1)
			}
			return
		}
		returned := w.cfg.NowFunc()
		since := returned.Sub(lastReturn) // the cycle these messages arrived in
		if lastReturn.IsZero() {
			since = returned.Sub(received)
		}
		lastReturn = returned
		if since > 0 {
			rate = float64(len(msgs)) / since.Seconds()
		}
		release(n - len(msgs))
		if watching {
			w.watching.Add(-1)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			w.metrics.receiveErrors.WithLabelValues(p.queue).Inc()
			pause := min(receiveRetryMax, time.Second<<min(failures-1, 5))
			w.log.Warn("receive failed", "queue", p.queue, "err", err, "retry_in", pause)
			if clock.Sleep(ctx, pause) != nil {
				return
			}
			continue
		}
		failures = 0
		w.metrics.receives.WithLabelValues(p.queue).Inc()
		if p.class == classLive {
			w.live.set(p.queue, len(msgs), n)
		}
		if len(msgs) == 0 {
			w.metrics.emptyReceives.WithLabelValues(p.queue).Inc()
			if p.extra {
				return
			}
			setBatch(false)
			fulls, partials = 0, 0
			p.patience = overflowPatience // drained: behind the live loops again
			if glance && w.aside(func() error { return clock.Sleep(ctx, glancePause) }) != nil {
				return
			}
			continue
		}
		for _, m := range msgs {
			w.jobs.Add(1)
			go w.process(jobCtx, p.queue, m, received, release)
		}
		got = len(msgs)
		if len(msgs) == n { // as many as it had slots for: the queue may hold more
			fulls, partials = fulls+1, 0
		} else {
			fulls, partials = 0, partials+1
		}
		if p.extra && partials >= shrinkAfter {
			return
		}
		if fulls >= growAfter && w.grow(pr) {
			fulls = 0
			w.spawn(ctx, jobCtx, poller{queue: p.queue, class: p.class, extra: true, patience: p.patience})
		}
		if batch && len(msgs) < n && w.gathers(rate) && clock.Sleep(ctx, w.cfg.ReceiveWindow) != nil {
			return
		}
		setBatch(true)
	}
}

// receiveSlack is what a receive may take beyond its long-poll wait
// before it is given up.
const receiveSlack = 10 * time.Second

// receive makes one receive call. Stopping the worker does not cut it
// short: a long poll abandoned by its client may still be handed messages
// by SQS, which would stay hidden for a visibility timeout, so the call is
// let finish (at most its wait) and what it brings is given back. Only a
// kill (a crash, in tests) or receiveSlack past the wait ends it.
func (w *Worker) receive(q string, opts queue.ReceiveOptions) ([]queue.Message, error) {
	ctx, cancel := context.WithTimeout(w.runCtx, opts.Wait+receiveSlack)
	defer cancel()
	return w.cfg.Backend.Receive(ctx, q, opts)
}

// giveBack makes received messages visible again at once, batched: the
// worker is stopping and will not start them.
func (w *Worker) giveBack(q string, msgs []queue.Message) {
	for _, m := range msgs {
		w.changes.add(q, queue.VisibilityChange{ReceiptHandle: m.ReceiptHandle}, func(err error) {
			if err == nil {
				w.metrics.processed.WithLabelValues(outcomeReleased).Inc()
			}
		})
	}
}

// aside runs f with the calling loop not counted as a contender for slots:
// while it waits for something else than slots, or for slots no other
// loop wants.
func (w *Worker) aside(f func() error) error {
	w.contenders.Add(-1)
	defer w.contenders.Add(1)
	return f()
}

// gathers reports whether a loop on a queue bringing rate messages a
// second should pause for the receive window before its next receive:
// when the window gathers at least gatherMin messages at that rate, so
// that the pause at least halves the receives. On a slower queue the pause
// would save little and only add latency, to every tenant of the queue.
func (w *Worker) gathers(rate float64) bool {
	return w.cfg.ReceiveWindow > 0 && rate*w.cfg.ReceiveWindow.Seconds() >= gatherMin
}

// reserve reserves slots for a receive of loop p and returns how many, the
// priority they were served at and the function that gives them back. The
// backlog loop takes spare capacity, waiting for a batch as other loops
// do, and while the live queues are not caught up it does not count as a
// contender for slots.
func (w *Worker) reserve(ctx context.Context, p *poller, batch bool, need, most int) (int, prio, func(int), error) {
	if p.class == classBacklog {
		if w.live.backlogShare() != shareAll {
			w.contenders.Add(-1) // as aside does
			defer w.contenders.Add(1)
		}
		n, err := w.slots.acquireSpare(ctx, prioIdle, need, most, w.live.backlogShare)
		return n, prioIdle, w.slots.releaseSpare, err
	}
	n, pr, err := w.acquire(ctx, w.priority(*p, batch), &p.patience, need, most)
	return n, pr, w.slots.release, err
}

// acquire reserves slots for a receive at priority pr and returns the
// priority it was served at. An overflow reservation waits behind the live
// loops for at most *patience, which it uses up, then queues with them.
func (w *Worker) acquire(ctx context.Context, pr prio, patience *time.Duration, need, most int) (int, prio, error) {
	if pr == prioOverflow {
		if *patience > 0 {
			t0 := time.Now()
			pctx, cancel := context.WithTimeout(ctx, *patience)
			n, err := w.slots.acquire(pctx, pr, need, most)
			cancel()
			*patience -= time.Since(t0)
			if err == nil || ctx.Err() != nil {
				return n, pr, err
			}
		}
		pr = prioLive
	}
	n, err := w.slots.acquire(ctx, pr, need, most)
	return n, pr, err
}

// grow reports whether a queue whose receive came back full may get an
// extra loop: there is room for one, a batch of slots is free, and no loop
// of its priority or above waits for slots.
func (w *Worker) grow(pr prio) bool {
	if w.slots.available() < w.batchNeed || w.slots.waiting(pr) > 0 {
		return false
	}
	for {
		n := w.extras.Load()
		if n >= w.maxExtra {
			return false
		}
		if w.extras.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// liveState tracks the latest receive of every live queue, which says how
// much capacity the backlog may take (backlogShare).
type liveState struct {
	mu     sync.Mutex
	latest map[string]fill // queue → its latest receive; absent: not yet polled
	n      int             // number of live queues
	full   int             // live queues whose latest receive came back full
	polled chan struct{}   // closed once every live queue was polled
}

// fill is how a receive came back.
type fill int

const (
	fillEmpty   fill = iota // no message
	fillPartial             // fewer messages than it had slots for
	fillFull                // as many as it had slots for: the queue may hold more
)

func newLiveState(n int) *liveState {
	return &liveState{latest: make(map[string]fill, n), n: n, polled: make(chan struct{})}
}

// set records the receive of got messages with slots for most from a live
// queue.
func (s *liveState) set(q string, got, most int) {
	f := fillPartial
	switch {
	case got == 0:
		f = fillEmpty
	case got >= most:
		f = fillFull
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	was, seen := s.latest[q]
	if seen && was == fillFull {
		s.full--
	}
	if f == fillFull {
		s.full++
	}
	s.latest[q] = f
	if !seen && len(s.latest) == s.n {
		close(s.polled)
	}
}

// isIdle reports whether every live queue was polled and its latest
// receive came back empty ("caught up").
func (s *liveState) isIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle()
}

func (s *liveState) idle() bool {
	if len(s.latest) < s.n {
		return false
	}
	for _, f := range s.latest {
		if f != fillEmpty {
			return false
		}
	}
	return true
}

// backlogShare is how much of the capacity the live and overflow work
// leaves the backlog may take: all of it while the live queues are caught
// up; none while the latest receive of a live queue came back full (the
// queue may hold more: the capacity is not spare); otherwise half.
func (s *liveState) backlogShare() share {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.idle():
		return shareAll
	case s.full > 0 || len(s.latest) < s.n:
		return shareNone
	}
	return shareHalf
}

// waitPolled waits until every live queue was polled once, or ctx ends:
// until then, what capacity is spare is not known.
func (s *liveState) waitPolled(ctx context.Context) error {
	select {
	case <-s.polled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
