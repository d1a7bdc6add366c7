package schedule

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/queue"
)

// Defaults of Config.
const (
	LeaseTTLDefault  = 6 * time.Second
	KeyPrefixDefault = "fairq:"
)

// firedTTL is how long a firing's claim is kept: long after any catch-up.
const firedTTL = 24 * time.Hour

// sendAttempts is how often a firing's send is tried before it is given up.
const sendAttempts = 3

// Sender is what the scheduler needs of a queue backend.
type Sender interface {
	Send(ctx context.Context, queue string, entries []queue.Entry) ([]queue.SendResult, error)
}

// Config configures a Scheduler.
type Config struct {
	Tasks   []Task // from Parse or ParseFile; none is valid (nothing fires)
	Backend Sender // required
	Queue   string // required: the queue firings are sent to, e.g. the first live queue
	// Redis, if not nil, elects one leader across the fleet; nil makes this
	// process its own leader.
	Redis redis.UniversalClient
	// KeyPrefix prefixes the Redis keys; default "fairq:".
	KeyPrefix string
	// LeaseTTL is the leader lease: another process takes over within
	// about this long after the leader dies. Default 6 s.
	LeaseTTL time.Duration
	// Identity names this process in the lease; default host-pid-random.
	Identity string

	Logger     *slog.Logger          // nil: logs nothing
	Registerer prometheus.Registerer // nil: metrics not registered
	NowFunc    func() time.Time      // default time.Now
}

func (c Config) withDefaults() Config {
	c.KeyPrefix = cmp.Or(c.KeyPrefix, KeyPrefixDefault)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, LeaseTTLDefault)
	if c.Identity == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		c.Identity = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("backend is nil"))
	}
	if c.Queue == "" {
		errs = append(errs, errors.New("queue is empty"))
	}
	if c.LeaseTTL < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease TTL %v is too short", c.LeaseTTL))
	}
	for i := range c.Tasks {
		if c.Tasks[i].sched == nil {
			if err := c.Tasks[i].parse(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Scheduler enqueues the firings of periodic tasks while it leads.
type Scheduler struct {
	cfg   Config
	log   *slog.Logger
	lease *lease // nil without Redis

	leader   atomic.Bool
	promoted chan struct{} // size 1: leadership was gained

	fired   *prometheus.CounterVec
	missed  *prometheus.CounterVec
	leading prometheus.Gauge

	loops  lifecycle.Loops
	killed atomic.Bool // stopped as by a crash: the lease is left to run out
}

// New returns a Scheduler, or an error wrapping ErrInvalid.
func New(cfg Config) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	cfg.Tasks = append([]Task(nil), cfg.Tasks...)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:      cfg,
		log:      cfg.Logger,
		promoted: make(chan struct{}, 1),
		fired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_cron_fired_total",
			Help: "Firings of periodic tasks enqueued by this process, by task.",
		}, []string{"task"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_cron_missed_total",
			Help: "Firings of periodic tasks this process could not enqueue, by task.",
		}, []string{"task"}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_cron_leader",
			Help: "1 while this process leads the periodic tasks of the fleet.",
		}),
	}
	if cfg.Redis != nil {
		s.lease = newLease(cfg.Redis, leaseKey(cfg.KeyPrefix), cfg.Identity, cfg.LeaseTTL)
	}
	if reg := cfg.Registerer; reg != nil {
		if err := errors.Join(reg.Register(s.fired), reg.Register(s.missed), reg.Register(s.leading)); err != nil {
			return nil, fmt.Errorf("schedule metrics: %w", err)
		}
	}
	return s, nil
}

// Leader reports whether this process leads.
func (s *Scheduler) Leader() bool { return s.leader.Load() }

// Start starts electing and firing, until Stop: ctx only carries values
// (see package lifecycle).
func (s *Scheduler) Start(ctx context.Context) error {
	ctx, err := s.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if s.lease == nil {
		s.setLeader(true)
	} else {
		s.loops.Go(func() { s.elect(ctx) })
	}
	s.loops.Go(func() { s.run(ctx) })
	return nil
}

// Stop stops firing, waits for the goroutines and gives up the lease if
// held. It is idempotent.
func (s *Scheduler) Stop(ctx context.Context) error { return s.loops.StopThen(ctx, s.stepDown) }

// stepDown ends the leadership once the goroutines have returned: the
// lease is given up, so that another process takes over at once, unless
// the scheduler was killed (then it runs out, as after a crash).
func (s *Scheduler) stepDown(ctx context.Context) error {
	wasLeader := s.leader.Swap(false)
	s.leading.Set(0)
	if s.lease != nil && wasLeader && !s.killed.Load() {
		if err := s.lease.release(ctx); err != nil {
			return fmt.Errorf("give up the cron lease: %w", err)
		}
	}
	return nil
}

func (s *Scheduler) setLeader(on bool) {
	if s.leader.Swap(on) == on {
		return
	}
	if on {
		s.leading.Set(1)
		s.log.Info("leading the periodic tasks", "identity", s.cfg.Identity)
		select {
		case s.promoted <- struct{}{}:
		default:
		}
		return
	}
	s.leading.Set(0)
	s.log.Info("no longer leading the periodic tasks", "identity", s.cfg.Identity)
}

// elect acquires and renews the lease every LeaseTTL/3. A leader that
// cannot reach Redis steps down when its lease would have run out.
func (s *Scheduler) elect(ctx context.Context) {
	every := s.cfg.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	var expires time.Time // of our lease, as far as we know
	for {
		var held bool
		var err error
		now := time.Now()
		if s.leader.Load() {
			held, err = s.lease.renew(ctx)
		} else {
			held, err = s.lease.acquire(ctx)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("cron lease: redis unreachable", "err", err)
			if s.leader.Load() && !time.Now().Before(expires) {
				s.setLeader(false)
			}
		case held:
			expires = now.Add(s.cfg.LeaseTTL)
			s.setLeader(true)
		default:
			s.setLeader(false)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run fires the tasks while leading.
func (s *Scheduler) run(ctx context.Context) {
	if len(s.cfg.Tasks) == 0 {
		return
	}
	next := make([]time.Time, len(s.cfg.Tasks))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	planned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.promoted:
			// From a little in the past: firings missed while no one
			// led are caught up; claims make them fire once.
			from := s.cfg.NowFunc().UTC()
			if s.lease != nil {
				from = from.Add(-2 * s.cfg.LeaseTTL)
			}
			for i, t := range s.cfg.Tasks {
				next[i] = t.sched.Next(from)
			}
			planned = true
		case <-timer.C:
		}
		if !planned || !s.leader.Load() {
			planned = false
			timer.Reset(time.Hour) // woken by the next promotion
			continue
		}
		now := s.cfg.NowFunc().UTC()
		earliest := time.Time{}
		for i, t := range s.cfg.Tasks {
			for !next[i].After(now) {
				s.fire(ctx, t, next[i])
				next[i] = t.sched.Next(next[i])
			}
			if earliest.IsZero() || next[i].Before(earliest) {
				earliest = next[i]
			}
		}
		timer.Reset(earliest.Sub(s.cfg.NowFunc()))
	}
}

// fire enqueues one firing, once across the fleet.
func (s *Scheduler) fire(ctx context.Context, t Task, at time.Time) {
	if s.lease != nil {
		claimed, err := s.cfg.Redis.SetNX(ctx, firedKey(s.cfg.KeyPrefix, t.Name, at.Unix()), s.cfg.Identity, firedTTL).Result()
		if err != nil {
			s.missed.WithLabelValues(t.Name).Inc()
			s.log.Warn("periodic task not fired: redis unreachable", "task", t.Name, "scheduled_at", at, "err", err)
			return
		}
		if !claimed {
			return // fired by another process
		}
	}
	task := envelope.Task{Name: t.Name, Path: t.URL, ScheduledAt: at}
	meta := envelope.Meta{EnqueuedAt: s.cfg.NowFunc().UnixMilli()}
	entry := queue.Entry{ID: "1", Body: t.Name, Attributes: map[string]string{
		envelope.AttrTask: task.Encode(),
		envelope.AttrMeta: meta.Encode(),
	}}
	var err error
	for attempt := range sendAttempts {
		var res []queue.SendResult
		res, err = s.cfg.Backend.Send(ctx, s.cfg.Queue, []queue.Entry{entry})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		pause := time.NewTimer(time.Duration(attempt+1) * 200 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-pause.C:
		}
		pause.Stop()
	}
	if err != nil {
		if s.lease != nil {
			// Give the claim back, so that the leader after a takeover,
			// which fires what was missed, can fire this one.
			delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			s.cfg.Redis.Del(delCtx, firedKey(s.cfg.KeyPrefix, t.Name, at.Unix()))
			cancel()
		}
		s.missed.WithLabelValues(t.Name).Inc()
		s.log.Error("periodic task not fired: send failed", "task", t.Name, "scheduled_at", at, "err", err)
		return
	}
	s.fired.WithLabelValues(t.Name).Inc()
	s.log.Debug("periodic task fired", "task", t.Name, "scheduled_at", at)
}
