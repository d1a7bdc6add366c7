package consumer

import (
	"context"
	"time"

	"github.com/fairq/fairq/internal/batch"
	"github.com/fairq/fairq/queue"
)

// batchCallTimeout bounds one batch call to the backend.
const batchCallTimeout = 30 * time.Second

// batchParallel bounds the batch calls of one batcher in flight at once.
const batchParallel = 16

// batcher carries out single operations on messages (delete, change
// visibility, send) in batch calls of up to queue.MaxBatch per queue: a
// batch.Batcher in Linger mode, since nobody waits for these calls and a
// batch that waits BatchWindow for company costs fewer calls per message
// under load. Each entry's done, if not nil, gets the entry's own outcome.
// done runs while its call still counts against batchParallel, so it must
// not block: no call to Redis (a message's end is only counted there, see
// Backlog), and the one call to the queue a move's outcome may make
// is bounded by ioTimeout.
type batcher[T any] struct {
	b *batch.Batcher[T, error]
}

// newBatcher returns a batcher whose calls are call, each bounded by
// batchCallTimeout.
func newBatcher[T any](window time.Duration, call func(ctx context.Context, queue string, items []T) ([]error, error)) *batcher[T] {
	b, err := batch.New(batch.Config[T, error]{
		Flush: func(ctx context.Context, q string, items []T) ([]error, error) {
			ctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
			defer cancel()
			errs, err := call(ctx, q, items)
			if err != nil {
				return nil, err
			}
			if len(errs) < len(items) { // an entry without a result is taken as done
				errs = append(errs, make([]error, len(items)-len(errs))...)
			}
			return errs[:len(items)], nil
		},
		MaxItems:   queue.MaxBatch,
		Window:     window,
		Mode:       batch.Linger,
		MaxFlushes: batchParallel,
	})
	if err != nil {
		panic(err) // the config above is valid for any window Config.validate lets through
	}
	return &batcher[T]{b: b}
}

// start lets add take entries; calls are made with ctx's values (and a
// timeout each), never cut short by its end.
func (b *batcher[T]) start(ctx context.Context) {
	_ = b.b.Start(ctx) // starts once: the worker does
}

// add queues one entry. done, if not nil, gets the entry's own error and
// the call's (see failure); an entry added after close fails at once with
// batch.ErrStopped.
func (b *batcher[T]) add(queueName string, v T, done func(entryErr, callErr error)) {
	if err := b.b.SubmitFunc(queueName, v, done); err != nil && done != nil {
		done(nil, err)
	}
}

// failure is the outcome of one entry of a batch call: the call's error,
// else the entry's own.
func failure(entryErr, callErr error) error {
	if callErr != nil {
		return callErr
	}
	return entryErr
}

// close flushes what is pending and waits for every call and done.
func (b *batcher[T]) close() {
	_ = b.b.Stop(context.Background()) // without a deadline: nil
}
