package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// backlogCallTimeout bounds one BacklogCounter.Done call.
const backlogCallTimeout = 2 * time.Second

// backlogDones tells the BacklogCounter of the messages that ended, off
// the path of the deletes: a delete's outcome only adds its tenant to a
// count kept here, and a goroutine of its own makes the Done calls, one
// per tenant for all the messages that ended since its last round. So a
// counter that does not answer (Redis partitioned) never holds up a delete
// batch, whose calls would otherwise wait for it while the messages they
// delete run out of visibility and are delivered again.
//
// A call that fails (after backlogCallTimeout) is not retried: its count,
// and that of the tenants left in the same round, is dropped and counted
// in fairq_worker_backlog_decrements_dropped_total. The counter is an
// estimate its owner reconciles (see package backlog), and the next
// round's calls, which would most likely fail the same way, are not made
// to wait behind one another. The first failure of a run of them is logged
// as a warning, the return of the counter as info.
type backlogDones struct {
	counter BacklogCounter
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	pending map[string]int64

	wake    chan struct{}        // size 1: something is pending
	stop    chan context.Context // the final flush's context
	stopped chan struct{}        // closed when run has returned

	failing bool // the latest round failed; touched by run only
	dropped int64
}

func newBacklogDones(c BacklogCounter, log *slog.Logger, m *metrics) *backlogDones {
	return &backlogDones{
		counter: c,
		log:     log,
		metrics: m,
		pending: make(map[string]int64),
		wake:    make(chan struct{}, 1),
		stop:    make(chan context.Context),
		stopped: make(chan struct{}),
	}
}

// start starts the goroutine making the calls, with ctx (and a timeout
// each).
func (d *backlogDones) start(ctx context.Context) { go d.run(ctx) }

// add counts one message of tenant that ended. It never blocks.
func (d *backlogDones) add(tenant string) {
	d.mu.Lock()
	d.pending[tenant]++
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // a round is already due
	}
}

// close makes the calls for what is pending with ctx, and a timeout each,
// then ends the goroutine; if the latest round failed, what is pending is
// dropped instead, so that close waits for at most the call under way and
// one more. add must not be called after close.
func (d *backlogDones) close(ctx context.Context) {
	d.stop <- ctx
	<-d.stopped
}

func (d *backlogDones) run(ctx context.Context) {
	defer close(d.stopped)
	for {
		select {
		case final := <-d.stop: // before another round
			d.finish(final)
			return
		default:
		}
		select {
		case <-d.wake:
			d.flush(ctx)
		case final := <-d.stop:
			d.finish(final)
			return
		}
	}
}

// finish makes the last round, unless the latest one failed: then it drops
// what is pending rather than make Stop wait for another timeout.
func (d *backlogDones) finish(ctx context.Context) {
	if d.failing {
		d.drop()
		return
	}
	d.flush(ctx)
}

// drop drops what is pending.
func (d *backlogDones) drop() {
	d.mu.Lock()
	var lost int64
	for _, n := range d.pending {
		lost += n
	}
	clear(d.pending)
	d.mu.Unlock()
	if lost > 0 {
		d.metrics.backlogDropped.Add(float64(lost))
		d.log.Warn("backlog counter not decremented at stop: it does not answer", "messages", lost)
	}
}

// flush makes one round of calls: one per tenant with messages pending.
func (d *backlogDones) flush(ctx context.Context) {
	d.mu.Lock()
	round := d.pending
	if len(round) == 0 {
		d.mu.Unlock()
		return
	}
	d.pending = make(map[string]int64, len(round))
	d.mu.Unlock()
	var err error
	var lost int64
	for tenant, n := range round {
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, backlogCallTimeout)
			err = d.counter.Done(cctx, tenant, n)
			cancel()
			if err == nil {
				continue
			}
		}
		lost += n
	}
	switch {
	case err != nil:
		d.metrics.backlogDropped.Add(float64(lost))
		d.dropped += lost
		if !d.failing {
			d.log.Warn("backlog counter not decremented: counts dropped until it answers (it is reconciled)",
				"messages", lost, "err", err)
		} else {
			d.log.Debug("backlog counter not decremented", "messages", lost, "err", err)
		}
		d.failing = true
	case d.failing:
		d.log.Info("backlog counter decremented again", "dropped", d.dropped)
		d.failing, d.dropped = false, 0
	}
}
