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

// MaxItemsDefault is the default of Config.MaxItems.
const MaxItemsDefault = 10

// ErrStopped is returned by the Submit methods before Start and after Stop.
var ErrStopped = errors.New("batcher is not running")

// Mode says whether a batch that is not full waits for more items.
type Mode int

const (
	// Adaptive lets a batch wait, up to Window after its first item, only
	// while more items are likely to join it: while the rest of its
	// window is expected, at its key's recent rate of items, to bring at
	// least companyLikely more. Otherwise, and whenever Window is zero,
	// it goes at once. A key that sees few items therefore never waits.
	Adaptive Mode = iota
	// Linger lets every batch wait up to Window after its first item for
	// others.
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
	// goes (see Mode); zero sends every batch at once.
	Window time.Duration
	// Mode is Adaptive (the zero value) or Linger.
	Mode Mode
	// MaxFlushes bounds the flushes under way at once, all keys
	// together: a batch due beyond it waits for one to end. Zero: no
	// bound.
	MaxFlushes int
}

func (c Config[T, R]) withDefaults() Config[T, R] {
	c.MaxItems = cmp.Or(c.MaxItems, MaxItemsDefault)
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
	case c.Mode != Adaptive && c.Mode != Linger:
		return fmt.Errorf("batch: unknown Mode %d", c.Mode)
	case c.MaxFlushes < 0:
		return fmt.Errorf("batch: MaxFlushes %d is negative", c.MaxFlushes)
	}
	return nil
}

// Batcher coalesces concurrent items with the same key into batches: a
// batch goes when it holds MaxItems items (or MaxBytes), when its Window
// ends, or, in Adaptive mode, as soon as more items are no longer likely
// within its window. Each item gets its own result. Flushes run
// concurrently, several of one key among them, each in a goroutine the
// Batcher owns; Stop flushes what is pending and waits for every flush.
type Batcher[T, R any] struct {
	cfg     Config[T, R]
	sem     chan struct{} // sized MaxFlushes; nil without a bound
	horizon time.Duration // over which a key's rate is measured (Adaptive)

	mu      sync.Mutex
	running bool
	stopped bool
	keys    map[string]*keyState[T, R] // keys with a batch gathering or a flush under way; in Adaptive mode, also those seen lately
	swept   time.Time                  // when idle keys were last forgotten (Adaptive)
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
	rate     arrivals     // the key's recent items (Adaptive)
}

// group is one batch, from its first item to its results.
type group[T, R any] struct {
	buf     *buffer[T, R] // its items, from the pool
	bytes   int
	opened  time.Time     // when its first item came
	quietAt time.Time     // when, with no further item, it goes (Adaptive)
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
	b := &Batcher[T, R]{cfg: cfg, horizon: rateHorizon(cfg.Window)}
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
	now := b.now()
	ks := b.add(key, item, size, done, now)
	t := Ticket[T, R]{g: ks.pending, i: len(ks.pending.buf.items) - 1}
	b.settle(key, ks, now)
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
	now := b.now()
	for i, item := range items {
		ks := b.add(keys[i], item, b.size(item), nil, now)
		tickets[i] = Ticket[T, R]{g: ks.pending, i: len(ks.pending.buf.items) - 1}
		if b.full(ks.pending) {
			b.launch(keys[i], ks)
		}
	}
	for _, key := range keys {
		if ks := b.keys[key]; ks != nil && ks.pending != nil {
			b.settle(key, ks, now)
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

// now is the time of an item, when a window makes it matter.
func (b *Batcher[T, R]) now() time.Time {
	if b.cfg.Window == 0 {
		return time.Time{}
	}
	return time.Now()
}

// keepsRates reports whether the Batcher measures each key's rate, and so
// remembers keys between batches.
func (b *Batcher[T, R]) keepsRates() bool { return b.cfg.Mode == Adaptive && b.cfg.Window > 0 }

// add appends an item that came at now to the pending batch of key, first
// flushing that batch if the item would take it past MaxBytes. Called
// with mu held.
func (b *Batcher[T, R]) add(key string, item T, size int, done func(R, error), now time.Time) *keyState[T, R] {
	ks := b.keys[key]
	if ks == nil {
		b.forgetIdle(now)
		ks = &keyState[T, R]{}
		b.keys[key] = ks
	}
	if b.keepsRates() {
		ks.rate.add(now, b.horizon)
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
		ks.pending = &group[T, R]{buf: buf, opened: now, done: make(chan struct{})}
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

// forgetIdle forgets, at most once every sweepEvery horizons, the keys
// with nothing pending or under way whose rate has faded to nothing, so
// that the map holds the keys in use. Called with mu held.
func (b *Batcher[T, R]) forgetIdle(now time.Time) {
	if !b.keepsRates() || now.Sub(b.swept) < sweepEvery*b.horizon {
		return
	}
	b.swept = now
	for key, ks := range b.keys {
		if ks.pending == nil && ks.inFlight == 0 && now.Sub(ks.rate.at) > sweepEvery*b.horizon {
			delete(b.keys, key)
		}
	}
}

// settle decides the fate of key's pending batch, just after an item came
// at now: flushed now if full; left to gather until its window ends while
// it waits (see waits); else taken by a new flush at once, whether or not
// a flush of key is under way. Called with mu held.
func (b *Batcher[T, R]) settle(key string, ks *keyState[T, R], now time.Time) {
	g := ks.pending
	switch {
	case b.full(g):
		b.launch(key, ks)
	case ks.taking:
		// About to be taken.
	case !b.waits(ks, g, now):
		b.take(key, ks)
	case b.cfg.Mode == Adaptive:
		// Each item puts off the moment the key counts as quiet.
		g.quietAt = now.Add(quietAfter(ks.rate.recent(now, b.horizon), b.horizon))
		b.arm(key, g, now)
	case g.timer == nil:
		b.arm(key, g, now)
	}
}

// arm sets g's timer to the end of its window or, if sooner, its quietAt.
// Called with mu held.
func (b *Batcher[T, R]) arm(key string, g *group[T, R], now time.Time) {
	at := g.opened.Add(b.cfg.Window)
	if !g.quietAt.IsZero() && g.quietAt.Before(at) {
		at = g.quietAt
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(at.Sub(now), func() { b.expire(key, g) })
		return
	}
	g.timer.Reset(at.Sub(now))
}

// waits reports whether key's pending batch g, not full, waits at now for
// more items: in Linger mode until its window ends; in Adaptive mode while
// the rest of its window is expected to bring more (worthWaiting), at the
// rate of the key's items before the one that just came.
func (b *Batcher[T, R]) waits(ks *keyState[T, R], g *group[T, R], now time.Time) bool {
	left := g.opened.Add(b.cfg.Window).Sub(now)
	if b.cfg.Mode == Linger || left <= 0 {
		return left > 0
	}
	return worthWaiting(ks.rate.recent(now, b.horizon)-1, b.horizon, left)
}

// Waiting reports whether key has a batch waiting for its window, which
// an item submitted now would join.
func (b *Batcher[T, R]) Waiting(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	return ks != nil && ks.pending != nil && ks.pending.timer != nil && !ks.taking
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

// expire flushes a batch whose window ended or whose key went quiet,
// unless it went already; a timer that fired before either, its reset
// having come too late, is set again.
func (b *Batcher[T, R]) expire(key string, g *group[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil || ks.pending != g {
		return
	}
	now := time.Now()
	if now.Before(g.opened.Add(b.cfg.Window)) && (g.quietAt.IsZero() || now.Before(g.quietAt)) {
		b.arm(key, g, now)
		return
	}
	b.launch(key, ks)
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

// returned notes that a flush of key returned. Forgetting an idle key
// keeps the map to the keys in use; a key whose rate is measured is kept
// until it fades (forgetIdle).
func (b *Batcher[T, R]) returned(key string, ks *keyState[T, R]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks.inFlight--
	if ks.inFlight == 0 && ks.pending == nil && b.keys[key] == ks && !b.keepsRates() {
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
