package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Attributes the harness puts on every message, read back by the sink from
// the worker's X-Aws-Sqsd-Attr- headers. Message ids change when a
// message moves between queues, so the harness numbers messages itself.
const (
	AttrSeq    = "lt-seq"  // the message's number in the run
	AttrKind   = "lt-kind" // "poison" for a message the sink always fails
	kindPoison = "poison"
)

// Headers of the worker's push that the sink reads.
const (
	headerTenant       = "X-Fairq-Tenant"
	headerEnqueuedAt   = "X-Fairq-Enqueued-At"
	headerMsgid        = "X-Aws-Sqsd-Msgid"
	headerFirstRecv    = "X-Aws-Sqsd-First-Received-At"
	headerReceiveCount = "X-Aws-Sqsd-Receive-Count"
	headerAttr         = "X-Aws-Sqsd-Attr-"
	enqueuedAtFormat   = "2006-01-02T15:04:05.000Z"
)

// Delivery is one push of a message by a worker to the sink.
type Delivery struct {
	// Seq is the message's number (attribute lt-seq), -1 when it had none.
	Seq    int64
	Tenant string
	// MsgID is the SQS message id of this copy (X-Aws-Sqsd-Msgid).
	MsgID string
	// FirstReceivedAt is X-Aws-Sqsd-First-Received-At as the worker sent
	// it: the same on every delivery of a message whose identity holds.
	FirstReceivedAt string
	// EnqueuedAt is when the gateway accepted the message
	// (X-Fairq-Enqueued-At, to the millisecond).
	EnqueuedAt time.Time
	// Start is when the push arrived, End when the sink answered.
	Start, End time.Time
	// ReceiveCount is X-Aws-Sqsd-Receive-Count: deliveries across moves.
	ReceiveCount int
	// Status is the sink's answer; 0 when the worker hung up first.
	Status int
	// Redriven marks a delivery after the dead-letter redrive at the end
	// of the run, when the sink answers 200 to everything: each is a
	// message that had been dead-lettered.
	Redriven bool
}

// OK reports whether the delivery succeeded, so that the worker deleted
// the message.
func (d Delivery) OK() bool { return d.Status >= 200 && d.Status < 300 }

// sinkBehaviour is how the sink answers every push for a while, whatever
// the message: a fault of the application.
type sinkBehaviour int32

const (
	// sinkNormal answers after the tenant's processing time.
	sinkNormal sinkBehaviour = iota
	// sinkFailing answers 500 at once.
	sinkFailing
	// sinkHanging never answers: it waits for the worker to hang up (its
	// inactivity_timeout) or for the sink to stop.
	sinkHanging
)

// sink is the application behind the workers: it records every push and
// answers as the scenario says, after the tenant's processing time, with
// 500 for poison messages until the dead letters are redriven at the end.
type sink struct {
	work      map[string]time.Duration // tenant → processing time
	fixed     atomic.Bool              // poison is answered 200 from now on, and deliveries are marked Redriven
	behaviour atomic.Int32             // a sinkBehaviour
	inflight  atomic.Int64
	// tenants count each tenant's pushes in progress here, whichever
	// worker sent them, and the most at once: a fleet-wide concurrency
	// limit is checked where it matters, at the application.
	tenants  map[string]*inFlight
	quit     chan struct{} // closed by Stop: hanging pushes end
	quitOnce sync.Once

	mu         sync.Mutex
	deliveries []Delivery
	recorded   chan struct{} // closed and replaced at each delivery recorded

	ln   net.Listener
	srv  *http.Server
	done chan error
}

var _ http.Handler = (*sink)(nil)

// newSink listens on a free loopback port.
func newSink(tenants []Tenant) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	s := &sink{work: make(map[string]time.Duration, len(tenants)), ln: ln, done: make(chan error, 1), quit: make(chan struct{}),
		recorded: make(chan struct{}), tenants: make(map[string]*inFlight, len(tenants))}
	for _, t := range tenants {
		s.work[t.ID] = t.Work
		s.tenants[t.ID] = &inFlight{}
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// url is the push URL of the workers.
func (s *sink) url() string { return "http://" + s.ln.Addr().String() + "/" }

// Start serves until Stop.
func (s *sink) Start(context.Context) error {
	go func() { s.done <- s.srv.Serve(s.ln) }()
	return nil
}

// Stop stops serving, waiting for running pushes until ctx ends; hanging
// pushes end at once.
func (s *sink) Stop(ctx context.Context) error {
	s.quitOnce.Do(func() { close(s.quit) })
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// fix makes the sink answer 200 to every push from now on and mark each
// as redriven.
func (s *sink) fix() { s.fixed.Store(true) }

// behave makes the sink answer every push as b from now on.
func (s *sink) behave(b sinkBehaviour) { s.behaviour.Store(int32(b)) }

// busy returns the number of pushes being answered.
func (s *sink) busy() int64 { return s.inflight.Load() }

// maxInFlight returns, for each tenant, the most of its pushes the sink
// has been answering at once.
func (s *sink) maxInFlight() map[string]int64 {
	m := make(map[string]int64, len(s.tenants))
	for id, c := range s.tenants {
		m[id] = c.peak.Load()
	}
	return m
}

// inFlight counts one tenant's pushes in progress and its peak.
type inFlight struct {
	now, peak atomic.Int64
}

// enter counts a push in and raises the peak if it is one; leave counts it
// out.
func (c *inFlight) enter() {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *inFlight) leave() { c.now.Add(-1) }

// snapshot returns a copy of the deliveries recorded so far.
func (s *sink) snapshot() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	d := Delivery{Start: time.Now(), Seq: -1, Tenant: r.Header.Get(headerTenant), MsgID: r.Header.Get(headerMsgid),
		FirstReceivedAt: r.Header.Get(headerFirstRecv)}
	// Counted out only once the answer is decided, before net/http sends
	// it: the worker cannot have its answer, and free the tenant's slot
	// for another push, while this one still counts.
	if c := s.tenants[d.Tenant]; c != nil {
		c.enter()
		defer c.leave()
	}
	io.Copy(io.Discard, r.Body)
	if v, err := strconv.ParseInt(r.Header.Get(headerAttr+AttrSeq), 10, 64); err == nil {
		d.Seq = v
	}
	if t, err := time.Parse(enqueuedAtFormat, r.Header.Get(headerEnqueuedAt)); err == nil {
		d.EnqueuedAt = t
	}
	d.ReceiveCount, _ = strconv.Atoi(r.Header.Get(headerReceiveCount))
	d.Redriven = s.fixed.Load()
	poison := r.Header.Get(headerAttr+AttrKind) == kindPoison && !d.Redriven

	switch sinkBehaviour(s.behaviour.Load()) {
	case sinkFailing:
		d.Status = http.StatusInternalServerError
		w.WriteHeader(d.Status)
	case sinkHanging:
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
	default:
		// The work: the tenant's processing time, cut short if the
		// worker hangs up.
		t := time.NewTimer(s.work[d.Tenant])
		select {
		case <-t.C:
			d.Status = http.StatusOK
			if poison {
				d.Status = http.StatusInternalServerError
			}
			w.WriteHeader(d.Status)
		case <-r.Context().Done():
			t.Stop()
		}
	}
	d.End = time.Now()
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	close(s.recorded)
	s.recorded = make(chan struct{})
	s.mu.Unlock()
}

// waitDelivery waits at most limit for the first delivery of message seq
// to be recorded, and returns it; ok is false if none came.
func (s *sink) waitDelivery(ctx context.Context, seq int64, limit time.Duration) (d Delivery, ok bool, err error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for seen := 0; ; {
		s.mu.Lock()
		for _, d := range s.deliveries[seen:] {
			if d.Seq == seq {
				s.mu.Unlock()
				return d, true, nil
			}
		}
		seen = len(s.deliveries)
		recorded := s.recorded
		s.mu.Unlock()
		select {
		case <-recorded:
		case <-t.C:
			return Delivery{}, false, nil
		case <-ctx.Done():
			return Delivery{}, false, ctx.Err()
		}
	}
}
