package throttle

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/internal/notices"
)

// LeaseDefault is RedisSemaphoreConfig.Lease's default.
const LeaseDefault = 30 * time.Second

// releaseTimeout bounds the Redis call of a Release made while the
// semaphore is not running.
const releaseTimeout = time.Second

// RedisSemaphoreConfig configures a RedisSemaphore.
type RedisSemaphoreConfig struct {
	// Client is the Redis connection; required.
	Client redis.UniversalClient
	// Prefix goes in front of every key, as "fairq:" does; the slots of
	// key k are then the sorted set "sem:" + Prefix + k.
	Prefix string
	// Lease is how long a slot stays taken without renewal: a holder that
	// crashed gives its slots back within one Lease. Zero uses
	// LeaseDefault.
	Lease time.Duration
	// RenewEvery is how often the held slots are renewed, in one round
	// trip; zero uses Lease/3. It must be shorter than Lease.
	RenewEvery time.Duration
	// Logger receives a line when renewals or releases start failing and
	// when they work again; nil discards.
	Logger *slog.Logger
}

func (c RedisSemaphoreConfig) withDefaults() RedisSemaphoreConfig {
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.RenewEvery = cmp.Or(c.RenewEvery, c.Lease/3)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c RedisSemaphoreConfig) validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("a Redis client (Client) is required"))
	}
	if c.Lease < time.Millisecond {
		errs = append(errs, fmt.Errorf("lease %v is shorter than a millisecond", c.Lease))
	}
	if c.RenewEvery <= 0 || c.RenewEvery >= c.Lease {
		errs = append(errs, fmt.Errorf("renewal interval %v must be positive and shorter than the lease %v", c.RenewEvery, c.Lease))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("throttle: RedisSemaphoreConfig: %w", err)
	}
	return nil
}

// RedisSemaphore is a Semaphore held fleet-wide in Redis. The slots of a
// key are a sorted set of leases, lease id → expiry on Redis's clock; a
// TryAcquire is one round trip running one Lua script that drops the
// expired leases and adds one if fewer than the limit are left.
//
// Between Start and Stop a goroutine renews every lease this process
// holds, every RenewEvery in one round trip (one script call per key,
// pipelined), and removes released leases in batches; a process that dies
// stops renewing, so its slots come back within one Lease. A renewal puts
// back a lease that vanished (Redis restarted, or it could not be reached
// for longer than a Lease) since its holder still runs; renewals and
// removals are made by that one goroutine in order, so a released lease is
// never put back. Release does not wait for Redis: the slot is removed
// from Redis at once by the goroutine, and if that fails it is tried again
// as soon as a TryAcquire finds Redis answering, or at the next renewal,
// and expires in any case within a Lease.
//
// If a TryAcquire's reply is lost (a timeout), the lease may have been
// taken without this process knowing: it is not renewed and expires within
// a Lease.
type RedisSemaphore struct {
	cfg   RedisSemaphoreConfig
	owner string // prefix of this process's lease ids
	seq   atomic.Uint64

	mu      sync.Mutex
	held    map[lease]struct{}
	pending []pendingRelease
	state   semState
	failing bool // the latest renewal or release failed

	wake chan struct{} // size 1: pending releases wait

	onFreed []func(key string, n int) // told of the slots given back

	// loops run the renewals and releases; Kill (tests) ends them as a
	// crash would.
	loops lifecycle.Loops
}

// semState is where a RedisSemaphore is in its life.
type semState int

const (
	semIdle      semState = iota // not started, or stopped: a release is one call
	semRunning                   // the goroutine renews and releases
	semAbandoned                 // killed, as by a crash: nothing more is released
)

// lease is one slot held by this process.
type lease struct {
	name string // the key as given to TryAcquire; redisKey makes the Redis key
	id   string
}

// leaseIDs groups the ids of leases by name, for one Redis call per key.
type leaseIDs map[string][]any

func (g leaseIDs) add(l lease) { g[l.name] = append(g[l.name], l.id) }

// redisKey is the Redis key of the leases of name.
func (s *RedisSemaphore) redisKey(name string) string { return redisSemaphoreKey(s.cfg.Prefix, name) }

// pendingRelease is a lease released and not yet removed from Redis.
type pendingRelease struct {
	lease
	at time.Time
}

var _ Semaphore = (*RedisSemaphore)(nil)

// NewRedisSemaphore returns a RedisSemaphore; call Start before using it
// so that leases are renewed.
func NewRedisSemaphore(cfg RedisSemaphoreConfig) (*RedisSemaphore, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return &RedisSemaphore{
		cfg:   cfg,
		owner: hex.EncodeToString(b[:]),
		held:  make(map[lease]struct{}),
		wake:  make(chan struct{}, 1),
	}, nil
}

// acquireScript: KEYS[1] the sorted set; ARGV limit, lease ms, lease id.
// It returns 1 when the lease was added, 0 when the slots are all taken.
var acquireScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// renewScript: KEYS[1] the sorted set; ARGV lease ms, then the lease ids.
// Every lease given gets a full lease from now, put back if it vanished;
// the set then lives as long as its longest lease.
var renewScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], exp, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return #ARGV - 1
`)

// TryAcquire implements Semaphore.
func (s *RedisSemaphore) TryAcquire(ctx context.Context, key string, limit int) (Permit, bool, error) {
	if limit <= 0 {
		return newPermit(func() {}), true, nil
	}
	l := s.newLease(key)
	n, err := acquireScript.Run(ctx, s.cfg.Client, []string{s.redisKey(key)}, limit, s.cfg.Lease.Milliseconds(), l.id).Int()
	if err != nil {
		return Permit{}, false, fmt.Errorf("semaphore %q: %w", key, err)
	}
	if n != 1 {
		s.answered(nil)
		return Permit{}, false, nil
	}
	return s.answered([]lease{l})[0], true, nil
}

// newLease returns a lease of name with an id of its own.
func (s *RedisSemaphore) newLease(name string) lease {
	return lease{name: name, id: s.owner + "-" + strconv.FormatUint(s.seq.Add(1), 36)}
}

// answered holds the leases Redis has just added, to renew them until
// their Permits, returned in order, are released. Redis answered: the
// leases released while it did not are removed now.
func (s *RedisSemaphore) answered(taken []lease) []Permit {
	s.mu.Lock()
	for _, l := range taken {
		s.held[l] = struct{}{}
	}
	retry := s.failing && len(s.pending) > 0
	s.mu.Unlock()
	if retry {
		s.wakeUp()
	}
	ps := make([]Permit, len(taken))
	for i, l := range taken {
		ps[i] = newPermit(func() { s.release(l) })
	}
	return ps
}

// Held returns the number of leases this process holds.
func (s *RedisSemaphore) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// release gives a lease back: the goroutine removes it from Redis, or,
// when it does not run, this call does. After the semaphore was abandoned
// nothing is removed, as after a crash: the lease expires.
func (s *RedisSemaphore) release(l lease) {
	s.mu.Lock()
	delete(s.held, l)
	switch s.state {
	case semAbandoned:
		s.mu.Unlock()
		return
	case semRunning:
		s.pending = append(s.pending, pendingRelease{lease: l, at: time.Now()})
		s.mu.Unlock()
		s.wakeUp()
		return
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := s.cfg.Client.ZRem(ctx, s.redisKey(l.name), l.id).Err(); err != nil {
		s.cfg.Logger.Warn("semaphore lease not released; it expires within its lease", "err", err, "lease", s.cfg.Lease)
	}
}

// wakeUp asks the goroutine to remove the released leases.
func (s *RedisSemaphore) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts renewing held leases, until Stop: ctx only carries values
// (see package lifecycle).
func (s *RedisSemaphore) Start(ctx context.Context) error {
	ctx, err := s.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("throttle: semaphore: %w", err)
	}
	s.mu.Lock()
	s.state = semRunning
	listen := len(s.onFreed) > 0
	s.mu.Unlock()
	s.loops.Go(func() { s.run(ctx) })
	if listen {
		s.loops.Go(func() { s.listen(ctx) })
	}
	return nil
}

// OnFreed has f told the key (as given to TryAcquire) and number of the
// slots given back by any process sharing the Redis, this one included,
// between Start and Stop, once they are removed from Redis: within a
// round trip of their release. So work waiting for a slot need not poll
// for one, and is not woken before a TryAcquire can take it. Call it
// before Start; f is called from one goroutine, in order, and must not
// block. The releases of a key removed in one round trip are published
// as one message on a Redis channel that every listening process
// receives: its cost grows with the releases times the listeners. It
// always reports true.
func (s *RedisSemaphore) OnFreed(f func(key string, n int)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onFreed = append(s.onFreed, f)
	return true
}

// listen tells the OnFreed functions of the releases published, until
// Stop. The subscription is made again after a lost connection (go-redis
// does); releases meanwhile go untold, and those waiting find the slots
// by asking.
func (s *RedisSemaphore) listen(ctx context.Context) {
	ps := s.cfg.Client.Subscribe(ctx, redisSemaphoreFreedChannel(s.cfg.Prefix))
	s.mu.Lock()
	fs := slices.Clone(s.onFreed)
	s.mu.Unlock()
	notices.Each(ctx, ps, func(payload string) {
		key, n, ok := parseFreed(payload)
		if !ok {
			return
		}
		for _, f := range fs {
			f(key, n)
		}
	})
}

// freedMessage is the payload that tells of n slots of key given back by
// the process owner.
func freedMessage(owner string, n int, key string) string {
	return owner + " " + strconv.Itoa(n) + " " + key
}

// parseFreed reads a freedMessage. The payload of a process of an
// earlier version, "owner key", tells of one slot.
func parseFreed(payload string) (key string, n int, ok bool) {
	_, rest, found := strings.Cut(payload, " ")
	if !found || rest == "" {
		return "", 0, false
	}
	if count, k, found := strings.Cut(rest, " "); found {
		if n, err := strconv.Atoi(count); err == nil && n > 0 {
			return k, n, true
		}
	}
	return rest, 1, true
}

// Stop releases the leases still held, waits for the pending releases to
// reach Redis (or for ctx to end) and stops renewing. It is idempotent;
// Stop before Start does nothing.
func (s *RedisSemaphore) Stop(ctx context.Context) error { return s.loops.Stop(ctx) }

// run renews and releases until Stop, then releases what is held; after
// a kill (a crash, played by tests) it releases nothing, not even on
// later Releases, and the leases expire within one Lease.
func (s *RedisSemaphore) run(ctx context.Context) {
	t := time.NewTicker(s.cfg.RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			if errors.Is(context.Cause(ctx), lifecycle.ErrKilled) {
				s.state = semAbandoned
				s.pending = nil
				s.mu.Unlock()
				return
			}
			for l := range s.held {
				s.pending = append(s.pending, pendingRelease{lease: l, at: time.Now()})
			}
			clear(s.held)
			s.state = semIdle
			s.mu.Unlock()
			s.flush(context.WithoutCancel(ctx), true)
			return
		case <-s.wake:
			if ctx.Err() == nil {
				s.flush(ctx, false)
			}
		case <-t.C:
			if ctx.Err() == nil {
				s.flush(ctx, false)
				s.renew(ctx)
			}
		}
	}
}

// flush removes the released leases from Redis in one round trip. Those
// it could not remove are kept for the next try while they could still be
// alive, unless final.
func (s *RedisSemaphore) flush(ctx context.Context, final bool) {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	byName := leaseIDs{}
	for _, r := range batch {
		byName.add(r.lease)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RenewEvery)
	defer cancel()
	_, err := s.cfg.Client.Pipelined(cctx, func(p redis.Pipeliner) error {
		for name, ids := range byName {
			p.ZRem(cctx, s.redisKey(name), ids...)
			p.Publish(cctx, redisSemaphoreFreedChannel(s.cfg.Prefix), freedMessage(s.owner, len(ids), name))
		}
		return nil
	})
	s.health("release", err)
	if err == nil || final {
		return
	}
	now := time.Now()
	s.mu.Lock()
	for _, r := range batch {
		if now.Sub(r.at) < s.cfg.Lease {
			s.pending = append(s.pending, r)
		}
	}
	s.mu.Unlock()
}

// renew gives every held lease a full Lease from now, in one round trip.
func (s *RedisSemaphore) renew(ctx context.Context) {
	s.mu.Lock()
	byName := leaseIDs{}
	for l := range s.held {
		byName.add(l)
	}
	s.mu.Unlock()
	if len(byName) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RenewEvery)
	defer cancel()
	ms := s.cfg.Lease.Milliseconds()
	_, err := s.cfg.Client.Pipelined(cctx, func(p redis.Pipeliner) error {
		for name, ids := range byName {
			renewScript.Eval(cctx, p, []string{s.redisKey(name)}, append([]any{ms}, ids...)...)
		}
		return nil
	})
	s.health("renew", err)
}

// health logs the first failure of a streak and the first success after.
func (s *RedisSemaphore) health(op string, err error) {
	s.mu.Lock()
	was := s.failing
	s.failing = err != nil
	s.mu.Unlock()
	switch {
	case err != nil && !was:
		s.cfg.Logger.Warn("semaphore leases cannot reach redis; they expire unless renewed in time",
			"op", op, "lease", s.cfg.Lease, "err", err)
	case err == nil && was:
		s.cfg.Logger.Info("semaphore leases reach redis again")
	}
}
