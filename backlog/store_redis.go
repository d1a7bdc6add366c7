package backlog

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisStore keeps the buckets in Redis (see keys.go).
type redisStore struct {
	c    redis.UniversalClient
	keys redisKeys
}

var _ store = (*redisStore)(nil)

// addScript: KEYS hash, tenants set; ARGV bucket, n, ttl seconds, tenant.
var addScript = redis.NewScript(`
redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
return 1
`)

// takeScript drops buckets older than the cutoff (or empty), then takes
// ARGV[2] from the oldest buckets ("take"), or all above ARGV[2] ("cap"),
// and returns what is left. KEYS hash, tenants set; ARGV cutoff, n, mode,
// tenant.
var takeScript = redis.NewScript(`
local h = redis.call('HGETALL', KEYS[1])
local cutoff = tonumber(ARGV[1])
local order, name, val = {}, {}, {}
local sum = 0
for i = 1, #h, 2 do
  local f, v = tonumber(h[i]), tonumber(h[i + 1])
  if f == nil or v == nil or f < cutoff or v <= 0 then
    redis.call('HDEL', KEYS[1], h[i])
  else
    table.insert(order, f)
    name[f], val[f] = h[i], v
    sum = sum + v
  end
end
local take = tonumber(ARGV[2])
if ARGV[3] == 'cap' then take = sum - take end
if take > 0 then
  table.sort(order)
  for _, f in ipairs(order) do
    if take <= 0 then break end
    local t = math.min(val[f], take)
    if t == val[f] then
      redis.call('HDEL', KEYS[1], name[f])
    else
      redis.call('HINCRBY', KEYS[1], name[f], -t)
    end
    take = take - t
    sum = sum - t
  end
end
if sum == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[4])
end
return sum
`)

// countsScript reads the counts of tenants without changing them: the
// sum of each hash's buckets from the cutoff on. KEYS the tenants'
// hashes; ARGV cutoff.
var countsScript = redis.NewScript(`
local cutoff = tonumber(ARGV[1])
local out = {}
for k = 1, #KEYS do
  local h = redis.call('HGETALL', KEYS[k])
  local sum = 0
  for i = 1, #h, 2 do
    local f, v = tonumber(h[i]), tonumber(h[i + 1])
    if f ~= nil and v ~= nil and f >= cutoff and v > 0 then sum = sum + v end
  end
  out[k] = sum
end
return out
`)

// counts returns the counts of tenants, in their order.
func (s *redisStore) counts(ctx context.Context, tenants []string, cutoff int64) ([]int64, error) {
	keys := make([]string, len(tenants))
	for i, t := range tenants {
		keys[i] = s.keys.tenant(t)
	}
	ns, err := countsScript.Run(ctx, s.c, keys, cutoff).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if len(ns) != len(tenants) {
		return nil, fmt.Errorf("%w: %d counts for %d tenants", ErrUnavailable, len(ns), len(tenants))
	}
	return ns, nil
}

func (s *redisStore) add(ctx context.Context, tenant string, bucket, n int64, ttl time.Duration) error {
	err := addScript.Run(ctx, s.c, s.keys.script(tenant), bucket, n, int64(ttl/time.Second), tenant).Err()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *redisStore) take(ctx context.Context, tenant string, cutoff, n int64) (int64, error) {
	return s.run(ctx, tenant, cutoff, n, "take")
}

func (s *redisStore) run(ctx context.Context, tenant string, cutoff, n int64, mode string) (int64, error) {
	left, err := takeScript.Run(ctx, s.c, s.keys.script(tenant), cutoff, n, mode, tenant).Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return left, nil
}

func (s *redisStore) capAt(ctx context.Context, cutoff, limit int64) error {
	var cursor uint64
	for {
		tenants, next, err := s.c.SScan(ctx, s.keys.tenants(), cursor, "", 100).Result()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		for _, t := range tenants {
			if _, err := s.run(ctx, t, cutoff, limit, "cap"); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
