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

// sink is the application behind the workers: it answers every push as
// the scenario says, after the tenant's processing time, with 500 for
// poison messages until the dead letters are redriven at the end, and
// tells its pushLog of each push. In the harness's own process (newSink)
// the log is a recorder; as a process of its own (ServeApp) it is a stream
// of events that an appProcess in the harness turns back into a recorder.
type sink struct {
	work      map[string]time.Duration // tenant → processing time
	fixed     atomic.Bool              // poison is answered 200 from now on, and deliveries are marked Redriven
	behaviour atomic.Int32             // a sinkBehaviour
	log       pushLog
	*recorder               // the log, when it is one; nil in an app process
	quit      chan struct{} // closed by Stop: hanging pushes end
	stopOnce  sync.Once
	stopErr   error

	ln   net.Listener
	srv  *http.Server
	done chan error
}

var _ http.Handler = (*sink)(nil)

// pushLog is told of each push: begin when it arrives, before anything
// else; end with what happened, once the answer is decided and before
// net/http sends it, so that the worker cannot have its answer, and free
// the tenant's slot for another push, while this one still counts.
type pushLog interface {
	begin(tenant string)
	end(d Delivery)
}

// recorder keeps the pushes told to it: every delivery, the pushes in
// progress, and each tenant's most at once (a fleet-wide concurrency limit
// is checked where it matters, at the application).
type recorder struct {
	inflight atomic.Int64
	// tenants count each tenant's pushes in progress, whichever worker
	// sent them, and the most at once.
	tenants map[string]*inFlight

	mu         sync.Mutex
	deliveries []Delivery
	recorded   chan struct{} // closed and replaced at each delivery recorded
}

func newRecorder(tenants []Tenant) *recorder {
	r := &recorder{recorded: make(chan struct{}), tenants: make(map[string]*inFlight, len(tenants))}
	for _, t := range tenants {
		r.tenants[t.ID] = &inFlight{}
	}
	return r
}

func (r *recorder) begin(tenant string) {
	r.inflight.Add(1)
	if c := r.tenants[tenant]; c != nil {
		c.enter()
	}
}

func (r *recorder) end(d Delivery) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	close(r.recorded)
	r.recorded = make(chan struct{})
	r.mu.Unlock()
	if c := r.tenants[d.Tenant]; c != nil {
		c.leave()
	}
	r.inflight.Add(-1)
}

// newSink listens on a free loopback port; its log is a recorder.
func newSink(tenants []Tenant) (*sink, error) {
	work := make(map[string]time.Duration, len(tenants))
	for _, t := range tenants {
		work[t.ID] = t.Work
	}
	rec := newRecorder(tenants)
	s, err := listenSink(work, rec)
	if err != nil {
		return nil, err
	}
	s.recorder = rec
	return s, nil
}

// listenSink listens on a free loopback port for a sink of the processing
// times in work, telling log of each push.
func listenSink(work map[string]time.Duration, log pushLog) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	s := &sink{work: work, log: log, ln: ln, done: make(chan error, 1), quit: make(chan struct{})}
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
// pushes end at once. It is safe to call more than once.
func (s *sink) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		close(s.quit)
		s.stopErr = s.srv.Shutdown(ctx)
		if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) {
			s.stopErr = errors.Join(s.stopErr, serveErr)
		}
	})
	return s.stopErr
}

// fix makes the sink answer 200 to every push from now on and mark each
// as redriven.
func (s *sink) fix(context.Context) error {
	s.fixed.Store(true)
	return nil
}

// behave makes the sink answer every push as b from now on.
func (s *sink) behave(b sinkBehaviour) { s.behaviour.Store(int32(b)) }

// busy returns the number of pushes being answered.
func (r *recorder) busy() int64 { return r.inflight.Load() }

// maxInFlight returns, for each tenant, the most of its pushes the sink
// has been answering at once.
func (r *recorder) maxInFlight() map[string]int64 {
	m := make(map[string]int64, len(r.tenants))
	for id, c := range r.tenants {
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
func (r *recorder) snapshot() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := Delivery{Start: time.Now(), Seq: -1, Tenant: r.Header.Get(headerTenant), MsgID: r.Header.Get(headerMsgid),
		FirstReceivedAt: r.Header.Get(headerFirstRecv)}
	s.log.begin(d.Tenant)
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
	s.log.end(d)
}

// waitDelivery waits at most limit for the first delivery of message seq
// to be recorded, and returns it; ok is false if none came.
func (r *recorder) waitDelivery(ctx context.Context, seq int64, limit time.Duration) (d Delivery, ok bool, err error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for seen := 0; ; {
		r.mu.Lock()
		for _, d := range r.deliveries[seen:] {
			if d.Seq == seq {
				r.mu.Unlock()
				return d, true, nil
			}
		}
		seen = len(r.deliveries)
		recorded := r.recorded
		r.mu.Unlock()
		select {
		case <-recorded:
		case <-t.C:
			return Delivery{}, false, nil
		case <-ctx.Done():
			return Delivery{}, false, ctx.Err()
		}
	}
}
