package batch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Defaults of Config.
const (
	MaxItemsDefault = 10
	WindowDefault   = 2 * time.Millisecond
)

// ErrStopped is returned by the Submit methods before Start and after Stop.
var ErrStopped = errors.New("batcher is not running")

// Mode says when a batch whose key has no flush under way goes.
type Mode int

const (
	// GroupCommit flushes it at once; items gather only behind a flush
	// of their key in flight, for at most Window.
	GroupCommit Mode = iota
	// Linger lets it wait up to Window after its first item for others,
	// whether or not a flush of its key is under way.
	Linger
)

// Config configures a Batcher.
type Config[T, R any] struct {
	// Flush sends one batch of items that share a key and returns one
	// result per item, in order; an error fails every item of the batch.
	// It must not keep items once it returns: the Batcher reuses the
	// slice. Its ctx carries the values of Start's and ends when Stop
	// gives up waiting. Required.
	Flush func(ctx context.Context, key string, items []T) ([]R, error)
	// MaxItems is the most items in a batch; zero uses MaxItemsDefault.
	MaxItems int
	// MaxBytes, with Size, bounds the sum of the sizes of a batch's items;
	// a single item larger than MaxBytes goes alone. Zero: no bound.
	MaxBytes int
	Size     func(T) int
	// Window is the longest an item waits for others before its batch
	// goes (see Mode); zero uses WindowDefault.
	Window time.Duration
	// Mode is GroupCommit (the zero value) or Linger.
	Mode Mode
	// MaxFlushes bounds the flushes under way at once, all keys
	// together: a batch due beyond it waits for one to end. Zero: no
	// bound.
	MaxFlushes int
}

func (c Config[T, R]) withDefaults() Config[T, R] {
	c.MaxItems = cmp.Or(c.MaxItems, MaxItemsDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	return c
}

func (c Config[T, R]) validate() error {
	switch {
	case c.Flush == nil:
		return errors.New("batch: Flush is required")
	case c.MaxItems < 1:
		return fmt.Errorf("batch: MaxItems %d, want at least 1", c.MaxItems)
	case c.MaxBytes < 0 || c.MaxBytes > 0 && c.Size == nil:
		return errors.New("batch: MaxBytes needs Size")
	case c.Window < 0:
		return fmt.Errorf("batch: Window %v is negative", c.Window)
	case c.Mode != GroupCommit && c.Mode != Linger:
		return fmt.Errorf("batch: unknown Mode %d", c.Mode)
	case c.MaxFlushes < 0:
		return fmt.Errorf("batch: MaxFlushes %d is negative", c.MaxFlushes)
	}
	return nil
}

// Batcher coalesces concurrent items with the same key into batches: a
// batch goes when it holds MaxItems items (or MaxBytes), when its Window
// ends, or, in GroupCommit mode, at once if no flush of its key is under
// way and else when that flush returns. Each item gets its own result.
// Flushes run concurrently, each in a goroutine the Batcher owns; Stop
// flushes what is pending and waits for every flush.
type Batcher[T, R any] struct {
	cfg Config[T, R]
	sem chan struct{} // sized MaxFlushes; nil without a bound

	mu      sync.Mutex
	running bool
	stopped bool
	keys    map[string]*keyState[T, R] // keys with a batch gathering or a flush under way
	ctx     context.Context            // of the flushes; cancelled when Stop gives up
	cancel  context.CancelFunc
	wg      sync.WaitGroup // flushes in progress
	buffers sync.Pool      // of *buffer with room for MaxItems, for the batches
}

// keyState is what a Batcher knows of one key.
type keyState[T, R any] struct {
	pending  *group[T, R] // gathering; nil if none
	inFlight int          // flushes under way, counting one about to take pending
	taking   bool         // a flush goroutine is about to take pending
}

// group is one batch, from its first item to its results.
type group[T, R any] struct {
	buf     *buffer[T, R] // its items, from the pool
	bytes   int
	timer   *time.Timer   // armed while the batch waits for its window
	done    chan struct{} // closed when results or err are set
	results []R
	err     error
}

// buffer holds the items of a batch and their callbacks; the Batcher
// reuses it once the batch is flushed.
type buffer[T, R any] struct {
	items []T
	dones []func(R, error) // per item, or empty while no item has a callback
}

// New returns a stopped Batcher.
func New[T, R any](cfg Config[T, R]) (*Batcher[T, R], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Batcher[T, R]{cfg: cfg}
	if cfg.MaxFlushes > 0 {
		b.sem = make(chan struct{}, cfg.MaxFlushes)
	}
	return b, nil
}

// Start lets the Submit methods take items. The flushes' context keeps
// ctx's values but not its end: Stop ends the flushes.
func (b *Batcher[T, R]) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running || b.stopped {
		return errors.New("batch: started twice")
	}
	b.running = true
	b.keys = make(map[string]*keyState[T, R])
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return nil
}

// Stop refuses new items, flushes every pending batch at once and waits
// for all flushes and their callbacks. If ctx ends first, the flushes'
// context is cancelled and Stop still waits for them to return, then
// returns ctx.Err(). Stop is idempotent.
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
	g *group[T, R]
	i int
}

// Submit adds an item to the pending batch of key, or starts one. It does
// not wait.
func (b *Batcher[T, R]) Submit(key string, item T) (Ticket[T, R], error) {
	return b.submit(key, item, nil)
}

// SubmitFunc is Submit for a caller that does not wait: done gets the
// item's result on the goroutine of its flush, once the flush returned.
// done runs while its flush still counts against MaxFlushes, so it must
// not block; it may submit to another Batcher. Before Start and after
// Stop, SubmitFunc returns ErrStopped and done is not called.
func (b *Batcher[T, R]) SubmitFunc(key string, item T, done func(R, error)) error {
	_, err := b.submit(key, item, done)
	return err
}

func (b *Batcher[T, R]) submit(key string, item T, done func(R, error)) (Ticket[T, R], error) {
	size := b.size(item)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return Ticket[T, R]{}, ErrStopped
	}
	ks := b.add(key, item, size, done)
	t := Ticket[T, R]{g: ks.pending, i: len(ks.pending.buf.items) - 1}
	b.settle(key, ks)
	return t, nil
}

// SubmitAll submits items[i] under keys[i], all before any of their
// batches is flushed, so that one caller's items bound for the same key
// share calls rather than the first going alone. It does not wait.
func (b *Batcher[T, R]) SubmitAll(keys []string, items []T) ([]Ticket[T, R], error) {
	if len(keys) != len(items) {
		return nil, fmt.Errorf("batch: %d keys for %d items", len(keys), len(items))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return nil, ErrStopped
	}
	tickets := make([]Ticket[T, R], len(items))
	for i, item := range items {
		ks := b.add(keys[i], item, b.size(item), nil)
		tickets[i] = Ticket[T, R]{g: ks.pending, i: len(ks.pending.buf.items) - 1}
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

func (b *Batcher[T, R]) size(item T) int {
	if b.cfg.Size == nil {
		return 0
	}
	return b.cfg.Size(item)
}

// add appends an item to the pending batch of key, first flushing that
// batch if the item would take it past MaxBytes. Called with mu held.
func (b *Batcher[T, R]) add(key string, item T, size int, done func(R, error)) *keyState[T, R] {
	ks := b.keys[key]
	if ks == nil {
		ks = &keyState[T, R]{}
		b.keys[key] = ks
	}
	if g := ks.pending; g != nil && b.cfg.MaxBytes > 0 && g.bytes+size > b.cfg.MaxBytes {
		// This item would make the batch too large: send it as it is.
		b.launch(key, ks)
	}
	if ks.pending == nil {
		buf, _ := b.buffers.Get().(*buffer[T, R])
		if buf == nil {
			buf = &buffer[T, R]{items: make([]T, 0, b.cfg.MaxItems)}
		}
		ks.pending = &group[T, R]{buf: buf, done: make(chan struct{})}
	}
	g := ks.pending
	g.buf.items = append(g.buf.items, item)
	g.bytes += size
	if done != nil || len(g.buf.dones) > 0 {
		if g.buf.dones == nil {
			g.buf.dones = make([]func(R, error), 0, b.cfg.MaxItems)
		}
		for len(g.buf.dones) < len(g.buf.items)-1 {
			g.buf.dones = append(g.buf.dones, nil) // items without one before it
		}
		g.buf.dones = append(g.buf.dones, done)
	}
	return ks
}

func (b *Batcher[T, R]) full(g *group[T, R]) bool {
	return len(g.buf.items) >= b.cfg.MaxItems || b.cfg.MaxBytes > 0 && g.bytes >= b.cfg.MaxBytes
}

// settle decides the fate of key's pending batch: flushed now if full; in
// GroupCommit mode, taken by a new flush if no flush of key is under way;
// else left to gather until its window ends (or, in GroupCommit mode, a
// flush of key returns). Called with mu held.
func (b *Batcher[T, R]) settle(key string, ks *keyState[T, R]) {
	g := ks.pending
	switch {
	case b.full(g):
		b.launch(key, ks)
	case b.cfg.Mode == GroupCommit && ks.inFlight == 0:
		b.take(key, ks)
	case ks.taking:
		// About to be taken.
	case g.timer == nil:
		g.timer = time.AfterFunc(b.cfg.Window, func() { b.expire(key, g) })
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
	case <-t.g.done:
		return t.g.result(t.i)
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// result is item i's result. Call once done is closed.
func (g *group[T, R]) result(i int) (R, error) {
	if g.err != nil {
		var zero R
		return zero, g.err
	}
	return g.results[i], nil
}

// expire flushes a batch whose window ended, unless it went already.
func (b *Batcher[T, R]) expire(key string, g *group[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ks := b.keys[key]; ks != nil && ks.pending == g {
		b.launch(key, ks)
	}
}

// launch flushes key's pending batch as it is, in a goroutine of its own.
// Called with mu held, so that Stop's Wait sees every Add.
func (b *Batcher[T, R]) launch(key string, ks *keyState[T, R]) {
	g := ks.pending
	ks.pending = nil
	ks.inFlight++
	if g.timer != nil {
		g.timer.Stop()
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.flush(key, g)
		b.returned(key, ks)
	}()
}

// take starts a goroutine that yields the processor once, then takes and
// flushes whatever key's pending batch holds by then. Idle, the yield
// costs next to nothing; under load, the callers already runnable add
// their items first, so that a batch fills in proportion to the load
// even when a flush takes no time (an in-memory queue). Called with mu
// held.
func (b *Batcher[T, R]) take(key string, ks *keyState[T, R]) {
	ks.inFlight++
	ks.taking = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		runtime.Gosched()
		b.mu.Lock()
		g := ks.pending
		ks.pending, ks.taking = nil, false
		if g != nil && g.timer != nil {
			g.timer.Stop()
		}
		b.mu.Unlock()
		if g != nil { // else it went when full, or at Stop
			b.flush(key, g)
		}
		b.returned(key, ks)
	}()
}

// returned notes that a flush of key returned and, in GroupCommit mode,
// sends the batch that gathered meanwhile. Forgetting an idle key keeps
// the map to the keys in use.
func (b *Batcher[T, R]) returned(key string, ks *keyState[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks.inFlight--
	switch {
	case ks.pending != nil && !ks.taking && b.cfg.Mode == GroupCommit:
		b.take(key, ks)
	case ks.inFlight == 0 && ks.pending == nil && b.keys[key] == ks:
		delete(b.keys, key)
	}
}

// flush makes the Flush call of a batch, once MaxFlushes allows, and hands
// out its results: to the tickets, then to the callbacks in order.
func (b *Batcher[T, R]) flush(key string, g *group[T, R]) {
	if b.sem != nil {
		b.sem <- struct{}{}
		defer func() { <-b.sem }()
	}
	defer b.recycle(g)
	n := len(g.buf.items)
	results, err := b.call(key, g.buf.items)
	switch {
	case err != nil:
		g.err = err
	case len(results) != n:
		g.err = fmt.Errorf("batch: flush of %q returned %d results for %d items", key, len(results), n)
	default:
		g.results = results
	}
	close(g.done)
	for i, done := range g.buf.dones {
		if done != nil {
			done(g.result(i))
		}
	}
}

// call is Flush, with a panic turned into the batch's error.
func (b *Batcher[T, R]) call(key string, items []T) (results []R, err error) {
	defer func() {
		if v := recover(); v != nil {
			results, err = nil, fmt.Errorf("batch: flush of %q panicked: %v", key, v)
		}
	}()
	return b.cfg.Flush(b.ctx, key, items)
}

// recycle gives a flushed batch's buffer back, cleared so that the pool
// holds on to none of the items and callbacks.
func (b *Batcher[T, R]) recycle(g *group[T, R]) {
	buf := g.buf
	g.buf = nil
	clear(buf.items)
	clear(buf.dones)
	if cap(buf.items) == b.cfg.MaxItems {
		buf.items, buf.dones = buf.items[:0], buf.dones[:0]
		b.buffers.Put(buf)
	}
}
