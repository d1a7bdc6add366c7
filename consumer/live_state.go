package consumer

import (
	"context"
	"sync"
)

// liveState tracks the latest receive of every live queue the worker
// watches, which says how much capacity the backlog may take
// (backlogShare).
type liveState struct {
	mu      sync.Mutex
	watched map[string]bool // the live queues the worker receives from
	latest  map[string]fill // watched queue → its latest receive; absent: not yet polled
	full    int             // watched queues whose latest receive came back full
	polled  chan struct{}   // closed once every watched queue was polled
	closed  bool            // polled is closed
}

// fill is how a receive came back.
type fill int

const (
	fillEmpty   fill = iota // no message
	fillPartial             // fewer messages than it had slots for
	fillFull                // as many as it had slots for: the queue may hold more
)

func newLiveState() *liveState {
	return &liveState{watched: map[string]bool{}, latest: map[string]fill{}, polled: make(chan struct{})}
}

// watch makes queues the live queues the worker receives from. Those it
// no longer watches are forgotten; those it starts to watch count as not
// yet polled, so that the backlog takes no capacity on their account until
// they were.
func (s *liveState) watch(queues []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.watched)
	for _, q := range queues {
		s.watched[q] = true
	}
	for q, f := range s.latest {
		if !s.watched[q] {
			if f == fillFull {
				s.full--
			}
			delete(s.latest, q)
		}
	}
	s.checkPolled()
}

// checkPolled closes polled once every watched queue was polled. Call
// with mu held.
func (s *liveState) checkPolled() {
	if !s.closed && len(s.latest) == len(s.watched) {
		s.closed = true
		close(s.polled)
	}
}

// set records the receive of got messages with slots for most from a live
// queue; a queue no longer watched is ignored.
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
	if !s.watched[q] {
		return
	}
	if s.latest[q] == fillFull {
		s.full--
	}
	if f == fillFull {
		s.full++
	}
	s.latest[q] = f
	s.checkPolled()
}

// isIdle reports whether every watched live queue was polled and its
// latest receive came back empty ("caught up"); a worker that watches no
// live queue is idle.
func (s *liveState) isIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle()
}

func (s *liveState) idle() bool {
	if len(s.latest) < len(s.watched) {
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
// queue may hold more: the capacity is not spare); otherwise all but a
// tenth of the worker's slots (shareMost), room for the next fresh
// messages.
func (s *liveState) backlogShare() share {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.idle():
		return shareAll
	case s.full > 0 || len(s.latest) < len(s.watched):
		return shareNone
	}
	return shareMost
}

// waitPolled waits until every watched live queue was polled once, or
// ctx ends: until then, what capacity is spare is not known.
func (s *liveState) waitPolled(ctx context.Context) error {
	select {
	case <-s.polled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
