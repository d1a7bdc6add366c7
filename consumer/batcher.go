package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/fairq/fairq/queue"
)

// batchCallTimeout bounds one batch call to the backend.
const batchCallTimeout = 30 * time.Second

// batchParallel bounds the batch calls of one batcher in flight at once.
const batchParallel = 16

// batcher coalesces single operations on messages (delete, change
// visibility, send) into batch calls of up to queue.MaxBatch per queue, made
// when a batch is full or window after its first entry, so that the cost
// per message falls under load. Calls run concurrently, at most
// batchParallel at a time. Each entry's done, if not nil, gets the entry's
// own outcome. done runs while its call still holds one of the
// batchParallel slots, so it must not block: no call to Redis (a message's
// end is only counted there, see Backlog), and the one call to the
// queue a move's outcome may make is bounded by ioTimeout.
//
// Its loop goroutine is started by start and ends, after flushing what is
// pending and waiting for every call, when close is called. add must not be
// called after close.
type batcher[T any] struct {
	window time.Duration
	call   func(ctx context.Context, queue string, items []T) ([]error, error)

	in      chan batchEntry[T]
	stopped chan struct{}
	sem     chan struct{}
	flights sync.WaitGroup
}

type batchEntry[T any] struct {
	queue string
	v     T
	done  func(error)
}

func newBatcher[T any](window time.Duration, call func(ctx context.Context, queue string, items []T) ([]error, error)) *batcher[T] {
	return &batcher[T]{
		window:  window,
		call:    call,
		in:      make(chan batchEntry[T]),
		stopped: make(chan struct{}),
		sem:     make(chan struct{}, batchParallel),
	}
}

// start starts the loop; calls are made with ctx (and a timeout each).
func (b *batcher[T]) start(ctx context.Context) { go b.run(ctx) }

// add queues one entry.
func (b *batcher[T]) add(queueName string, v T, done func(error)) {
	b.in <- batchEntry[T]{queue: queueName, v: v, done: done}
}

// close flushes what is pending and waits for every call and done.
func (b *batcher[T]) close() {
	close(b.in)
	<-b.stopped
}

func (b *batcher[T]) run(ctx context.Context) {
	defer close(b.stopped)
	pending := make(map[string][]batchEntry[T])
	timer := time.NewTimer(b.window)
	timer.Stop()
	armed := false
	defer timer.Stop()
	for {
		select {
		case e, ok := <-b.in:
			if !ok {
				for q, entries := range pending {
					b.flush(ctx, q, entries)
				}
				b.flights.Wait()
				return
			}
			entries := append(pending[e.queue], e)
			if len(entries) >= queue.MaxBatch {
				delete(pending, e.queue)
				b.flush(ctx, e.queue, entries)
				continue
			}
			pending[e.queue] = entries
			if !armed {
				timer.Reset(b.window)
				armed = true
			}
		case <-timer.C:
			armed = false
			for q, entries := range pending {
				b.flush(ctx, q, entries)
			}
			clear(pending)
		}
	}
}

// flush makes one batch call in its own goroutine.
func (b *batcher[T]) flush(ctx context.Context, queueName string, entries []batchEntry[T]) {
	b.flights.Add(1)
	go func() {
		defer b.flights.Done()
		b.sem <- struct{}{}
		defer func() { <-b.sem }()
		items := make([]T, len(entries))
		for i, e := range entries {
			items[i] = e.v
		}
		cctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
		errs, err := b.call(cctx, queueName, items)
		cancel()
		for i, e := range entries {
			if e.done == nil {
				continue
			}
			switch {
			case err != nil:
				e.done(err)
			case i < len(errs):
				e.done(errs[i])
			default:
				e.done(nil)
			}
		}
	}()
}
