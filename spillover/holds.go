package spillover

import (
	"slices"
	"sync"
)

// holds counts, per limit key, the messages this worker holds for a
// moment rather than spill (consumer.Hold), and wakes those waiting for
// a concurrency slot, one per slot given back, the longest held first.
type holds struct {
	mu    sync.Mutex
	m     map[string]*held
	total int // messages held, every key
}

type held struct {
	n       int             // messages held
	waiting []chan struct{} // of those not woken yet, oldest first; closed to wake one
}

func newHolds() *holds { return &holds{m: make(map[string]*held)} }

// count returns the number of messages held for key.
func (h *holds) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil {
		return e.n
	}
	return 0
}

// take counts one more message held for key if fewer than most are, and
// fewer in all than spare, the worker's free slots: so that holds take
// at most about half of the slots the other work leaves. It returns the
// channel closed when a slot of key given back wakes this hold and the
// function that ends the hold; ok is false when no more may be held.
func (h *holds) take(key string, most, spare int) (wake <-chan struct{}, end func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total >= spare {
		return nil, nil, false
	}
	e := h.m[key]
	if e == nil {
		e = &held{}
		h.m[key] = e
	}
	if e.n >= most {
		return nil, nil, false
	}
	e.n++
	h.total++
	c := make(chan struct{})
	e.waiting = append(e.waiting, c)
	var once sync.Once
	return c, func() { once.Do(func() { h.end(key, c) }) }, true
}

// end counts one message held for key fewer, c its wake channel; a key
// with none is forgotten.
func (h *holds) end(key string, c chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[key]
	if e == nil {
		return
	}
	h.total--
	if i := slices.Index(e.waiting, c); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
	}
	if e.n--; e.n <= 0 {
		delete(h.m, key)
	}
}

// freed wakes up to n of the messages held for key, the longest held
// first: n slots of it were given back. It returns how many it woke.
// Waking every message held for a slot of a busy tenant at each slot
// given back set them all asking for the one slot at once.
func (h *holds) freed(key string, n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[key]
	if e == nil {
		return 0
	}
	woke := min(n, len(e.waiting))
	for _, c := range e.waiting[:woke] {
		close(c)
	}
	e.waiting = slices.Delete(e.waiting, 0, woke)
	return woke
}
