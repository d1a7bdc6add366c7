package sharding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/queue"
)

// Defaults of Config.
const (
	ShardSizeDefault       = 2
	IntervalDefault        = time.Second
	StaleAfterFactor       = 5 // StaleAfter defaults to this many intervals
	PollConcurrencyDefault = 8
	KeyPrefixDefault       = "fairq:"
)

// ErrInvalidConfig is returned by NewTracker for a Config it cannot run.
var ErrInvalidConfig = errors.New("invalid sharding config")

// DepthReader reads the approximate depth of a queue. queue.Backend
// satisfies it.
type DepthReader interface {
	Depth(ctx context.Context, queue string) (queue.Depth, error)
}

var _ DepthReader = queue.Backend(nil)

// Config configures a Tracker.
type Config struct {
	// Reader reads queue depths; required.
	Reader DepthReader
	// Queues are the live queues of the pool, in order: Pick returns an
	// index into them. Use queue.PoolNames(prefix, n).Live. Required.
	Queues []string
	// ShardSize is k, the number of queues of a tenant's shard.
	ShardSize int
	// Interval is how often the depths are read (or the shared reading
	// checked).
	Interval time.Duration
	// StaleAfter is the age past which a reading is not trusted and Pick
	// chooses at random within the shard. Default StaleAfterFactor ×
	// Interval; at least Interval.
	StaleAfter time.Duration
	// PollTimeout bounds one refresh (Redis and backend calls). Default
	// Interval.
	PollTimeout time.Duration
	// PollConcurrency is how many queues are read at once.
	PollConcurrency int
	// Redis, when set, shares readings across the fleet.
	Redis redis.UniversalClient
	// KeyPrefix goes in front of every Redis key, separator included
	// ("fairq:").
	KeyPrefix string
	Logger    *slog.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series of
	// component="queue_depths" join: Redis unreachable, and each refresh
	// that read the queues itself for want of it. Nil keeps them
	// registered nowhere.
	RedisMetrics *degrade.Metrics
}

func (c Config) withDefaults() Config {
	c.ShardSize = cmp.Or(c.ShardSize, ShardSizeDefault)
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.StaleAfter = cmp.Or(c.StaleAfter, StaleAfterFactor*c.Interval)
	c.PollTimeout = cmp.Or(c.PollTimeout, c.Interval)
	c.PollConcurrency = cmp.Or(c.PollConcurrency, PollConcurrencyDefault)
	c.KeyPrefix = cmp.Or(c.KeyPrefix, KeyPrefixDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Reader == nil:
		return fmt.Errorf("%w: no depth reader", ErrInvalidConfig)
	case len(c.Queues) == 0:
		return fmt.Errorf("%w: no queues", ErrInvalidConfig)
	case c.Interval < 0 || c.StaleAfter < c.Interval:
		return fmt.Errorf("%w: interval %v, stale after %v: want 0 < interval ≤ stale after", ErrInvalidConfig, c.Interval, c.StaleAfter)
	case c.PollTimeout < 0:
		return fmt.Errorf("%w: poll timeout %v", ErrInvalidConfig, c.PollTimeout)
	case c.PollConcurrency < 1:
		return fmt.Errorf("%w: poll concurrency %d", ErrInvalidConfig, c.PollConcurrency)
	}
	seen := make(map[string]bool, len(c.Queues))
	for _, q := range c.Queues {
		if q == "" || seen[q] {
			return fmt.Errorf("%w: queue name %q empty or repeated", ErrInvalidConfig, q)
		}
		seen[q] = true
	}
	return nil
}
