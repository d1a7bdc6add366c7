package throttle

import (
	"context"
	"fmt"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// RedisConfig configures a RedisLimiter.
type RedisConfig struct {
	// Client is the Redis connection; required.
	Client redis.UniversalClient
	// Prefix goes in front of every key, as "fairq:" does; the bucket of key
	// k is then the Redis key "rate:" + Prefix + k.
	Prefix string
}

func (c RedisConfig) validate() error {
	if c.Client == nil {
		return fmt.Errorf("throttle: RedisConfig.Client is required")
	}
	return nil
}

// RedisLimiter is a RateLimiter whose buckets are GCRA state in Redis,
// through redis_rate, so that every process sharing the Redis shares each
// bucket. A call is one round trip running one Lua script.
type RedisLimiter struct {
	rl     *redis_rate.Limiter
	prefix string
}

var _ RateLimiter = (*RedisLimiter)(nil)

// NewRedisLimiter returns a RedisLimiter.
func NewRedisLimiter(cfg RedisConfig) (*RedisLimiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &RedisLimiter{rl: redis_rate.NewLimiter(cfg.Client), prefix: cfg.Prefix}, nil
}

// Allow implements RateLimiter.
func (l *RedisLimiter) Allow(ctx context.Context, key string, lim Limit, n int) (Decision, error) {
	if lim.Unlimited() || n <= 0 {
		return unlimited(lim, max(n, 0)), nil
	}
	lim.Burst = max(lim.Burst, 1)
	// One token every 1/Rate seconds: redis_rate's emission interval is
	// Period/Rate, and a Period of 1/Rate seconds keeps fractional rates.
	res, err := l.rl.AllowAtMost(ctx, redisRateKey(l.prefix, key), redis_rate.Limit{
		Rate:   1,
		Burst:  lim.Burst,
		Period: seconds(1 / lim.Rate),
	}, n)
	if err != nil {
		return Decision{}, fmt.Errorf("rate limit %q: %w", key, err)
	}
	d := Decision{
		Allowed:    res.Allowed,
		Limit:      lim,
		Remaining:  res.Remaining,
		ResetAfter: max(res.ResetAfter, 0),
	}
	if d.Allowed < n {
		if res.RetryAfter > 0 {
			d.RetryAfter = res.RetryAfter
		} else {
			// Part of a batch was granted; the next token is one
			// emission interval after the bucket ran dry.
			d.RetryAfter = seconds(1 / lim.Rate)
		}
	}
	return d, nil
}
