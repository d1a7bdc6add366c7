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
//
// A spare reservation (acquireSpare) is for work that must leave room for
// more urgent work: it takes no slot that would leave fewer than a tenth of
// all the slots (at least one) free (spareReserve). The backlog thus works
// the capacity fresh work leaves, but leaves room for the next burst of
// fresh messages (so never the last free slot). It left half of what
// fresh work left, before: the messages of the backlog held for their
// tenants' slots took most of that half, and after a 60 s outage the
// tenants whose old messages were deeper in the backlog queue drained at
// 27-34/s of their 40.
type slots struct {
	mu      sync.Mutex
	size    int
	free    int
	spare   int // held by spare reservations, until releaseSpare
	waiters [nPrios][]*slotWaiter
}

type slotWaiter struct {
	need, max int
	spare     bool         // a spare reservation
	share     func() share // for a spare reservation: how much of the capacity left it may hold now
	got       chan int     // size 1: the grant
}

// grantable returns how many slots w may take now: 0 if it must wait. Call
// with mu held.
func (s *slots) grantable(w *slotWaiter) int {
	free := s.free
	if w.spare {
		switch w.share() {
		case shareNone:
			return 0
		case shareMost:
			free = min(free, s.free-s.spareReserve())
		}
	}
	if free < w.need {
		return 0
	}
	return min(free, w.max)
}

// spareReserve is how many slots a spare reservation leaves free, under
// shareMost: a tenth of them, at least one.
func (s *slots) spareReserve() int { return max(1, s.size/10) }

// take reserves n slots for w. Call with mu held.
func (s *slots) take(w *slotWaiter, n int) {
	s.free -= n
	if w.spare {
		s.spare += n
	}
}

// share is how much of the capacity the others leave spare reservations
// may hold.
type share int

const (
	shareNone share = iota // none: wait
	shareMost              // all but spareReserve
	shareAll               // all of it
)

func newSlots(n int) *slots { return &slots{size: n, free: n} }

// acquire reserves between need and max slots, waiting until at least need
// are free and every earlier waiter of its priority or above was served.
func (s *slots) acquire(ctx context.Context, c prio, need, max int) (int, error) {
	return s.reserve(ctx, &slotWaiter{need: need, max: max}, c)
}

// acquireSpare is acquire for a spare reservation: it takes between need
// and max slots, as far as share allows at that time: none, as many as
// leave spareReserve slots free, or all that are free. It waits until it
// may take need; share is called with the slots locked, at each chance
// of a grant. Its slots are given back with releaseSpare.
func (s *slots) acquireSpare(ctx context.Context, c prio, need, max int, share func() share) (int, error) {
	return s.reserve(ctx, &slotWaiter{need: need, max: max, spare: true, share: share}, c)
}

func (s *slots) reserve(ctx context.Context, w *slotWaiter, c prio) (int, error) {
	w.need = max(1, min(w.need, s.size, w.max))
	s.mu.Lock()
	if n := s.grantable(w); n > 0 && s.noneWaiting(c) {
		s.take(w, n)
		s.mu.Unlock()
		return n, nil
	}
	w.got = make(chan int, 1)
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
			if n := <-w.got; w.spare {
				s.releaseSpare(n)
			} else {
				s.release(n)
			}
			return 0, ctx.Err()
		}
		s.waiters[c] = slices.Delete(s.waiters[c], i, i+1)
		s.grant() // those behind it may now be served
		s.mu.Unlock()
		return 0, ctx.Err()
	}
}

// release gives n slots of acquire back.
func (s *slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.grant()
	s.mu.Unlock()
}

// releaseSpare gives n slots of acquireSpare back.
func (s *slots) releaseSpare(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	s.spare -= n
	s.grant()
	s.mu.Unlock()
}

// grant serves waiters in order while slots allow. A spare waiter that
// may not take slots yet does not hold up those behind it. Call with mu
// held.
func (s *slots) grant() {
	for c := range nPrios {
		kept := s.waiters[c][:0]
		blocked := false
		for _, w := range s.waiters[c] {
			if !blocked {
				if n := s.grantable(w); n > 0 {
					s.take(w, n)
					w.got <- n
					continue
				}
				blocked = !w.spare
			}
			kept = append(kept, w)
		}
		clear(s.waiters[c][len(kept):])
		s.waiters[c] = kept
		if blocked {
			return
		}
	}
}

// noneWaiting reports whether no waiter of priority c or above waits,
// spare waiters aside (after a grant none of them may take slots). Call
// with mu held.
func (s *slots) noneWaiting(c prio) bool {
	for k := range c + 1 {
		for _, w := range s.waiters[k] {
			if !w.spare {
				return false
			}
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

// waitingLoops returns how many waiters for slots there are, spare ones
// aside: loops whose queue goes unwatched until they are served.
func (s *slots) waitingLoops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ws := range s.waiters {
		for _, w := range ws {
			if !w.spare {
				n++
			}
		}
	}
	return n
}

// available returns the number of free slots.
func (s *slots) available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}
