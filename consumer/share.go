package consumer

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// ShareIntervalDefault is Config.ShareInterval's default.
const ShareIntervalDefault = time.Second

// Fleet is the registry of the workers that share the live queues;
// *fleet.Fleet is one.
type Fleet interface {
	// ID returns this worker's id in the fleet.
	ID() string
	// Workers returns the ids of the live workers, sorted, and those of
	// them that are saturated, as of this worker's latest heartbeat;
	// registered is false while this worker is not known to be in the
	// registry. The slices are not modified.
	Workers() (ids, saturated []string, registered bool)
}

// fleetLeaver is a Fleet that a stopping worker can leave at once, so
// that the others take its queues while its last jobs finish rather than
// after; *fleet.Fleet is one.
type fleetLeaver interface {
	Leave(ctx context.Context) error
}

// fleetNotifier is a Fleet that tells when its view of the workers
// changed, so that the worker re-ranks the queues then rather than at
// its next look (ShareInterval); *fleet.Fleet is one.
type fleetNotifier interface {
	Changed() <-chan struct{}
}

// leaveTimeout bounds the stopping worker's call to leave the fleet; the
// worker's stop waits for it.
const leaveTimeout = 2 * time.Second

// sharing is how the worker shares the live queues with the fleet: which
// it watches, and the loops it runs on each. Only Start and the share
// loop touch it, one after the other.
type sharing struct {
	fleet Fleet // nil: this worker alone
	k     int   // watchers per queue; 0: every worker watches every queue
	live  []string

	seen     fleetView                     // the view the current plan came from
	fallback bool                          // watching every queue for want of a place in the fleet
	stops    map[string]context.CancelFunc // watched queue → ends its loops
	watched  []string                      // the watched queues, in pool order
	current  atomic.Pointer[[]string]      // watched, for readers on other goroutines
}

func newSharing(cfg Config) *sharing {
	return &sharing{fleet: cfg.Fleet, k: cfg.WatchersPerQueue, live: cfg.Names.Live, stops: map[string]context.CancelFunc{}}
}

// view reads the fleet; without one, the worker is a fleet of its own.
func (s *sharing) view() fleetView {
	if s.fleet == nil {
		return fleetView{workers: []string{""}, known: true}
	}
	ids, saturated, ok := s.fleet.Workers()
	return fleetView{self: s.fleet.ID(), workers: ids, saturated: saturated, known: ok}
}

// dynamic reports whether the watched queues can change: they cannot
// without a fleet, nor when every worker watches every queue.
func (s *sharing) dynamic() bool { return s.fleet != nil && s.k > 0 }

// Saturated reports whether every slot held a message at some moment since
// the previous call, or does now: the worker could not have taken another
// message then. The fleet's heartbeat asks it (fleet.Config.SaturatedFunc),
// so that free workers help with this worker's queues.
func (w *Worker) Saturated() bool {
	return w.saturated.Swap(w.held.Load() >= int64(w.cfg.Connections))
}

// hold counts a received message as held until its slot is given back, and
// returns the function that gives it back.
func (w *Worker) hold(release func(int)) func(int) {
	if w.held.Add(1) >= int64(w.cfg.Connections) {
		w.saturated.Store(true)
	}
	return func(n int) {
		w.held.Add(-int64(n))
		release(n)
	}
}

// changed returns the channel the fleet closes when its view changes, or
// nil (which never fires) for a fleet that does not tell.
func (s *sharing) changed() <-chan struct{} {
	if n, ok := s.fleet.(fleetNotifier); ok {
		return n.Changed()
	}
	return nil
}

// share follows the fleet until ctx ends: every ShareInterval, and as soon
// as the fleet says it changed, it reads the fleet as the latest
// heartbeat found it and, if that changed, the live queues this worker
// watches. When ctx ends because the worker stops (not killed), it takes
// the worker out of the fleet at once (leave). It counts in
// loops.running, so that the loops it starts are counted before the
// worker's stop waits for them.
func (w *Worker) share(ctx, jobCtx context.Context) {
	defer w.loops.running.Done()
	t := time.NewTicker(w.cfg.ShareInterval)
	defer t.Stop()
	changed := w.sharing.changed()
	for {
		select {
		case <-ctx.Done():
			w.leave()
			return
		case <-t.C:
		case <-changed:
		}
		// Asked before the view is read, so that a change after the read
		// closes it.
		changed = w.sharing.changed()
		if v := w.sharing.view(); !v.equal(w.sharing.seen) {
			w.rebalance(ctx, jobCtx, v)
		}
	}
}

// leave takes a stopping worker out of the fleet as it stops receiving,
// unless it was killed (a crash leaves its registration to go stale).
// Without it, its queues would have no watcher from the moment it stops
// receiving until its last jobs finish and the others' next heartbeat
// finds it gone: with worker.watchers_per_queue 1, a message sent there
// meanwhile would wait that long. The others hear of it at once and
// re-rank the queues; what its receives under way bring is given back.
func (w *Worker) leave() {
	l, ok := w.sharing.fleet.(fleetLeaver)
	if !ok || w.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.runCtx), leaveTimeout)
	defer cancel()
	if err := l.Leave(ctx); err != nil {
		w.log.Warn("could not leave the fleet registry as the worker stops; the others take its live queues once its registration is gone", "err", err)
		return
	}
	if len(w.sharing.seen.workers) > 1 {
		w.log.Info("left the fleet registry: the others take the live queues this worker watched", "queues", len(w.sharing.watched))
	}
}

// rebalance watches the live queues the plan for view v gives: it stops
// the loops of the queues it loses, whose receives under way finish and
// give back what they bring, as at shutdown, and starts a loop on each
// queue it gains, with others (the overflow and backlog loops, at Start)
// counted as contenders together with them.
func (w *Worker) rebalance(ctx, jobCtx context.Context, v fleetView, others ...*poller) {
	s := w.sharing
	plan := planWatch(s.live, v, s.k)
	watched := make([]string, len(plan.queues))
	for i, q := range plan.queues {
		watched[i] = s.live[q]
	}
	var lost, gained []string
	for _, q := range s.watched {
		if !slices.Contains(watched, q) {
			lost = append(lost, q)
			s.stops[q]()
			delete(s.stops, q)
		}
	}
	for _, q := range watched {
		if !slices.Contains(s.watched, q) {
			gained = append(gained, q)
		}
	}
	w.loops.live.watch(watched)
	ps := make([]*poller, 0, len(gained)+len(others))
	ctxs := make([]context.Context, 0, cap(ps))
	for _, q := range gained {
		qctx, stop := context.WithCancel(ctx)
		s.stops[q] = stop
		ps, ctxs = append(ps, w.newPoller(q, classLive)), append(ctxs, qctx)
	}
	for _, p := range others {
		ps, ctxs = append(ps, p), append(ctxs, ctx)
	}
	w.spawnEach(ctxs, jobCtx, ps)
	w.reportShare(v, plan, s.watched, watched, lost, gained)
	s.seen, s.watched = v, watched
	s.current.Store(&watched)
}

// reportShare sets the gauges and logs the change of the watched queues:
// a warning when the worker starts watching every queue for want of a
// place in the fleet, a line when it has one again, and one when the
// fleet's change moved queues.
func (w *Worker) reportShare(v fleetView, plan watchPlan, was, watched, lost, gained []string) {
	s := w.sharing
	w.metrics.watched.Set(float64(len(watched)))
	fallback := 0.0
	if plan.fallback {
		fallback = 1
	}
	w.metrics.shareFallback.Set(fallback)
	start := was == nil
	switch {
	case plan.fallback && !s.fallback:
		w.log.Warn("not in the fleet registry: watching every live queue until it is", "queues", len(watched))
	case !plan.fallback && s.fallback && s.dynamic():
		w.log.Info("in the fleet registry: watching a share of the live queues", "queues", len(watched), "of", len(s.live),
			"workers", len(v.workers), "watchers_per_queue", s.k)
	case start && s.dynamic():
		w.log.Info("watching a share of the live queues", "queues", len(watched), "of", len(s.live),
			"workers", len(v.workers), "watchers_per_queue", s.k)
	}
	s.fallback = plan.fallback
	if len(lost)+len(gained) == 0 || start || !s.dynamic() {
		return
	}
	level := w.log.Info
	if slices.Equal(v.workers, s.seen.workers) {
		level = w.log.Debug // only saturation changed: helpers come and go with the load
	}
	level("live queues rebalanced", "queues", len(watched), "of", len(s.live), "workers", len(v.workers),
		"saturated", len(v.saturated), "gained", gained, "lost", lost)
}

// spawnEach starts receive loop ps[i] on ctxs[i], counting them all as
// contenders for slots before the first runs (see spawn).
func (w *Worker) spawnEach(ctxs []context.Context, jobCtx context.Context, ps []*poller) {
	w.loops.contenders.Add(int64(len(ps)))
	w.loops.running.Add(len(ps))
	for i, p := range ps {
		go p.run(ctxs[i], jobCtx)
	}
}
