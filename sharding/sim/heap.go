package sim

// Event kinds. At equal times events run in this order, then by id, so
// that a run never depends on the heap's internals.
const (
	evDone    uint8 = iota // a consumer slot finished its message
	evPoll                 // the gateway reads the queues' depths
	evArrival              // a tenant sends a message
)

type event struct {
	t    float64 // seconds since the start
	kind uint8
	id   int32 // the slot or the tenant
}

func (a event) before(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.id < b.id
}

// eventHeap is a binary min-heap of events, written out rather than through
// container/heap to keep the hot loop free of interface calls.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].before(s[l]) {
			m = r
		}
		if !s[m].before(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// message is a message in a queue or in service.
type message struct {
	enq    float64 // send time
	svc    float32 // service time it will take, seconds
	tenant int32
}

// fifo is a queue of messages.
type fifo struct {
	buf  []message
	head int
}

func (f *fifo) len() int { return len(f.buf) - f.head }

func (f *fifo) push(m message) { f.buf = append(f.buf, m) }

func (f *fifo) pop() message {
	m := f.buf[f.head]
	f.head++
	if f.head >= 1024 && f.head*2 >= len(f.buf) {
		n := copy(f.buf, f.buf[f.head:])
		f.buf = f.buf[:n]
		f.head = 0
	}
	return m
}
