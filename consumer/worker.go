package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/queue"
)

// Defaults of Config, aws-sqsd's where it has the setting.
const (
	ConnectionsDefault            = 50
	VisibilityTimeoutDefault      = 30 * time.Second
	ErrorVisibilityTimeoutDefault = 300 * time.Second
	MaxRetriesDefault             = 10
	InactivityTimeoutDefault      = 180 * time.Second
	ReceiveWaitDefault            = queue.MaxWait
	BatchWindowDefault            = 20 * time.Millisecond
	ReceiveWindowDefault          = 50 * time.Millisecond
	BackoffBaseDefault            = time.Second
	ParkForDefault                = time.Hour
)

// Sentinel errors.
var (
	ErrInvalidConfig = errors.New("invalid consumer config")
	ErrStarted       = errors.New("worker already started")
	// ErrStopTimeout is returned by Stop when jobs are still running after
	// the grace period and the time given to release them; their
	// messages come back after their visibility timeout.
	ErrStopTimeout = errors.New("worker jobs did not end after the grace period")
)

// Backend is what the worker needs of a queue backend; queue.Backend
// satisfies it.
type Backend interface {
	Send(ctx context.Context, queue string, entries []queue.Entry) ([]queue.SendResult, error)
	Receive(ctx context.Context, queue string, opts queue.ReceiveOptions) ([]queue.Message, error)
	Delete(ctx context.Context, queue string, handles []string) ([]error, error)
	ChangeVisibility(ctx context.Context, queue string, changes []queue.VisibilityChange) ([]error, error)
}

var _ Backend = queue.Backend(nil)

// Config configures a Worker. The worker.* keys of the configuration file
// map to the fields of the same names; zero fields take the defaults above.
type Config struct {
	Backend Backend     // required
	Names   queue.Names // required: at least one live queue; an empty Overflow, Backlog or DLQ name turns that queue off
	// Handler runs the messages; required: a *Push, a *LogHandler or the
	// application's own. The Worker does not own it: whoever made it
	// closes it (Push.Close) after Stop.
	Handler Handler

	// Connections is the number of worker slots: messages held at once,
	// from receive to outcome (worker.connections).
	Connections int
	// VisibilityTimeout is the visibility of a received message, kept up
	// by the heartbeat while its job runs (worker.visibility_timeout).
	VisibilityTimeout time.Duration
	// ErrorVisibilityTimeout caps the backoff after a failure
	// (worker.error_visibility_timeout).
	ErrorVisibilityTimeout time.Duration
	// MaxRetries is the number of deliveries, counted across queue moves,
	// after which a failing message goes to the dead-letter queue
	// (worker.max_retries).
	MaxRetries int
	// InactivityTimeout bounds one job: the handler's context ends then,
	// and the attempt is a failure (worker.inactivity_timeout).
	InactivityTimeout time.Duration
	// Limiter decides per message whether it runs now, is put off or
	// moved, or is dropped: the per-tenant policy (package spillover:
	// rates, concurrency, drop and backlog ages). Nil runs everything.
	Limiter Limiter
	// Dedupe, if not nil, remembers the messages run (package dedupe):
	// before a message is pushed its id is claimed, and a copy of a
	// message that ran is deleted without a push
	// (fairq_worker_processed_total{outcome="duplicate"}). The claims'
	// leases are renewed by the heartbeat. A claim that fails (Redis
	// unreachable) runs the message: delivery stays at least once.
	Dedupe Deduper
	// Parking, if not nil, records the messages of paused tenants that the
	// worker parks (Verdict Park), so that a parking.Waker can wake them
	// at a resume; without it they wait out SQS's longest delay in turn.
	Parking Parker
	// ParkFor is how long a parked message stays invisible unless woken;
	// zero uses ParkForDefault.
	ParkFor time.Duration
	// Backlog is told when a message ends (see Backlog); nil keeps no
	// counts.
	Backlog Backlog
	// ObserveFunc, if not nil, is given the processing time of every job:
	// from the handler's start to its return, whatever the outcome,
	// periodic tasks included (fairq_worker_processing_seconds observes
	// the same). It feeds the autoscaling signals
	// (fleet.Autoscaling.Observe). It is called on the job's goroutine
	// and must not block.
	ObserveFunc func(time.Duration)

	// Fleet, if not nil, shares the live queues with the other workers of
	// the fleet (share.go, assign.go): the worker watches the queues for
	// which it ranks among the first WatchersPerQueue workers, follows the
	// fleet's changes every ShareInterval, helps with the queues of
	// saturated workers, and watches every queue while it is not in the
	// registry. Nil: it watches every live queue. The overflow and backlog
	// queues are watched by every worker either way.
	Fleet Fleet
	// WatchersPerQueue is the number of workers that watch each live
	// queue (worker.watchers_per_queue); 0, or as many as the fleet has
	// workers, makes every worker watch every queue.
	WatchersPerQueue int
	// ShareInterval is how often the worker looks at the fleet for a
	// change (the fleet itself learns of one at its heartbeat).
	ShareInterval time.Duration

	// ReceiveWait is the long-poll wait of a receive, at most 20 s.
	ReceiveWait time.Duration
	// BatchWindow is how long a delete, visibility change or move waits
	// for others to share its batch call.
	BatchWindow time.Duration
	// ReceiveWindow is how long a receive loop pauses after a receive
	// that brought fewer messages than it asked for, on a queue whose
	// messages come fast enough for the window to gather two or more
	// (40 a second at the default; a live queue's rate is measured over
	// about a second, so that one sender's burst does not make every
	// tenant on the queue wait), so that they gather into fuller
	// batches: fewer receives per message, at the price of up to this
	// much latency on a queue that is already busy (the first message on
	// an idle queue, and those of a slower queue, are received at once).
	// Negative turns it off.
	ReceiveWindow time.Duration
	// BackoffBase is the backoff after a first failure, before jitter;
	// it doubles with each attempt up to ErrorVisibilityTimeout.
	BackoffBase time.Duration
	// HeartbeatInterval is how often held messages are checked for
	// extension; default VisibilityTimeout/3.
	HeartbeatInterval time.Duration

	Logger     *slog.Logger          // nil: logs nothing
	Registerer prometheus.Registerer // nil: metrics are kept but not registered
	// NowFunc is the clock; default time.Now.
	NowFunc func() time.Time
	// RandFunc returns a uniform number in [0, 1) for backoff jitter;
	// default math/rand/v2.Float64.
	RandFunc func() float64
	// TracerProvider, when set, makes a span per delivery attempt and
	// hands its context to the Handler (see trace.go); nil makes none.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() Config {
	c.Connections = cmp.Or(c.Connections, ConnectionsDefault)
	c.VisibilityTimeout = cmp.Or(c.VisibilityTimeout, VisibilityTimeoutDefault)
	c.ErrorVisibilityTimeout = cmp.Or(c.ErrorVisibilityTimeout, ErrorVisibilityTimeoutDefault)
	c.MaxRetries = cmp.Or(c.MaxRetries, MaxRetriesDefault)
	c.InactivityTimeout = cmp.Or(c.InactivityTimeout, InactivityTimeoutDefault)
	c.ReceiveWait = cmp.Or(c.ReceiveWait, ReceiveWaitDefault)
	c.BatchWindow = cmp.Or(c.BatchWindow, BatchWindowDefault)
	c.ReceiveWindow = cmp.Or(c.ReceiveWindow, ReceiveWindowDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.ParkFor = cmp.Or(c.ParkFor, ParkForDefault)
	c.ShareInterval = cmp.Or(c.ShareInterval, ShareIntervalDefault)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, c.VisibilityTimeout/3)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Backlog == nil {
		c.Backlog = backlog.Off{}
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.RandFunc == nil {
		c.RandFunc = rand.Float64
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Backend == nil {
		bad("backend is nil")
	}
	if c.Handler == nil {
		bad("handler is nil")
	}
	if len(c.Names.Live) == 0 {
		bad("no live queues")
	}
	for _, n := range c.Names.Live {
		if n == "" {
			bad("empty live queue name")
		}
	}
	if c.Connections < 1 {
		bad("connections %d must be at least 1", c.Connections)
	}
	if c.MaxRetries < 1 {
		bad("max retries %d must be at least 1", c.MaxRetries)
	}
	if c.WatchersPerQueue < 0 || c.ShareInterval <= 0 {
		bad("watchers per queue %d must not be negative, and share interval %v must be positive", c.WatchersPerQueue, c.ShareInterval)
	}
	c.validateDurations(bad)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// validateDurations calls bad for each duration out of its range.
func (c Config) validateDurations(bad func(format string, args ...any)) {
	if c.VisibilityTimeout <= 0 || c.VisibilityTimeout > queue.MaxVisibility {
		bad("visibility timeout %v is outside (0, %v]", c.VisibilityTimeout, queue.MaxVisibility)
	}
	if c.ErrorVisibilityTimeout < 0 || c.ErrorVisibilityTimeout > queue.MaxVisibility {
		bad("error visibility timeout %v is outside [0, %v]", c.ErrorVisibilityTimeout, queue.MaxVisibility)
	}
	if c.InactivityTimeout <= 0 {
		bad("inactivity timeout %v must be positive", c.InactivityTimeout)
	}
	if c.ReceiveWait < 0 || c.ReceiveWait > queue.MaxWait {
		bad("receive wait %v is outside [0, %v]", c.ReceiveWait, queue.MaxWait)
	}
	if c.BatchWindow < 0 || c.BackoffBase <= 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.VisibilityTimeout {
		bad("batch window %v, backoff base %v and heartbeat interval %v (below the visibility timeout) must be positive",
			c.BatchWindow, c.BackoffBase, c.HeartbeatInterval)
	}
}

// errReleasing is the cause with which running jobs are cancelled when the
// grace period of Stop ends: their messages are given back.
var errReleasing = errors.New("worker stopping: grace period over")

// Worker is the consumer daemon: it receives messages from the live,
// overflow and backlog queues while it has free slots, applies the age
// checks and the Limiter, runs the Handler under a heartbeat, and applies
// the outcome. See the package documentation.
type Worker struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	tracer  trace.Tracer // nil: no tracing

	slots   *slots
	hb      *heartbeat
	loops   *pollers
	sharing *sharing

	// held counts the messages received whose slot is not given back;
	// saturated is set when it reaches Connections (Saturated).
	held      atomic.Int64
	saturated atomic.Bool

	deletes *batcher[string]
	changes *batcher[queue.VisibilityChange]
	sends   *batcher[queue.Entry]

	mu      sync.Mutex
	started bool
	kill    context.CancelFunc
	// runCtx lives until the worker is killed or has stopped.
	runCtx context.Context
	// receiveCtx is the context of receive calls (see receive): runCtx,
	// which a graceful stop lets them finish in, or on the in-memory
	// backend the receive loops' own, which ends when a stop begins.
	receiveCtx context.Context
	stopCh     chan context.Context // size 1: the grace of the first Stop
	done       chan struct{}        // closed when everything has ended

	jobs sync.WaitGroup
}

// New returns a Worker, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("consumer metrics: %w", err)
	}
	w := &Worker{
		cfg:     cfg,
		log:     cfg.Logger,
		metrics: m,
		tracer:  newTracer(cfg.TracerProvider),
		slots:   newSlots(cfg.Connections),
		loops:   newPollers(cfg),
		sharing: newSharing(cfg),
		stopCh:  make(chan context.Context, 1),
		done:    make(chan struct{}),
	}
	w.hb = newHeartbeat(cfg.Backend, cfg.VisibilityTimeout, cfg.HeartbeatInterval, cfg.NowFunc, w.log, m)
	w.hb.dedupe = cfg.Dedupe
	w.deletes = newBatcher(cfg.BatchWindow, w.deleteBatch)
	w.changes = newBatcher(cfg.BatchWindow, w.changeBatch)
	w.sends = newBatcher(cfg.BatchWindow, w.sendBatch)
	return w, nil
}

// Start starts receiving. The worker runs until Stop: ctx only carries
// values (a signal context ending on SIGTERM does not cut the running jobs
// short; Stop with a grace period is the way to end it).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return ErrStarted
	}
	w.started = true
	// kill abandons the worker as a crash would: receiving stops, running
	// jobs are cancelled and their messages left to come back after their
	// visibility timeout. Only tests use it, to play a crash.
	ctx, w.kill = context.WithCancel(context.WithoutCancel(ctx))
	w.runCtx = ctx

	pollCtx, stopPolling := context.WithCancel(ctx)
	w.receiveCtx = ctx
	if _, mem := w.cfg.Backend.(*queue.Memory); mem {
		w.receiveCtx = pollCtx
	}
	jobCtx, cancelJobs := context.WithCancelCause(ctx)
	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	ioCtx := context.WithoutCancel(ctx) // batch calls outlive a cancelled ctx: they finish what jobs decided

	w.deletes.start(ioCtx)
	w.changes.start(ioCtx)
	w.sends.start(ioCtx)
	heartbeatDone := make(chan struct{})
	go func() {
		defer close(heartbeatDone)
		w.hb.run(hbCtx)
	}()

	// Every worker watches the overflow and backlog queues: work spilled
	// or aged there is started by whichever worker has room. The live
	// queues it watches are its share of the pool, which follows the
	// fleet (share).
	var others []*poller
	if q := w.cfg.Names.Overflow; q != "" {
		others = append(others, w.newPoller(q, classOverflow))
	}
	if q := w.cfg.Names.Backlog; q != "" {
		others = append(others, w.newPoller(q, classBacklog))
	}
	w.rebalance(pollCtx, jobCtx, w.sharing.view(), others...)
	if w.sharing.dynamic() {
		w.loops.running.Add(1)
		go w.share(pollCtx, jobCtx)
	}

	// The supervisor owns the shutdown, in this order: stop issuing
	// receives, let those under way finish and give back what they bring;
	// let jobs finish within the grace period, then cancel the rest,
	// whose messages are given back (a push cancelled at visibility 0,
	// a message never pushed as a copy that keeps its attempts: see
	// job.giveBack); stop the heartbeat
	// once no job holds a message; flush the moves, then the visibility
	// changes, then the deletes (a move's send ends in a delete; the
	// Backlog, stopped after the worker, counts the messages they ended).
	go func() {
		defer close(w.done)
		var grace context.Context
		select {
		case <-ctx.Done():
		case grace = <-w.stopCh:
		}
		stopPolling()
		// The receives under way finish meanwhile (see receive), and what
		// they bring is given back; no job starts after the last loop
		// ended.
		jobsDone := make(chan struct{})
		go func() {
			w.loops.running.Wait()
			w.jobs.Wait()
			close(jobsDone)
		}()
		if grace != nil {
			select {
			case <-jobsDone:
			case <-grace.Done():
				cancelJobs(errReleasing)
			case <-ctx.Done():
			}
		}
		<-jobsDone
		cancelJobs(nil)
		stopHeartbeat()
		<-heartbeatDone
		w.sends.close()
		w.changes.close()
		w.deletes.close()
		w.kill() // releases the contexts
	}()
	return nil
}

// releaseTimeout is how long Stop waits, after its grace period, for the
// cancelled jobs to give their messages back.
const releaseTimeout = 10 * time.Second

// Stop stops the worker gracefully: it stops receiving, lets running jobs
// finish until ctx ends (the grace period), then cancels the rest and gives
// their messages back (at visibility 0 when pushed; otherwise as a copy
// that keeps its attempts), flushes the pending moves and deletes and
// returns. It returns ErrStopTimeout if jobs still run releaseTimeout after
// ctx ended (a handler that ignores its context). Stop is idempotent; Stop
// before Start does nothing.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started {
		w.mu.Unlock()
		return nil
	}
	select {
	case w.stopCh <- ctx:
	default: // a Stop came first
	}
	w.mu.Unlock()

	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	t := time.NewTimer(releaseTimeout)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C:
		return ErrStopTimeout
	}
}

// Done returns a channel closed when the worker has stopped.
func (w *Worker) Done() <-chan struct{} { return w.done }

// deleteBatch is the call of the deletes batcher.
func (w *Worker) deleteBatch(ctx context.Context, q string, handles []string) ([]error, error) {
	errs, err := w.cfg.Backend.Delete(ctx, q, handles)
	w.countBatchErrors("delete", len(handles), errs, err)
	return errs, err
}

// changeBatch is the call of the visibility batcher.
func (w *Worker) changeBatch(ctx context.Context, q string, changes []queue.VisibilityChange) ([]error, error) {
	errs, err := w.cfg.Backend.ChangeVisibility(ctx, q, changes)
	w.countBatchErrors("change_visibility", len(changes), errs, err)
	return errs, err
}

// sendBatch is the call of the moves batcher.
func (w *Worker) sendBatch(ctx context.Context, q string, entries []queue.Entry) ([]error, error) {
	for i := range entries {
		entries[i].ID = queue.EntryID(i)
	}
	results, err := w.cfg.Backend.Send(ctx, q, entries)
	var errs []error
	if err == nil {
		errs = make([]error, len(entries))
		for i, r := range results {
			if i < len(errs) {
				errs[i] = r.Err
			}
		}
		for i := len(results); i < len(errs); i++ {
			errs[i] = errors.New("send: no result for entry")
		}
	}
	w.countBatchErrors("send", len(entries), errs, err)
	return errs, err
}

func (w *Worker) countBatchErrors(op string, n int, errs []error, err error) {
	failed := 0
	if err != nil {
		failed = n
	} else {
		for _, e := range errs {
			if e != nil {
				failed++
			}
		}
	}
	if failed > 0 {
		w.metrics.batchErrors.WithLabelValues(op).Add(float64(failed))
		w.log.Warn("batch call failed", "op", op, "failed", failed, "of", n, "err", cmp.Or(err, errors.Join(errs...)))
	}
}
