package consumer

import (
	"context"
	"sync"
)

// liveState tracks the latest receive of every live queue, which says how
// much capacity the backlog may take (backlogShare).
type liveState struct {
	mu     sync.Mutex
	latest map[string]fill // queue → its latest receive; absent: not yet polled
	n      int             // number of live queues
	full   int             // live queues whose latest receive came back full
	polled chan struct{}   // closed once every live queue was polled
}

// fill is how a receive came back.
type fill int

const (
	fillEmpty   fill = iota // no message
	fillPartial             // fewer messages than it had slots for
	fillFull                // as many as it had slots for: the queue may hold more
)

func newLiveState(n int) *liveState {
	return &liveState{latest: make(map[string]fill, n), n: n, polled: make(chan struct{})}
}

// set records the receive of got messages with slots for most from a live
// queue.
func (s *liveState) set(q string, got, most int) {
	f := fillPartial
	switch {
	case got == 0:
		f = fillEmpty
	case got >= most:
		f = fillFull
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	was, seen := s.latest[q]
	if seen && was == fillFull {
		s.full--
	}
	if f == fillFull {
		s.full++
	}
	s.latest[q] = f
	if !seen && len(s.latest) == s.n {
		close(s.polled)
	}
}

// isIdle reports whether every live queue was polled and its latest
// receive came back empty ("caught up").
func (s *liveState) isIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle()
}

func (s *liveState) idle() bool {
	if len(s.latest) < s.n {
		return false
	}
	for _, f := range s.latest {
		if f != fillEmpty {
			return false
		}
	}
	return true
}

// backlogShare is how much of the capacity the live and overflow work
// leaves the backlog may take: all of it while the live queues are caught
// up; none while the latest receive of a live queue came back full (the
// queue may hold more: the capacity is not spare); otherwise half.
func (s *liveState) backlogShare() share {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.idle():
		return shareAll
	case s.full > 0 || len(s.latest) < s.n:
		return shareNone
	}
	return shareHalf
}

// waitPolled waits until every live queue was polled once, or ctx ends:
// until then, what capacity is spare is not known.
func (s *liveState) waitPolled(ctx context.Context) error {
	select {
	case <-s.polled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
