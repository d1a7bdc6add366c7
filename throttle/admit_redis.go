package throttle

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RedisAdmitterConfig configures a RedisAdmitter.
type RedisAdmitterConfig struct {
	// Semaphore holds the slots, renews them and gives them back; its
	// Client is the Admitter's. Required.
	Semaphore *RedisSemaphore
	// RatePrefix is the Prefix of the RedisLimiter whose buckets the
	// tokens are taken from.
	RatePrefix string
}

// RedisAdmitter is the Admitter of a RedisSemaphore's slots and a
// RedisLimiter's tokens: one round trip running one Lua script, where
// asking for them one by one costs a round trip each, and one more to give
// back the slots taken when a token is then refused. Nothing is taken
// unless everything is: a refused Need leaves no slot to give back and no
// token lost.
//
// The script touches every key of a Need, so on a Redis Cluster they must
// share one hash slot: keys that carry one hash tag, as a tenant's do. The
// slots are the semaphore's leases, renewed and given back by it as its
// own; the buckets are redis_rate's GCRA state, which a RedisLimiter with
// the same prefix reads and writes alike. If a reply is lost (a timeout),
// the slots may have been taken without this process knowing: they are
// not renewed and expire within the semaphore's Lease.
type RedisAdmitter struct {
	sem        *RedisSemaphore
	ratePrefix string
}

// NewRedisAdmitter returns a RedisAdmitter.
func NewRedisAdmitter(cfg RedisAdmitterConfig) (*RedisAdmitter, error) {
	if cfg.Semaphore == nil {
		return nil, errors.New("throttle: RedisAdmitterConfig.Semaphore is required")
	}
	return &RedisAdmitter{sem: cfg.Semaphore, ratePrefix: cfg.RatePrefix}, nil
}

// RedisAdmitKeys returns the Redis keys a RedisAdmitter touches for n,
// its semaphore's prefix semPrefix and its RatePrefix ratePrefix: every
// one of them in one script, so on a Redis Cluster they must share a hash
// slot.
func RedisAdmitKeys(semPrefix, ratePrefix string, n Need) []string {
	keys := make([]string, 0, len(n.Slots)+len(n.Tokens))
	for _, sl := range n.Slots {
		keys = append(keys, redisSemaphoreKey(semPrefix, sl.Key))
	}
	for _, t := range n.Tokens {
		keys = append(keys, redisRateBucketKey(ratePrefix, t.Key))
	}
	return keys
}

// admitScript: KEYS the sorted sets of the slots, then the buckets;
// ARGV the number of slots, the lease in ms, a limit and a lease id for
// each slot, then an emission interval (seconds) and a burst for each
// bucket. It returns {0} when it took everything, {1, i} when the i-th
// slot's semaphore (from 1) is full, {2, j, retry after in seconds} when
// the j-th bucket has no token. A bucket is redis_rate's: its theoretical
// arrival time in seconds since 2017-01-01 on Redis's clock.
var admitScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = (tonumber(t[1]) - 1483228800) + tonumber(t[2]) / 1000000
local ns = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
for i = 1, ns do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ms)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[1 + 2 * i]) then
    return {1, i}
  end
end
local tats = {}
local b = 2 + 2 * ns
for j = 1, #KEYS - ns do
  local ei = tonumber(ARGV[b + 2 * j - 1])
  local burst = tonumber(ARGV[b + 2 * j])
  local tat = math.max(tonumber(redis.call('GET', KEYS[ns + j]) or now), now)
  local diff = now - (tat - ei * burst)
  if diff < ei then
    return {2, j, tostring(ei - diff)}
  end
  tats[j] = tat + ei
end
for i = 1, ns do
  redis.call('ZADD', KEYS[i], ms + lease, ARGV[2 + 2 * i])
  redis.call('PEXPIRE', KEYS[i], lease)
end
for j = 1, #tats do
  if tats[j] > now then
    redis.call('SET', KEYS[ns + j], tats[j], 'EX', math.ceil(tats[j] - now))
  end
end
return {0}
`)

// TryAdmit implements Admitter.
func (a *RedisAdmitter) TryAdmit(ctx context.Context, n Need) (Admission, error) {
	s := a.sem
	res := Admission{Slot: -1, Token: -1}
	keys := make([]string, 0, len(n.Slots)+len(n.Tokens))
	args := make([]any, 2, 2+2*(len(n.Slots)+len(n.Tokens)))
	args[1] = s.cfg.Lease.Milliseconds()
	// Only the limited slots and buckets go to the script: slots[k] and
	// tokens[k] are the Need's indices of its k-th of each.
	var leases []lease
	var slots, tokens []int
	for i, sl := range n.Slots {
		if sl.Limit <= 0 {
			continue
		}
		l := s.newLease(sl.Key)
		keys = append(keys, s.redisKey(sl.Key))
		args = append(args, sl.Limit, l.id)
		leases = append(leases, l)
		slots = append(slots, i)
	}
	args[0] = len(leases)
	for j, t := range n.Tokens {
		if t.Limit.Unlimited() {
			continue
		}
		keys = append(keys, redisRateBucketKey(a.ratePrefix, t.Key))
		args = append(args, 1/t.Limit.Rate, max(t.Limit.Burst, 1))
		tokens = append(tokens, j)
	}
	if len(keys) > 0 {
		reply, err := admitScript.Run(ctx, s.cfg.Client, keys, args...).Slice()
		if err != nil {
			return Admission{Slot: -1, Token: -1}, fmt.Errorf("admit %q: %w", keys[0], err)
		}
		if refused, err := refusal(reply, slots, tokens, &res); refused || err != nil {
			s.answered(nil)
			return res, err
		}
	}
	taken := s.answered(leases)
	res.Permits = make([]Permit, len(n.Slots))
	for i := range res.Permits {
		res.Permits[i] = newPermit(func() {}) // no limit: nothing to give back
	}
	for k, i := range slots {
		res.Permits[i] = taken[k]
	}
	res.Admitted = true
	return res, nil
}

// refusal reads admitScript's reply into res: false when it took
// everything.
func refusal(reply []any, slots, tokens []int, res *Admission) (bool, error) {
	code, _ := replyInt(reply, 0)
	k, ok := replyInt(reply, 1)
	switch {
	case code == 0 && len(reply) == 1:
		return false, nil
	case code == 1 && ok && k >= 1 && k <= len(slots):
		res.Slot = slots[k-1]
		return true, nil
	case code == 2 && ok && k >= 1 && k <= len(tokens) && len(reply) == 3:
		retry, err := strconv.ParseFloat(fmt.Sprint(reply[2]), 64)
		if err != nil {
			break
		}
		res.Token, res.RetryAfter = tokens[k-1], seconds(retry)
		return true, nil
	}
	return false, fmt.Errorf("admit: unexpected reply %v", reply)
}

// replyInt returns the i-th element of a script's reply as an int.
func replyInt(reply []any, i int) (int, bool) {
	if i >= len(reply) {
		return -1, false
	}
	v, ok := reply[i].(int64)
	return int(v), ok
}
