package backlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config configures a Counter.
type Config struct {
	// Redis, when set, holds the counters for the whole fleet; nil keeps
	// them in this process.
	Redis redis.UniversalClient
	// Prefix goes in front of every Redis key ("fairq:").
	Prefix string
	// Bucket is the span of time whose Adds share a bucket; zero uses
	// BucketDefault.
	Bucket time.Duration
	// Horizon is how long a count is kept without a Done; zero uses
	// HorizonDefault.
	Horizon time.Duration
	// MaxStale is how old a Get's answer from Redis may be; zero uses
	// MaxStaleDefault, negative asks Redis every time.
	MaxStale time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Config defaults.
const (
	BucketDefault   = time.Hour
	HorizonDefault  = 4 * 24 * time.Hour
	MaxStaleDefault = 100 * time.Millisecond
)

func (c Config) withDefaults() Config {
	c.Bucket = cmp.Or(c.Bucket, BucketDefault)
	c.Horizon = cmp.Or(c.Horizon, HorizonDefault)
	c.MaxStale = cmp.Or(c.MaxStale, MaxStaleDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if c.Bucket < time.Second || c.Horizon < c.Bucket {
		return fmt.Errorf("backlog: Bucket %v must be at least 1s and Horizon %v at least Bucket", c.Bucket, c.Horizon)
	}
	return nil
}

// ErrUnavailable wraps failures to reach Redis.
var ErrUnavailable = errors.New("backlog store unavailable")

// Counter counts each tenant's messages accepted and not yet ended. It is
// safe for concurrent use and starts no goroutines.
type Counter struct {
	cfg   Config
	store store

	mu    sync.Mutex
	cache map[string]cached // Redis only
}

type cached struct {
	n  int64
	at time.Time // when the count was read from Redis
	// added is when this process last added to n: a reading that began
	// before it does not replace it, as it may not hold the Add.
	added time.Time
}

// store holds the buckets. cutoff is the oldest bucket still kept, in unix
// seconds; take removes up to n from the oldest buckets; capAt removes
// what is above limit; both return what is left.
type store interface {
	add(ctx context.Context, tenant string, bucket int64, n int64, ttl time.Duration) error
	take(ctx context.Context, tenant string, cutoff, n int64) (int64, error)
	capAt(ctx context.Context, cutoff, limit int64) error
}

// New returns a Counter.
func New(cfg Config) (*Counter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Counter{cfg: cfg, cache: make(map[string]cached)}
	if cfg.Redis != nil {
		c.store = &redisStore{c: cfg.Redis, keys: redisKeys{prefix: cfg.Prefix}}
	} else {
		c.store = newMemStore()
	}
	return c, nil
}

// bucket returns the start of the bucket of t, in unix seconds.
func (c *Counter) bucket(t time.Time) int64 {
	span := int64(c.cfg.Bucket / time.Second)
	s := t.Unix()
	return s - s%span
}

// cutoff returns the oldest bucket still kept at now.
func (c *Counter) cutoff(now time.Time) int64 { return c.bucket(now.Add(-c.cfg.Horizon)) }

// Add counts n messages of a tenant accepted now.
func (c *Counter) Add(ctx context.Context, tenant string, n int64) error {
	if n <= 0 {
		return nil
	}
	now := c.cfg.Now()
	if err := c.store.add(ctx, tenant, c.bucket(now), n, c.cfg.Horizon+c.cfg.Bucket); err != nil {
		return fmt.Errorf("backlog of %q: %w", tenant, err)
	}
	c.mu.Lock()
	if e, ok := c.cache[tenant]; ok {
		e.n += n
		e.added = c.cfg.Now()
		c.cache[tenant] = e
	}
	c.mu.Unlock()
	return nil
}

// Done takes n ended messages off a tenant's count, from its oldest
// buckets; the count does not go below zero.
func (c *Counter) Done(ctx context.Context, tenant string, n int64) error {
	if n <= 0 {
		return nil
	}
	now := c.cfg.Now()
	left, err := c.store.take(ctx, tenant, c.cutoff(now), n)
	if err != nil {
		return fmt.Errorf("backlog of %q: %w", tenant, err)
	}
	c.remember(tenant, left, now)
	return nil
}

// Get returns a tenant's count. From Redis, the answer may be MaxStale old
// but includes this process's Adds since.
func (c *Counter) Get(ctx context.Context, tenant string) (int64, error) {
	return c.get(ctx, tenant, 0, c.cfg.MaxStale)
}

// FreshStale is how old a count read for a refusal at max_backlog may be
// (Tracker.Fresh): a tenth of MaxStaleDefault.
const FreshStale = 10 * time.Millisecond

// get is Get with the call to Redis, when the cache holds no answer
// younger than maxStale, bounded by timeout (0: by ctx alone).
func (c *Counter) get(ctx context.Context, tenant string, timeout, maxStale time.Duration) (int64, error) {
	now := c.cfg.Now()
	_, mem := c.store.(*memStore)
	if !mem && c.cfg.MaxStale > 0 {
		c.mu.Lock()
		e, ok := c.cache[tenant]
		c.mu.Unlock()
		if ok && now.Sub(e.at) < min(maxStale, c.cfg.MaxStale) {
			return e.n, nil
		}
	}
	if timeout > 0 && !mem { // in process, nothing to wait for
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	n, err := c.store.take(ctx, tenant, c.cutoff(now), 0)
	if err != nil {
		return 0, fmt.Errorf("backlog of %q: %w", tenant, err)
	}
	c.remember(tenant, n, now)
	return n, nil
}

// refreshChunk bounds the tenants one call of Refresh reads, so that one
// script does not hold Redis for long.
const refreshChunk = 256

// Refresh reads the counts of tenants from Redis into the cache that Get
// answers from, in one call per refreshChunk tenants. Without Redis it
// does nothing.
func (c *Counter) Refresh(ctx context.Context, tenants []string) error {
	rs, ok := c.store.(*redisStore)
	if !ok {
		return nil
	}
	for len(tenants) > 0 {
		chunk := tenants[:min(len(tenants), refreshChunk)]
		tenants = tenants[len(chunk):]
		now := c.cfg.Now()
		ns, err := rs.counts(ctx, chunk, c.cutoff(now))
		if err != nil {
			return fmt.Errorf("backlogs of %d tenants: %w", len(chunk), err)
		}
		for i, tenant := range chunk {
			c.remember(tenant, ns[i], now)
		}
	}
	return nil
}

// remember caches a tenant's count n, read from Redis at asOf, unless
// the cache holds a reading or an Add of this process since.
func (c *Counter) remember(tenant string, n int64, asOf time.Time) {
	if _, mem := c.store.(*memStore); mem {
		return
	}
	c.mu.Lock()
	if e, ok := c.cache[tenant]; !ok || !e.at.After(asOf) && !e.added.After(asOf) {
		c.cache[tenant] = cached{n: n, at: asOf}
	}
	c.mu.Unlock()
}

// Reconcile caps every tenant's count at total, the number of messages on
// all the queues, taking the excess from the oldest buckets.
func (c *Counter) Reconcile(ctx context.Context, total int64) error {
	if err := c.store.capAt(ctx, c.cutoff(c.cfg.Now()), max(total, 0)); err != nil {
		return fmt.Errorf("reconcile backlogs: %w", err)
	}
	c.mu.Lock()
	clear(c.cache)
	c.mu.Unlock()
	return nil
}
