package queue

import (
	"sync"
	"time"
)

// memQueue is one queue of a Memory backend. Its messages are in one of
// three places: the visible FIFO (ready to receive, in the order they became
// visible), the pending heap (delayed or in flight, ordered by the time they
// become visible), or nowhere (deleted, expired or moved to the dead-letter
// queue). byKey indexes every message the queue holds, for receipt handles.
type memQueue struct {
	name string

	mu      sync.Mutex
	attrs   queueAttrs
	visible fifo
	pending dueHeap
	byKey   map[uint64]*message

	nVisible, nInFlight, nDelayed int
	scheduled                     uint64 // counts schedule calls; orders equal due times

	// wake is closed, and cleared, when a message becomes visible or a due
	// time moves before wakeBy, so that long polls re-check at once. It is
	// made only when a long poll waits. wakeBy is the latest time a waiting
	// poll re-checks by itself (its deadline, or the earliest due time it
	// saw); a message due later needs no wake-up, which spares waiting
	// polls one per receive when visibility timeouts outlast their waits.
	wake   chan struct{}
	wakeBy time.Time
}

// queueAttrs are the normalised attributes of a queue (Spec with defaults).
type queueAttrs struct {
	visibility  time.Duration
	delay       time.Duration
	maxSize     int
	retention   time.Duration
	deadLetter  string
	maxReceives int
}

func newMemQueue(name string, attrs queueAttrs) *memQueue {
	return &memQueue{name: name, attrs: attrs, byKey: make(map[uint64]*message)}
}

type msgState uint8

const (
	stateGone     msgState = iota // deleted, expired or moved away
	stateVisible                  // in the visible FIFO
	stateDelayed                  // in the pending heap, never yet visible
	stateInFlight                 // in the pending heap, received
)

// message is the queue's own copy of a message. body and attrs are never
// changed after Send, so they may be shared with a Message being built, but
// attrs is cloned before it reaches a caller.
type message struct {
	key   uint64 // unique within the Memory; first half of a receipt handle
	id    string
	body  string
	attrs map[string]string
	group string // Entry.GroupID

	sentAt          time.Time
	firstReceivedAt time.Time
	receivedAt      time.Time // latest receive; visibility cannot pass it + MaxVisibility
	receives        int
	receipt         uint64 // nonce of the current receipt handle; 0 before the first receive

	state msgState
	due   time.Time // when a pending message becomes visible
	order uint64    // when it was scheduled, among messages due at the same time
	index int       // position in the pending heap
}

// wakeChan returns the channel a long poll waits on until next at the
// latest. Call with mu held.
func (q *memQueue) wakeChan(next time.Time) <-chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{})
	}
	if next.After(q.wakeBy) {
		q.wakeBy = next
	}
	return q.wake
}

// notify wakes every waiting long poll. Call with mu held.
func (q *memQueue) notify() {
	if q.wake != nil {
		close(q.wake)
		q.wake, q.wakeBy = nil, time.Time{}
	}
}

// notifyDue wakes the waiting long polls if msg, just put on the pending
// heap or moved on it, is the earliest pending message and due before one
// of them would re-check by itself. Call with mu held.
func (q *memQueue) notifyDue(msg *message) {
	if msg.index == 0 && msg.due.Before(q.wakeBy) {
		q.notify()
	}
}

// expired reports whether msg has outlived the queue's retention period.
func (q *memQueue) expired(msg *message, now time.Time) bool {
	return now.Sub(msg.sentAt) >= q.attrs.retention
}

// makeVisible appends msg to the visible FIFO. Call with mu held.
func (q *memQueue) makeVisible(msg *message) {
	msg.state = stateVisible
	q.visible.push(msg)
	q.nVisible++
	q.notify()
}

// schedule puts msg on the pending heap, due at due, in state st. Call with
// mu held.
func (q *memQueue) schedule(msg *message, st msgState, due time.Time) {
	msg.state = st
	q.scheduled++
	msg.due, msg.order = due, q.scheduled
	if st == stateDelayed {
		q.nDelayed++
	} else {
		q.nInFlight++
	}
	q.pending.push(msg)
	q.notifyDue(msg)
}

// reschedule sets a new due time for a pending msg. Call with mu held.
func (q *memQueue) reschedule(msg *message, due time.Time) {
	q.scheduled++
	msg.due, msg.order = due, q.scheduled
	q.pending.fix(msg.index)
	q.notifyDue(msg)
}

// unschedule takes a pending msg off the heap. Call with mu held.
func (q *memQueue) unschedule(msg *message) {
	q.pending.remove(msg.index)
	if msg.state == stateDelayed {
		q.nDelayed--
	} else {
		q.nInFlight--
	}
}

// remove takes msg out of the queue for good. A visible message stays in the
// FIFO until a receive skips it. Call with mu held.
func (q *memQueue) remove(msg *message) {
	switch msg.state {
	case stateVisible:
		q.nVisible--
	case stateDelayed, stateInFlight:
		q.unschedule(msg)
	}
	msg.state = stateGone
	delete(q.byKey, msg.key)
}

// promote makes visible every pending message that is due, and drops the
// ones whose retention has passed. It returns how many expired. Call with mu
// held.
func (q *memQueue) promote(now time.Time) (expired int) {
	for q.pending.len() > 0 {
		msg := q.pending.min()
		if msg.due.After(now) {
			break
		}
		q.unschedule(msg)
		if q.expired(msg, now) {
			msg.state = stateGone
			delete(q.byKey, msg.key)
			expired++
			continue
		}
		q.makeVisible(msg)
	}
	return expired
}

// nextDue returns the earliest due time of a pending message, if any. Call
// with mu held.
func (q *memQueue) nextDue() (time.Time, bool) {
	if q.pending.len() == 0 {
		return time.Time{}, false
	}
	return q.pending.min().due, true
}

// fifo is a queue of messages on a slice; popped slots are reclaimed by
// moving the tail down once at least half the slice is dead.
type fifo struct {
	buf  []*message
	head int
}

func (f *fifo) push(msg *message) { f.buf = append(f.buf, msg) }

// pop returns the oldest message, or nil when the FIFO is empty.
func (f *fifo) pop() *message {
	if f.head == len(f.buf) {
		return nil
	}
	msg := f.buf[f.head]
	f.buf[f.head] = nil
	f.head++
	switch {
	case f.head == len(f.buf):
		f.buf, f.head = f.buf[:0], 0
	case f.head >= 64 && 2*f.head >= len(f.buf):
		n := copy(f.buf, f.buf[f.head:])
		clear(f.buf[n:])
		f.buf, f.head = f.buf[:n], 0
	}
	return msg
}

func (f *fifo) len() int { return len(f.buf) - f.head }

// dueHeap is an indexed binary min-heap of messages by due time, then by the
// order they were scheduled in, so that removal and re-keying are O(log n) without leaving
// stale entries behind.
type dueHeap []*message

func (h dueHeap) len() int      { return len(h) }
func (h dueHeap) min() *message { return h[0] }
func (h dueHeap) less(i, j int) bool {
	if c := h[i].due.Compare(h[j].due); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}

func (h dueHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *dueHeap) push(msg *message) {
	msg.index = len(*h)
	*h = append(*h, msg)
	h.up(msg.index)
}

// remove takes the message at index i off the heap.
func (h *dueHeap) remove(i int) {
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last].index = -1
	(*h)[last] = nil
	*h = (*h)[:last]
	if i != last {
		h.fix(i)
	}
}

// fix restores the heap after the due time of the message at i changed.
func (h dueHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h dueHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h dueHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
