package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisIdem keeps idempotency keys in Redis, for the fleet. A key's value
// is "p:<token>" while its owner sends (expiring after the lease) and
// "d:<answer>" once done (expiring after the window).
type redisIdem struct {
	c redis.UniversalClient
}

var _ idemStore = (*redisIdem)(nil)

// claimScript returns the current value, or sets "p:<token>" with the
// lease and returns nil. KEYS key; ARGV value, lease ms.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
`)

// completeScript replaces "p:<token>" with the answer. KEYS key; ARGV
// owner value, answer value, window ms.
var completeScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`)

// releaseScript deletes "p:<token>". KEYS key; ARGV owner value.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (r *redisIdem) claim(ctx context.Context, key string, lease time.Duration) (claim, error) {
	token := newToken()
	v, err := claimScript.Run(ctx, r.c, []string{key}, "p:"+token, lease.Milliseconds()).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return claim{state: claimOwned, token: token}, nil
	case err != nil:
		return claim{}, fmt.Errorf("%w: idempotency key: %w", errUnavailable, err)
	}
	if res, ok := strings.CutPrefix(v, "d:"); ok {
		return claim{state: claimDone, result: []byte(res)}, nil
	}
	return claim{state: claimPending}, nil
}

func (r *redisIdem) complete(ctx context.Context, key, token string, result []byte, window time.Duration) error {
	err := completeScript.Run(ctx, r.c, []string{key}, "p:"+token, "d:"+string(result), window.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("%w: idempotency key: %w", errUnavailable, err)
	}
	return nil
}

func (r *redisIdem) release(ctx context.Context, key, token string) error {
	if err := releaseScript.Run(ctx, r.c, []string{key}, "p:"+token).Err(); err != nil {
		return fmt.Errorf("%w: idempotency key: %w", errUnavailable, err)
	}
	return nil
}
