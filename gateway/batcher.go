package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
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
	// It must not keep items once it returns: the Batcher reuses the
	// slice. Its ctx ends when Stop gives up waiting. Required.
	Flush func(ctx context.Context, key string, items []T) ([]R, error)
	// MaxItems is the most items in a batch; zero uses BatchItemsDefault.
	MaxItems int
	// MaxBytes, with Size, bounds the sum of the sizes of a batch's items;
	// a single item larger than MaxBytes goes alone. Zero: no bound.
	MaxBytes int
	Size     func(T) int
	// Window is the longest an item waits for a flush of its key already
	// under way before its own batch goes anyway; zero uses
	// BatchWindowDefault. An item whose key has no flush under way never
	// waits.
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

// Batcher coalesces concurrent items with the same key into batches, the
// way a database groups commits: an item whose key has no flush under way
// is flushed at once; while a flush of its key is under way, items gather
// into the next batch, which goes when that flush returns, when it holds
// MaxItems items (or MaxBytes), or Window after its first item arrived,
// whichever comes first. Sparse items thus pay no wait, and under load a
// batch fills while the previous call is on the wire, so the calls per
// item fall as the load grows and as the calls slow down. Each caller
// waits for the result of its own item. Flushes run concurrently, each in
// a goroutine the Batcher owns; Stop flushes what is pending and waits for
// every flush.
type Batcher[T, R any] struct {
	cfg BatcherConfig[T, R]

	mu      sync.Mutex
	running bool
	stopped bool
	keys    map[string]*keyState[T, R] // keys with a batch gathering or a flush under way
	ctx     context.Context            // of the flushes; cancelled when Stop gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup // flushes in progress
	slices  sync.Pool      // of *[]T with room for MaxItems, for the batches
}

// keyState is what a Batcher knows of one key.
type keyState[T, R any] struct {
	pending  *batch[T, R] // gathering; nil if none
	inFlight int          // flushes under way, counting one about to take pending
	taking   bool         // a flush goroutine is about to take pending
}

type batch[T, R any] struct {
	items   []T
	slice   *[]T // holds items' array in the pool
	bytes   int
	timer   *time.Timer   // armed while the batch waits for a flush under way
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
	b.keys = make(map[string]*keyState[T, R])
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
	for key, ks := range b.keys {
		if ks.pending != nil {
			b.launch(key, ks)
		}
	}
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

// Submit adds an item to the pending batch of key, or starts one, and
// flushes it at once if no flush of key is under way. It does not wait.
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
	ks := b.add(key, item, size)
	t := Ticket[T, R]{b: ks.pending, i: len(ks.pending.items) - 1}
	b.settle(key, ks)
	return t, nil
}

// SubmitAll submits items[i] under keys[i], all before any of their
// batches is flushed, so that one caller's items bound for the same key
// share calls rather than the first going alone. It does not wait.
func (b *Batcher[T, R]) SubmitAll(keys []string, items []T) ([]Ticket[T, R], error) {
	if len(keys) != len(items) {
		return nil, fmt.Errorf("batcher: %d keys for %d items", len(keys), len(items))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return nil, ErrBatcherStopped
	}
	tickets := make([]Ticket[T, R], len(items))
	for i, item := range items {
		size := 0
		if b.cfg.Size != nil {
			size = b.cfg.Size(item)
		}
		ks := b.add(keys[i], item, size)
		tickets[i] = Ticket[T, R]{b: ks.pending, i: len(ks.pending.items) - 1}
		if b.full(ks.pending) {
			b.launch(keys[i], ks)
		}
	}
	for _, key := range keys {
		if ks := b.keys[key]; ks != nil && ks.pending != nil {
			b.settle(key, ks)
		}
	}
	return tickets, nil
}

// add appends an item to the pending batch of key, first flushing that
// batch if the item would take it past MaxBytes. Called with mu held.
func (b *Batcher[T, R]) add(key string, item T, size int) *keyState[T, R] {
	ks := b.keys[key]
	if ks == nil {
		ks = &keyState[T, R]{}
		b.keys[key] = ks
	}
	if bt := ks.pending; bt != nil && b.cfg.MaxBytes > 0 && bt.bytes+size > b.cfg.MaxBytes {
		// This item would make the batch too large: send it as it is.
		b.launch(key, ks)
	}
	if ks.pending == nil {
		items, _ := b.slices.Get().(*[]T)
		if items == nil {
			s := make([]T, 0, b.cfg.MaxItems)
			items = &s
		}
		ks.pending = &batch[T, R]{items: *items, slice: items, done: make(chan struct{})}
	}
	ks.pending.items = append(ks.pending.items, item)
	ks.pending.bytes += size
	return ks
}

func (b *Batcher[T, R]) full(bt *batch[T, R]) bool {
	return len(bt.items) >= b.cfg.MaxItems || b.cfg.MaxBytes > 0 && bt.bytes >= b.cfg.MaxBytes
}

// settle decides the fate of key's pending batch: flushed now if full;
// taken by a new flush if no flush of key is under way; else left to
// gather until one returns or its window ends. Called with mu held.
func (b *Batcher[T, R]) settle(key string, ks *keyState[T, R]) {
	bt := ks.pending
	switch {
	case b.full(bt):
		b.launch(key, ks)
	case ks.inFlight == 0:
		b.take(key, ks)
	case ks.taking:
		// About to be taken.
	case bt.timer == nil:
		bt.timer = time.AfterFunc(b.cfg.Window, func() { b.expire(key, bt) })
	}
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
	if ks := b.keys[key]; ks != nil && ks.pending == bt {
		b.launch(key, ks)
	}
}

// launch flushes key's pending batch as it is, in a goroutine of its own.
// Called with mu held, so that Stop's Wait sees every Add.
func (b *Batcher[T, R]) launch(key string, ks *keyState[T, R]) {
	bt := ks.pending
	ks.pending = nil
	ks.inFlight++
	if bt.timer != nil {
		bt.timer.Stop()
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.flush(key, bt)
		b.returned(key, ks)
	}()
}

// take starts a goroutine that yields the processor once, then takes and
// flushes whatever key's pending batch holds by then. Idle, the yield
// costs next to nothing; under load, the handlers already runnable add
// their items first, so that a batch fills in proportion to the load
// even when a flush takes no time (the memory backend). Called with mu
// held.
func (b *Batcher[T, R]) take(key string, ks *keyState[T, R]) {
	ks.inFlight++
	ks.taking = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		runtime.Gosched()
		b.mu.Lock()
		bt := ks.pending
		ks.pending, ks.taking = nil, false
		if bt != nil && bt.timer != nil {
			bt.timer.Stop()
		}
		b.mu.Unlock()
		if bt != nil { // else it went when full, or at Stop
			b.flush(key, bt)
		}
		b.returned(key, ks)
	}()
}

// returned notes that a flush of key returned and sends the batch that
// gathered meanwhile. Forgetting an idle key keeps the map to the keys in
// use.
func (b *Batcher[T, R]) returned(key string, ks *keyState[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks.inFlight--
	switch {
	case ks.pending != nil && !ks.taking:
		b.take(key, ks)
	case ks.inFlight == 0 && b.keys[key] == ks:
		delete(b.keys, key)
	}
}

func (b *Batcher[T, R]) flush(key string, bt *batch[T, R]) {
	defer close(bt.done)
	defer func() {
		if v := recover(); v != nil {
			bt.results, bt.err = nil, fmt.Errorf("batcher: flush of %q panicked: %v", key, v)
		}
	}()
	results, err := b.cfg.Flush(b.ctx, key, bt.items)
	defer b.recycle(bt)
	switch {
	case err != nil:
		bt.err = err
	case len(results) != len(bt.items):
		bt.err = fmt.Errorf("batcher: flush of %q returned %d results for %d items", key, len(results), len(bt.items))
	default:
		bt.results = results
	}
}

// recycle gives a flushed batch's items slice back, cleared so that the
// pool holds on to none of the items.
func (b *Batcher[T, R]) recycle(bt *batch[T, R]) {
	clear(bt.items)
	if cap(bt.items) == b.cfg.MaxItems {
		*bt.slice = bt.items[:0]
		b.slices.Put(bt.slice)
	}
	bt.items, bt.slice = nil, nil
}
