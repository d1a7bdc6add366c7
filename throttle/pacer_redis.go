package throttle

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisPacer hands out turns of a key at a rate, as Pacer does, from one
// line kept in Redis: every process sharing the Redis takes its turns
// from it, so that work put off by any of them comes back at the key's
// rate, whichever process put off how much. Redis's clock is the only
// clock. A Reserve is one round trip running one Lua script.
type RedisPacer struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisPacer returns a RedisPacer on cfg's client, its keys under
// cfg's prefix.
func NewRedisPacer(cfg RedisConfig) (*RedisPacer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &RedisPacer{client: cfg.Client, prefix: cfg.Prefix}, nil
}

// reserveScript: KEYS[1] the next free turn (unix µs, Redis's clock);
// ARGV the interval between turns, the earliest wait and the horizon,
// in µs. It returns the wait until the turn taken, or -1 when the turn
// is beyond the horizon (none is taken). The key lives until its next
// turn is past.
var reserveScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local turn = now + tonumber(ARGV[2])
local next = tonumber(redis.call('GET', KEYS[1]) or '0')
if next > turn then
  turn = next
end
local wait = turn - now
if wait > tonumber(ARGV[3]) then
  return -1
end
local after = turn + tonumber(ARGV[1])
redis.call('SET', KEYS[1], after, 'PX', math.floor((after - now) / 1000) + 1)
return wait
`)

// Reserve takes the next turn of key, turns coming rate a second
// fleet-wide and none sooner than earliest from now, and returns the
// wait until it; see Pacer.Reserve.
func (p *RedisPacer) Reserve(ctx context.Context, key string, rate float64, earliest, horizon time.Duration) (time.Duration, error) {
	earliest = max(earliest, 0)
	if (Limit{Rate: rate}).Unlimited() {
		return min(earliest, horizon), nil
	}
	interval := math.Ceil(1e6 / rate)
	us, err := reserveScript.Run(ctx, p.client, []string{redisPacerKey(p.prefix, key)},
		int64(math.Min(interval, math.MaxInt64/2)), earliest.Microseconds(), horizon.Microseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("pace %q: %w", key, err)
	}
	if us < 0 {
		return horizon, nil
	}
	return time.Duration(us) * time.Microsecond, nil
}
