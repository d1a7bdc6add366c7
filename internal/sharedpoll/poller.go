package sharedpoll

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
)

// Reading is what a Poller shares: a value that knows when it was taken.
type Reading interface {
	// TakenAt is when the poll that produced it started, in unix
	// milliseconds.
	TakenAt() int64
}

// Source says where the reading Poll returned comes from.
type Source int

const (
	// None: no reading. Another process holds the lease and none is
	// shared yet; the caller keeps what it had.
	None Source = iota
	// Polled: this process polled (its turn, or Redis failed).
	Polled
	// Shared: another process's reading, from Redis.
	Shared
)

func (s Source) String() string {
	switch s {
	case Polled:
		return "poll"
	case Shared:
		return "redis"
	}
	return "none"
}

// Config configures a Poller.
type Config[T Reading] struct {
	// Redis holds the shared reading and the lease; nil makes every Poll
	// poll.
	Redis redis.UniversalClient
	// Key holds the shared reading and LockKey the lease, which holds its
	// owner's Token. The caller builds them (each package builds its keys
	// in one file); required with Redis.
	Key, LockKey string
	// Token names this process as the lease's owner; empty draws a
	// random one.
	Token string
	// Interval is how often the caller polls, and the age under which a
	// shared reading is adopted rather than polled anew unless MaxAge
	// says otherwise; the lease lives half of it, long enough to cover a
	// poll, short enough to have expired when the next Poll finds the
	// reading old. Required.
	Interval time.Duration
	// MaxAge, if set, is the age under which a shared reading is adopted,
	// at least half the interval and at most the interval: a little less
	// than the interval lets the process that polled find its own
	// reading old at its next tick, which comes an interval after the
	// one before, give or take the scheduler. Zero uses Interval.
	MaxAge time.Duration
	// Keep is how long Redis keeps a shared reading; zero keeps it three
	// intervals.
	Keep time.Duration
	// RedisTimeout bounds the reads of Redis before a poll, and the write
	// after it, so that a hung Redis leaves time to poll; zero uses a
	// quarter of the interval.
	RedisTimeout time.Duration
	// PollFunc takes a reading; at is the time given to Poll. Required.
	PollFunc func(ctx context.Context, at int64) (T, error)
	// EncodeFunc and DecodeFunc turn a reading into the string stored in
	// Redis and back; DecodeFunc rejects a reading that is not of the
	// caller's (another pool's, say), which is then ignored. Required
	// with Redis.
	EncodeFunc func(T) string
	DecodeFunc func(string) (T, error)
	// Dependency records Redis's failures and recoveries, and counts each
	// poll made for want of it as a fallback; required with Redis.
	Dependency *degrade.Dependency
	// Logger receives a line for a shared reading that cannot be decoded;
	// nil discards.
	Logger *slog.Logger
}

func (c Config[T]) withDefaults() Config[T] {
	if c.Token == "" {
		c.Token = rand.Text()
	}
	if c.Keep == 0 {
		c.Keep = 3 * c.Interval
	}
	if c.MaxAge == 0 {
		c.MaxAge = c.Interval
	}
	if c.RedisTimeout == 0 {
		c.RedisTimeout = c.Interval / 4
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config[T]) validate() error {
	var errs []error
	if c.PollFunc == nil {
		errs = append(errs, errors.New("no PollFunc"))
	}
	if c.Interval <= 0 || c.Keep < c.Interval || c.RedisTimeout <= 0 || c.MaxAge < c.Interval/2 || c.MaxAge > c.Interval {
		errs = append(errs, fmt.Errorf("interval %v, max age %v, keep %v, redis timeout %v: want interval/2 ≤ max age ≤ interval ≤ keep, and positive durations",
			c.Interval, c.MaxAge, c.Keep, c.RedisTimeout))
	}
	if c.Redis != nil && (c.Key == "" || c.LockKey == "" || c.Key == c.LockKey || c.EncodeFunc == nil || c.DecodeFunc == nil || c.Dependency == nil) {
		errs = append(errs, errors.New("with Redis, two distinct keys, EncodeFunc, DecodeFunc and a Dependency are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sharedpoll: %w", err)
	}
	return nil
}

// Poller takes a reading for the fleet, or adopts the one another process
// took. It is safe for concurrent use, though a process has one caller
// (its refresh loop).
type Poller[T Reading] struct {
	cfg Config[T]
}

// New returns a Poller, or the error of an invalid Config.
func New[T Reading](cfg Config[T]) (*Poller[T], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Poller[T]{cfg: cfg}, nil
}

// Token returns the token this process holds the lease with.
func (p *Poller[T]) Token() string { return p.cfg.Token }

// Poll returns a reading as of at (unix ms, the caller's clock): the
// shared one if it is younger than MaxAge; else a poll of this
// process's, shared, if it takes the lease; else the shared one, older
// (or None if there is none). Without Redis, or when Redis fails, it
// polls. Its error is the poll's: a failure of Redis is the Dependency's
// to report, and the poll goes on without it.
func (p *Poller[T]) Poll(ctx context.Context, at int64) (T, Source, error) {
	if p.cfg.Redis == nil {
		return p.poll(ctx, at)
	}
	rdb, dep := p.cfg.Redis, p.cfg.Dependency
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	cached, found, err := p.load(rctx)
	if err != nil {
		return p.fallback(ctx, err, at)
	}
	if found && at-cached.TakenAt() < p.cfg.MaxAge.Milliseconds() {
		dep.OK(ctx)
		return cached, Shared, nil
	}
	won, err := rdb.SetNX(rctx, p.cfg.LockKey, p.cfg.Token, p.cfg.Interval/2).Result()
	if err != nil {
		return p.fallback(ctx, err, at)
	}
	dep.OK(ctx)
	if !won {
		if found {
			return cached, Shared, nil
		}
		var none T
		return none, None, nil
	}
	r, src, err := p.poll(ctx, at)
	if err != nil {
		// Let another process try at once rather than after the lease
		// expires.
		_ = unlockScript.Run(ctx, rdb, []string{p.cfg.LockKey}, p.cfg.Token).Err()
		return r, src, err
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.RedisTimeout)
	defer cancel()
	if err := rdb.Set(wctx, p.cfg.Key, p.cfg.EncodeFunc(r), p.cfg.Keep).Err(); err != nil {
		dep.Failed(ctx, err)
	}
	return r, src, nil
}

// fallback polls for want of Redis, which failed with err.
func (p *Poller[T]) fallback(ctx context.Context, err error, at int64) (T, Source, error) {
	p.cfg.Dependency.Failed(ctx, err)
	p.cfg.Dependency.Fallback()
	return p.poll(ctx, at)
}

func (p *Poller[T]) poll(ctx context.Context, at int64) (T, Source, error) {
	r, err := p.cfg.PollFunc(ctx, at)
	if err != nil {
		var none T
		return none, None, err
	}
	return r, Polled, nil
}

// unlockScript deletes the lease KEYS[1] if ARGV[1] still owns it.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// load returns the reading shared in Redis; found is false when there is
// none, or it cannot be decoded as the caller's.
func (p *Poller[T]) load(ctx context.Context) (r T, found bool, err error) {
	s, err := p.cfg.Redis.Get(ctx, p.cfg.Key).Result()
	if errors.Is(err, redis.Nil) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	r, err = p.cfg.DecodeFunc(s)
	if err != nil {
		p.cfg.Logger.Warn("ignoring a shared reading", "key", p.cfg.Key, "err", err)
		return r, false, nil
	}
	return r, true, nil
}
