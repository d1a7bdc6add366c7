package consumer

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/fairq/fairq/queue"
)

// pollers is what the worker's receive loops share: the state of the live
// queues, and the counts by which each loop paces itself against the
// others.
type pollers struct {
	tuning tuning
	live   *liveState
	// contenders counts the loops competing for slots: not the backlog
	// loop while the live queues are not caught up, nor a loop pausing
	// without a slot.
	contenders atomic.Int64
	batching   atomic.Int64 // loops in batch mode
	watchSlots atomic.Int64 // slots held by loops in watch mode
	extras     atomic.Int32 // extra loops running
	maxExtras  int32
	running    sync.WaitGroup
}

func newPollers(cfg Config) *pollers {
	return &pollers{
		tuning: tuning{
			wait:   cfg.ReceiveWait,
			window: cfg.ReceiveWindow,
			// A tenth of the slots, so that a busy worker fills batches
			// of ten and a small one still receives.
			batchNeed: min(queue.MaxBatch, max(1, (cfg.Connections+9)/10)),
			// A quarter of the slots: with enough of them every empty
			// queue is still watched by a long poll.
			maxWatchSlots: int64(max(1, cfg.Connections/4)),
		},
		live:      newLiveState(),
		maxExtras: int32(max(1, cfg.Connections/queue.MaxBatch)),
	}
}

// spawn starts receive loops on ctx. They count as contenders for slots
// from before the first of them runs, so that none of them takes a scarce
// slot for a long poll because the others have not started yet.
func (w *Worker) spawn(ctx, jobCtx context.Context, ps ...*poller) {
	ctxs := make([]context.Context, len(ps))
	for i := range ctxs {
		ctxs[i] = ctx
	}
	w.spawnEach(ctxs, jobCtx, ps)
}

// grow reports whether a queue whose receives came back full may get an
// extra loop, and if so counts it: there is room for one, a batch of slots
// is free, and no loop of its priority or above waits for slots.
func (l *pollers) grow(s *slots, pr prio) bool {
	if s.available() < l.tuning.batchNeed || s.waiting(pr) > 0 {
		return false
	}
	for {
		n := l.extras.Load()
		if n >= l.maxExtras {
			return false
		}
		if l.extras.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
