package consumer

import (
	"context"
	"slices"
	"sync"
)

// prio is the priority of a slot reservation.
type prio int

const (
	prioLive     prio = iota // live queues, while the pool is not caught up
	prioOverflow             // the overflow queue: what live leaves
	prioIdle                 // the backlog, and live queues watched while the pool is caught up
	nPrios
)

// slots counts the worker's free slots (Config.Connections). A poller
// reserves slots before it receives, so that the worker never holds more
// messages than it can run; each message received keeps its slot until its
// job ends, and the slots a receive did not fill are given back.
//
// Waiters are served strictly by priority, then first come first served: a
// waiter is served only when every waiter before it, at its priority and
// above, has been. So overflow gets only the capacity live loops leave, and
// a batch waiter is not overtaken by single ones.
type slots struct {
	mu      sync.Mutex
	size    int
	free    int
	waiters [nPrios][]*slotWaiter
}

type slotWaiter struct {
	need, max int
	got       chan int // size 1: the grant
}

func newSlots(n int) *slots { return &slots{size: n, free: n} }

// acquire reserves between need and max slots, waiting until at least need
// are free and every earlier waiter of its priority or above was served.
func (s *slots) acquire(ctx context.Context, c prio, need, max int) (int, error) {
	need = min(need, s.size, max)
	s.mu.Lock()
	if s.free >= need && s.noneWaiting(c) {
		n := min(s.free, max)
		s.free -= n
		s.mu.Unlock()
		return n, nil
	}
	w := &slotWaiter{need: need, max: max, got: make(chan int, 1)}
	s.waiters[c] = append(s.waiters[c], w)
	s.mu.Unlock()

	select {
	case n := <-w.got:
		return n, nil
	case <-ctx.Done():
		s.mu.Lock()
		i := slices.Index(s.waiters[c], w)
		if i < 0 { // granted meanwhile: give it back
			s.mu.Unlock()
			s.release(<-w.got)
			return 0, ctx.Err()
		}
		s.waiters[c] = slices.Delete(s.waiters[c], i, i+1)
		s.grant() // those behind it may now be served
		s.mu.Unlock()
		return 0, ctx.Err()
	}
}

// release gives n slots back.
func (s *slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.grant()
	s.mu.Unlock()
}

// grant serves waiters in order while slots allow. Call with mu held.
func (s *slots) grant() {
	for c := range nPrios {
		for len(s.waiters[c]) > 0 {
			w := s.waiters[c][0]
			if s.free < w.need {
				return
			}
			n := min(s.free, w.max)
			s.free -= n
			w.got <- n
			s.waiters[c][0] = nil
			s.waiters[c] = s.waiters[c][1:]
		}
	}
}

// noneWaiting reports whether no waiter of priority c or above waits. Call
// with mu held.
func (s *slots) noneWaiting(c prio) bool {
	for k := range c + 1 {
		if len(s.waiters[k]) > 0 {
			return false
		}
	}
	return true
}

// waiting returns how many loops of priority c or above wait for slots.
func (s *slots) waiting(c prio) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range c + 1 {
		n += len(s.waiters[k])
	}
	return n
}

// available returns the number of free slots.
func (s *slots) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}
