package idempotency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures a Redis store.
type RedisConfig struct {
	Client redis.UniversalClient // required
	// Prefix goes in front of every key ("fairq:").
	Prefix string
	// Window and Lease are as in MemoryConfig.
	Window, Lease time.Duration
	// Now is the clock of leases; nil uses time.Now. Gateways compare
	// leases across their clocks, which are assumed to agree to well
	// within a lease.
	Now func() time.Time
}

// Redis keeps the keys of a fleet: a hash per key (see redisKey), with
// fields s (state: p owned, u abandoned, d done), t (owner token), l
// (lease end, unix ms), i (id), f (fingerprint) and a (answer), expiring
// after the window.
type Redis struct {
	c             redis.UniversalClient
	prefix        string
	window, lease time.Duration
	now           func() time.Time
}

// NewRedis returns a Redis store.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if cfg.Client == nil {
		return nil, errors.New("idempotency: Redis needs a Client")
	}
	r := &Redis{c: cfg.Client, prefix: cfg.Prefix, window: cmp.Or(cfg.Window, WindowDefault), lease: cmp.Or(cfg.Lease, LeaseDefault), now: cfg.Now}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// redisKey is where a key lives. The "idempotency:" segment differs from
// the "idem:" of releases that stored a plain string, so that the two
// never meet during a rolling upgrade.
func (r *Redis) redisKey(key string) string { return r.prefix + "idempotency:" + key }

// claimScript: KEYS key; ARGV token, id, fingerprint, now ms, lease end
// ms, window ms. Returns {outcome, id or answer or lease left ms}.
var claimScript = redis.NewScript(`
local s, t, l, i, f, a = unpack(redis.call('HMGET', KEYS[1], 's', 't', 'l', 'i', 'f', 'a'))
if not s then
  redis.call('HSET', KEYS[1], 's', 'p', 't', ARGV[1], 'l', ARGV[5], 'i', ARGV[2], 'f', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  return {'owned', ARGV[2]}
end
if f ~= ARGV[3] then return {'reused', ''} end
if s == 'd' then return {'done', a or ''} end
if s == 'p' and tonumber(l) > tonumber(ARGV[4]) then
  return {'busy', tostring(tonumber(l) - tonumber(ARGV[4]))}
end
redis.call('HSET', KEYS[1], 's', 'p', 't', ARGV[1], 'l', ARGV[5])
return {'owned', i}
`)

// resolveScript: KEYS key; ARGV token, state (d, u or del), answer,
// window ms. Acts only for the owner.
var resolveScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 's') ~= 'p' or redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then return redis.call('DEL', KEYS[1]) end
redis.call('HDEL', KEYS[1], 't', 'l')
redis.call('HSET', KEYS[1], 's', ARGV[2])
if ARGV[2] == 'd' then
  redis.call('HSET', KEYS[1], 'a', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
`)

// Claim claims a key (see the package documentation).
func (r *Redis) Claim(ctx context.Context, req Request) (Claim, error) {
	token := newToken()
	now := r.now()
	v, err := claimScript.Run(ctx, r.c, []string{r.redisKey(req.Key)},
		token, req.ID, req.Fingerprint, now.UnixMilli(), now.Add(r.lease).UnixMilli(), r.window.Milliseconds()).StringSlice()
	if err != nil {
		return Claim{}, fmt.Errorf("%w: claim: %w", ErrUnavailable, err)
	}
	if len(v) != 2 {
		return Claim{}, fmt.Errorf("%w: claim: unexpected answer %q", ErrUnavailable, v)
	}
	switch v[0] {
	case "owned":
		return Claim{Outcome: Owned, Token: token, ID: v[1]}, nil
	case "done":
		return Claim{Outcome: Done, Answer: []byte(v[1])}, nil
	case "reused":
		return Claim{Outcome: Reused}, nil
	}
	ms, _ := strconv.ParseInt(v[1], 10, 64)
	return Claim{Outcome: InProgress, RetryAfter: time.Duration(ms) * time.Millisecond}, nil
}

// Complete stores the answer of an owned key for the window.
func (r *Redis) Complete(ctx context.Context, key, token string, answer []byte) error {
	return r.resolve(ctx, key, token, "d", answer)
}

// Release forgets an owned key: nothing was sent.
func (r *Redis) Release(ctx context.Context, key, token string) error {
	return r.resolve(ctx, key, token, "del", nil)
}

// Abandon frees an owned key and keeps its id for the next claim.
func (r *Redis) Abandon(ctx context.Context, key, token string) error {
	return r.resolve(ctx, key, token, "u", nil)
}

func (r *Redis) resolve(ctx context.Context, key, token, state string, answer []byte) error {
	err := resolveScript.Run(ctx, r.c, []string{r.redisKey(key)}, token, state, answer, r.window.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, state, err)
	}
	return nil
}
