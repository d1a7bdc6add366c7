package spillover

import "sync"

// holds counts, per limit key, the messages this worker holds for a
// moment rather than spill (consumer.Hold), and wakes those waiting for
// a concurrency slot when a job of their tenant ends here.
type holds struct {
	mu    sync.Mutex
	m     map[string]*held
	total int // messages held, every key
}

type held struct {
	n     int           // messages held
	freed chan struct{} // closed when a slot of the key is given back here
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
// channel closed at the next slot of key given back here and the
// function that ends the hold; ok is false when no more may be held.
func (h *holds) take(key string, most, spare int) (wake <-chan struct{}, end func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total >= spare {
		return nil, nil, false
	}
	e := h.m[key]
	if e == nil {
		e = &held{freed: make(chan struct{})}
		h.m[key] = e
	}
	if e.n >= most {
		return nil, nil, false
	}
	e.n++
	h.total++
	var once sync.Once
	return e.freed, func() { once.Do(func() { h.end(key) }) }, true
}

// end counts one message held for key fewer; a key with none is
// forgotten.
func (h *holds) end(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil {
		h.total--
		if e.n--; e.n <= 0 {
			delete(h.m, key)
		}
	}
}

// freed wakes the messages held for key: a slot of it was given back.
func (h *holds) freed(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil {
		close(e.freed)
		e.freed = make(chan struct{})
	}
}
