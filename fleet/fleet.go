package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/internal/notices"
)

// HeartbeatDefault is Config.Heartbeat's default.
const HeartbeatDefault = 5 * time.Second

// staleBeats is the number of heartbeat intervals after which a worker
// that has not beaten no longer counts.
const staleBeats = 3

// Config configures a Fleet.
type Config struct {
	// Redis holds the registrations of the whole fleet; nil makes a fleet
	// of this process alone.
	Redis redis.UniversalClient
	// Prefix goes in front of every Redis key ("fairq:").
	Prefix string
	// ID names this worker in the fleet; empty uses the host name, the
	// process id and a random suffix.
	ID string
	// Heartbeat is how often this worker says it is alive; a worker
	// silent for three heartbeats no longer counts. Zero uses
	// HeartbeatDefault.
	Heartbeat time.Duration
	// Logger receives a line when Redis cannot be reached and when it is
	// back; nil discards.
	Logger *slog.Logger
	// Registerer receives fairq_fleet_workers; nil registers nothing.
	Registerer prometheus.Registerer
	// SaturatedFunc, if not nil, is asked at each heartbeat whether this
	// worker is saturated: every slot held a message since the previous
	// heartbeat (consumer.Worker.Saturated). The heartbeat carries the
	// answer, so that free workers help with the queues of saturated
	// ones (Workers). Nil: never saturated.
	SaturatedFunc func() bool
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series of
	// component="fleet" join; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
}

func (c Config) withDefaults() Config {
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.ID == "" {
		c.ID = NewID()
	}
	if c.SaturatedFunc == nil {
		c.SaturatedFunc = func() bool { return false }
	}
	return c
}

// NewID returns a name for this process in the fleet: the host name, the
// process id and a random suffix.
func NewID() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return cmp.Or(host, "fairq") + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

func (c Config) validate() error {
	if c.Heartbeat < time.Millisecond {
		return fmt.Errorf("fleet: heartbeat %v is shorter than a millisecond", c.Heartbeat)
	}
	return nil
}

// Fleet is this worker's membership in the fleet of workers, and the
// fleet's size as the workers' heartbeats in Redis tell it.
type Fleet struct {
	cfg     Config
	last    atomic.Int64 // the size last known, at least 1
	workers prometheus.Gauge
	redis   *degrade.Dependency
	view    atomic.Pointer[view] // what the latest heartbeat found

	// loops run the heartbeat; Kill (tests) ends it as a crash would.
	loops lifecycle.Loops

	// abandoned is set by a kill: the registration is left to go stale,
	// as after a crash.
	abandoned atomic.Bool

	// left is set by Leave: the heartbeat no longer registers the worker.
	// beating is held through a heartbeat, so that one under way when
	// Leave comes cannot register the worker again after it left.
	left    atomic.Bool
	beating sync.Mutex
	// beatNow asks the heartbeat loop for a heartbeat at once: another
	// worker left.
	beatNow chan struct{}
	// changed is closed, and replaced, when a heartbeat finds the fleet
	// changed (Changed).
	changed atomic.Pointer[chan struct{}]
}

// New returns a Fleet; Start registers the worker.
func New(cfg Config) (*Fleet, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Fleet{
		cfg:     cfg,
		beatNow: make(chan struct{}, 1),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_fleet_workers",
			Help: "Workers alive in the fleet, as last known: those whose heartbeat in Redis is recent; 1 without Redis.",
		}),
	}
	f.setLast(1)
	changed := make(chan struct{})
	f.changed.Store(&changed)
	if cfg.Redis == nil {
		f.view.Store(&view{ids: []string{cfg.ID}, registered: true})
	} else {
		f.view.Store(&view{})
	}
	if reg := cfg.Registerer; reg != nil {
		if err := reg.Register(f.workers); err != nil {
			return nil, err
		}
	}
	f.redis = degrade.New(degrade.Config{
		Component: "fleet",
		Metrics:   cfg.RedisMetrics,
		Logger:    cfg.Logger,
		Down:      "redis unreachable; the fleet size stays as last known until it is back",
		Up:        "redis is back; the fleet size is known again",
		Cooldown:  -1, // the heartbeat asks at its own pace
	})
	return f, nil
}

// ID returns this worker's id in the fleet.
func (f *Fleet) ID() string { return f.cfg.ID }

// Last returns the size of the fleet as last known, at least 1: this
// worker's view without a call to Redis. While Redis cannot be reached it
// stays what it was.
func (f *Fleet) Last() int { return int(f.last.Load()) }

func (f *Fleet) setLast(n int) {
	n = max(n, 1)
	f.last.Store(int64(n))
	f.workers.Set(float64(n))
}

// view is the fleet as a heartbeat found it.
type view struct {
	ids        []string // sorted
	saturated  []string // sorted, a subset of ids
	registered bool     // this worker was among ids
	at         time.Time
}

// Workers returns the ids of the workers alive as this worker's latest
// heartbeat found them, sorted, this one among them, and the ids of those
// of them that reported themselves saturated (Config.SaturatedFunc);
// registered is false while this worker is not known to be in the
// registry: before a heartbeat reached Redis, and once none has for three
// heartbeats, when the others no longer count it either (the ids are then
// the last known). A heartbeat or two that fail change nothing: the
// others still count this worker, and it still has the place they give
// it. Without Redis the fleet is this worker alone, registered. The
// slices are shared: do not modify them.
func (f *Fleet) Workers() (ids, saturated []string, registered bool) {
	v := f.view.Load()
	return v.ids, v.saturated, v.registered && (f.cfg.Redis == nil || time.Since(v.at) < f.stale())
}

// beatScript: KEYS[1] the workers; ARGV id, stale ms, saturated ("1" or
// "0"). It records the worker's heartbeat, half a millisecond later while
// it is saturated (see workersKey), forgets workers silent for longer
// than stale, and returns the ids and scores of those left.
var beatScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = now
if ARGV[3] == '1' then score = now + 0.5 end
redis.call('ZADD', KEYS[1], score, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
`)

// sizeScript: KEYS[1] the workers; ARGV stale ms. It returns the number of
// workers heard from within stale.
var sizeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')
`)

func (f *Fleet) stale() time.Duration { return staleBeats * f.cfg.Heartbeat }

// Size asks Redis how many workers are alive: those whose heartbeat is
// less than three intervals old. Without Redis the fleet is this process:
// 1.
func (f *Fleet) Size(ctx context.Context) (int, error) {
	if f.cfg.Redis == nil {
		return 1, nil
	}
	n, err := sizeScript.Run(ctx, f.cfg.Redis, []string{workersKey(f.cfg.Prefix)}, f.stale().Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("fleet size: %w", err)
	}
	return n, nil
}

// Start registers the worker and beats every Heartbeat until Stop: ctx
// only carries values (see package lifecycle). If Redis cannot be
// reached, the worker keeps trying and Last stays 1 (or what it last
// was).
func (f *Fleet) Start(ctx context.Context) error {
	ctx, err := f.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if f.cfg.Redis == nil {
		return nil
	}
	f.beat(ctx)
	sub := f.subscribe(ctx)
	f.loops.Go(func() { f.run(ctx) })
	f.loops.Go(func() { f.listen(ctx, sub) })
	return nil
}

// Leave takes the worker out of the fleet at once, for good: its
// heartbeats no longer register it, and the others, told at once (see
// listen), re-rank the live queues without it at once rather than at
// their next heartbeat. A stopping worker leaves when it stops receiving,
// so that its queues pass to the others while its last jobs finish. Stop
// must still be called. Without Redis it does nothing.
func (f *Fleet) Leave(ctx context.Context) error {
	if f.cfg.Redis == nil {
		return nil
	}
	f.beating.Lock()
	f.left.Store(true)
	f.beating.Unlock()
	if err := f.cfg.Redis.ZRem(ctx, workersKey(f.cfg.Prefix), f.cfg.ID).Err(); err != nil {
		return fmt.Errorf("fleet: leave: %w", err)
	}
	if err := f.cfg.Redis.Publish(ctx, departuresChannel(f.cfg.Prefix), f.cfg.ID).Err(); err != nil {
		return fmt.Errorf("fleet: announce leaving: %w", err)
	}
	return nil
}

// Changed returns a channel closed when a heartbeat finds the fleet's
// workers, or which of them are saturated, changed since the one before:
// the receive loops re-rank the live queues then (Workers) instead of at
// their next look. Ask again after each close.
func (f *Fleet) Changed() <-chan struct{} { return *f.changed.Load() }

// subscribe listens for the workers that leave. Unless the first
// heartbeat failed, it waits for Redis to confirm within a heartbeat, so
// that a departure announced after Start returns is heard; if Redis does
// not confirm, the subscription is made when Redis is back, and
// heartbeats alone find departures meanwhile.
func (f *Fleet) subscribe(ctx context.Context) *redis.PubSub {
	sub := f.cfg.Redis.Subscribe(ctx, departuresChannel(f.cfg.Prefix))
	if f.redis.Down() {
		return sub
	}
	cctx, cancel := context.WithTimeout(ctx, f.cfg.Heartbeat)
	defer cancel()
	_, _ = sub.Receive(cctx) // the confirmation, or the error heartbeats report
	return sub
}

// listen asks for a heartbeat at once when another worker announces that
// it left (Leave), until ctx ends.
func (f *Fleet) listen(ctx context.Context, sub *redis.PubSub) {
	notices.Each(ctx, sub, func(id string) {
		if id == f.cfg.ID {
			return
		}
		select {
		case f.beatNow <- struct{}{}:
		default: // one is asked for already
		}
	})
}

// Stop stops the heartbeat and takes the worker out of the fleet at once,
// so that the others count one fewer without waiting. It is idempotent;
// Stop before Start does nothing.
func (f *Fleet) Stop(ctx context.Context) error { return f.loops.StopThen(ctx, f.leave) }

// leave takes the worker out of the fleet, unless it was killed: then its
// registration is left to go stale, as after a crash.
func (f *Fleet) leave(ctx context.Context) error {
	if f.cfg.Redis == nil || f.abandoned.Load() {
		return nil
	}
	if err := f.cfg.Redis.ZRem(ctx, workersKey(f.cfg.Prefix), f.cfg.ID).Err(); err != nil {
		return fmt.Errorf("fleet: leave: %w", err)
	}
	return nil
}

func (f *Fleet) run(ctx context.Context) {
	t := time.NewTicker(f.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.abandoned.Store(errors.Is(context.Cause(ctx), lifecycle.ErrKilled))
			return
		case <-t.C:
			f.beat(ctx)
		case <-f.beatNow:
			f.beat(ctx)
		}
	}
}

// beat records this worker's heartbeat and learns the fleet's workers.
func (f *Fleet) beat(ctx context.Context) {
	f.beating.Lock()
	defer f.beating.Unlock()
	if f.left.Load() {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, f.cfg.Heartbeat)
	defer cancel()
	saturated := "0"
	if f.cfg.SaturatedFunc() {
		saturated = "1"
	}
	res, err := beatScript.Run(cctx, f.cfg.Redis, []string{workersKey(f.cfg.Prefix)}, f.cfg.ID, f.stale().Milliseconds(), saturated).StringSlice()
	if err != nil {
		if ctx.Err() == nil {
			f.redis.Failed(ctx, err, slog.Int("fleet_size", f.Last()))
		}
		return
	}
	v := parseWorkers(res)
	v.registered, v.at = slices.Contains(v.ids, f.cfg.ID), time.Now()
	was := f.view.Swap(&v)
	if !slices.Equal(was.ids, v.ids) || !slices.Equal(was.saturated, v.saturated) || was.registered != v.registered {
		next := make(chan struct{})
		close(*f.changed.Swap(&next))
	}
	f.setLast(len(v.ids))
	f.redis.OK(ctx, slog.Int("fleet_size", len(v.ids)))
}

// parseWorkers reads the id, score, … pairs of the workers' sorted set.
// A score's fraction of a millisecond says the worker is saturated.
func parseWorkers(res []string) view {
	var v view
	for i := 0; i+1 < len(res); i += 2 {
		v.ids = append(v.ids, res[i])
		if ms, err := strconv.ParseFloat(res[i+1], 64); err == nil && ms-math.Floor(ms) >= 0.25 {
			v.saturated = append(v.saturated, res[i])
		}
	}
	slices.Sort(v.ids)
	slices.Sort(v.saturated)
	return v
}
