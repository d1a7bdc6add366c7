package parking

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/queue"
)

// Lot is where parked messages are recorded (Memory, Redis).
type Lot interface {
	Park(ctx context.Context, tenant string, s Spot) error
	Tenants(ctx context.Context) ([]string, error)
	Take(ctx context.Context, tenant string) ([]Spot, error)
}

var (
	_ Lot = (*Memory)(nil)
	_ Lot = (*Redis)(nil)
)

// Visibility is what the Waker needs of a queue backend.
type Visibility interface {
	ChangeVisibility(ctx context.Context, queue string, changes []queue.VisibilityChange) ([]error, error)
}

// EveryDefault is how often a Waker looks for tenants to wake.
const EveryDefault = time.Second

// WakerConfig configures a Waker.
type WakerConfig struct {
	Lot     Lot        // required
	Backend Visibility // required
	// PausedFunc reports whether a tenant is paused now; required. A
	// tenant that no longer exists is not paused: its messages are woken,
	// and the worker settles them (a purge deletes them).
	PausedFunc func(tenant string) bool
	// Every is how often the Lot is looked at; zero uses EveryDefault.
	Every      time.Duration
	Logger     *slog.Logger          // nil discards
	Registerer prometheus.Registerer // fairq_worker_woken_total; nil registers nothing
}

// Waker makes the parked messages of resumed tenants visible again.
type Waker struct {
	cfg   WakerConfig
	woken prometheus.Counter
	loops lifecycle.Loops
}

// NewWaker returns a Waker; Start runs it.
func NewWaker(cfg WakerConfig) (*Waker, error) {
	if cfg.Lot == nil || cfg.Backend == nil || cfg.PausedFunc == nil {
		return nil, errors.New("parking: a Waker needs a Lot, a Backend and a PausedFunc")
	}
	cfg.Every = cmp.Or(cfg.Every, EveryDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	w := &Waker{cfg: cfg, woken: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fairq_worker_woken_total",
		Help: "Parked messages of resumed tenants made visible again.",
	})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.woken); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Start looks at the Lot every Every until Stop.
func (w *Waker) Start(ctx context.Context) error {
	ctx, err := w.loops.Start(ctx)
	if err != nil {
		return err
	}
	w.loops.Go(func() {
		t := time.NewTicker(w.cfg.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := w.Wake(ctx); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("parked messages not woken; they come back when their invisibility ends", "err", err)
			}
		}
	})
	return nil
}

// Stop stops looking.
func (w *Waker) Stop(ctx context.Context) error { return w.loops.Stop(ctx) }

// wakeTimeout bounds one look at the Lot and the calls that follow.
const wakeTimeout = 10 * time.Second

// Wake makes the parked messages of every tenant no longer paused visible
// again, and returns how many.
func (w *Waker) Wake(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	tenants, err := w.cfg.Lot.Tenants(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range tenants {
		if w.cfg.PausedFunc(t) {
			continue
		}
		spots, err := w.cfg.Lot.Take(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		byQueue := map[string][]queue.VisibilityChange{}
		for _, s := range spots {
			byQueue[s.Queue] = append(byQueue[s.Queue], queue.VisibilityChange{ReceiptHandle: s.Handle})
		}
		for q, changes := range byQueue {
			for len(changes) > 0 {
				chunk := changes[:min(len(changes), queue.MaxBatch)]
				changes = changes[len(chunk):]
				results, err := w.cfg.Backend.ChangeVisibility(ctx, q, chunk)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				for _, e := range results {
					// A handle no longer valid: the message came back on
					// its own meanwhile.
					if e == nil || errors.Is(e, queue.ErrReceiptHandle) {
						n++
						w.woken.Inc()
					}
				}
			}
		}
	}
	return n, errors.Join(errs...)
}
