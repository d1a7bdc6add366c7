package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Batcher defaults.
const (
	BatchItemsDefault  = 10
	BatchWindowDefault = 2 * time.Millisecond
)

// ErrBatcherStopped is returned by Submit before Start and after Stop.
var ErrBatcherStopped = errors.New("batcher is not running")

// BatcherConfig configures a Batcher.
type BatcherConfig[T, R any] struct {
	// Flush sends one batch of items that share a key and returns one
	// result per item, in order; an error fails every item of the batch.
	// Its ctx ends when Stop gives up waiting. Required.
	Flush func(ctx context.Context, key string, items []T) ([]R, error)
	// MaxItems is the most items in a batch; zero uses BatchItemsDefault.
	MaxItems int
	// MaxBytes, with Size, bounds the sum of the sizes of a batch's items;
	// a single item larger than MaxBytes goes alone. Zero: no bound.
	MaxBytes int
	Size     func(T) int
	// Window is the longest an item waits for others to join its batch;
	// zero uses BatchWindowDefault.
	Window time.Duration
}

func (c BatcherConfig[T, R]) withDefaults() BatcherConfig[T, R] {
	c.MaxItems = cmp.Or(c.MaxItems, BatchItemsDefault)
	c.Window = cmp.Or(c.Window, BatchWindowDefault)
	return c
}

func (c BatcherConfig[T, R]) validate() error {
	switch {
	case c.Flush == nil:
		return errors.New("batcher: Flush is required")
	case c.MaxItems < 1:
		return fmt.Errorf("batcher: MaxItems %d, want at least 1", c.MaxItems)
	case c.MaxBytes < 0 || c.MaxBytes > 0 && c.Size == nil:
		return errors.New("batcher: MaxBytes needs Size")
	case c.Window < 0:
		return fmt.Errorf("batcher: Window %v is negative", c.Window)
	}
	return nil
}

// Batcher coalesces concurrent items with the same key into batches: a
// batch is flushed when it holds MaxItems items (or MaxBytes), or Window
// after its first item arrived, whichever comes first. Each caller waits
// for the result of its own item. Flushes of different batches run
// concurrently, each in a goroutine the Batcher owns; Stop flushes what is
// pending and waits for every flush.
type Batcher[T, R any] struct {
	cfg BatcherConfig[T, R]

	mu      sync.Mutex
	running bool
	stopped bool
	pending map[string]*batch[T, R]
	ctx     context.Context // of the flushes; cancelled when Stop gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup // flushes in progress
}

type batch[T, R any] struct {
	items   []T
	bytes   int
	timer   *time.Timer
	done    chan struct{} // closed when results or err are set
	results []R
	err     error
}

// NewBatcher returns a stopped Batcher.
func NewBatcher[T, R any](cfg BatcherConfig[T, R]) (*Batcher[T, R], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Batcher[T, R]{cfg: cfg}, nil
}

// Start lets Submit take items.
func (b *Batcher[T, R]) Start(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running || b.stopped {
		return errors.New("batcher: started twice")
	}
	b.running = true
	b.pending = make(map[string]*batch[T, R])
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return nil
}

// Stop refuses new items, flushes every pending batch at once and waits
// for all flushes. If ctx ends first, the flushes' context is cancelled and
// Stop still waits for them to return, then returns ctx.Err(). Stop is
// idempotent.
func (b *Batcher[T, R]) Stop(ctx context.Context) error {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return nil
	}
	b.running, b.stopped = false, true
	for key, bt := range b.pending {
		b.launch(key, bt)
	}
	b.pending = nil
	b.mu.Unlock()

	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	defer b.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		b.cancel()
		<-done
		return ctx.Err()
	}
}

// Ticket is the claim of one submitted item on its result.
type Ticket[T, R any] struct {
	b *batch[T, R]
	i int
}

// Submit adds an item to the pending batch of key, or starts one. It does
// not wait.
func (b *Batcher[T, R]) Submit(key string, item T) (Ticket[T, R], error) {
	size := 0
	if b.cfg.Size != nil {
		size = b.cfg.Size(item)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return Ticket[T, R]{}, ErrBatcherStopped
	}
	bt := b.pending[key]
	if bt != nil && b.cfg.MaxBytes > 0 && bt.bytes+size > b.cfg.MaxBytes {
		// This item would make the batch too large: send it as it is.
		delete(b.pending, key)
		b.launch(key, bt)
		bt = nil
	}
	if bt == nil {
		bt = &batch[T, R]{items: make([]T, 0, b.cfg.MaxItems), done: make(chan struct{})}
		b.pending[key] = bt
		bt.timer = time.AfterFunc(b.cfg.Window, func() { b.expire(key, bt) })
	}
	bt.items = append(bt.items, item)
	bt.bytes += size
	t := Ticket[T, R]{b: bt, i: len(bt.items) - 1}
	if len(bt.items) >= b.cfg.MaxItems || b.cfg.MaxBytes > 0 && bt.bytes >= b.cfg.MaxBytes {
		delete(b.pending, key)
		b.launch(key, bt)
	}
	return t, nil
}

// Do submits an item and waits for its result.
func (b *Batcher[T, R]) Do(ctx context.Context, key string, item T) (R, error) {
	t, err := b.Submit(key, item)
	if err != nil {
		var zero R
		return zero, err
	}
	return t.Wait(ctx)
}

// Wait returns the item's result once its batch was flushed, or ctx.Err().
// The item may still be sent after ctx ends.
func (t Ticket[T, R]) Wait(ctx context.Context) (R, error) {
	select {
	case <-t.b.done:
		if t.b.err != nil {
			var zero R
			return zero, t.b.err
		}
		return t.b.results[t.i], nil
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// result waits for the item's result, however long its flush takes.
func (t Ticket[T, R]) result() (R, error) {
	<-t.b.done
	if t.b.err != nil {
		var zero R
		return zero, t.b.err
	}
	return t.b.results[t.i], nil
}

// expire flushes a batch whose window ended, unless it went already.
func (b *Batcher[T, R]) expire(key string, bt *batch[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[key] != bt {
		return // flushed when full, or by Stop
	}
	delete(b.pending, key)
	b.launch(key, bt)
}

// launch flushes bt in a goroutine of its own. Called with mu held, so
// that Stop's Wait sees every Add.
func (b *Batcher[T, R]) launch(key string, bt *batch[T, R]) {
	bt.timer.Stop()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.flush(key, bt)
	}()
}

func (b *Batcher[T, R]) flush(key string, bt *batch[T, R]) {
	defer close(bt.done)
	defer func() {
		if v := recover(); v != nil {
			bt.results, bt.err = nil, fmt.Errorf("batcher: flush of %q panicked: %v", key, v)
		}
	}()
	results, err := b.cfg.Flush(b.ctx, key, bt.items)
	switch {
	case err != nil:
		bt.err = err
	case len(results) != len(bt.items):
		bt.err = fmt.Errorf("batcher: flush of %q returned %d results for %d items", key, len(results), len(bt.items))
	default:
		bt.results = results
	}
}
