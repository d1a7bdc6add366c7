package schedule

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// lease is a leader lease in Redis: a key holding the leader's identity,
// with a TTL.
type lease struct {
	rdb      redis.UniversalClient
	key, id  string
	ttl      time.Duration
	renewLua *redis.Script
	freeLua  *redis.Script
}

// renewScript extends the lease if this process still holds it.
const renewScript = `
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return 1
end
return 0`

// releaseScript deletes the lease if this process holds it.
const releaseScript = `
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`

func newLease(rdb redis.UniversalClient, key, id string, ttl time.Duration) *lease {
	return &lease{
		rdb: rdb, key: key, id: id, ttl: ttl,
		renewLua: redis.NewScript(renewScript),
		freeLua:  redis.NewScript(releaseScript),
	}
}

// acquire takes the lease if no one holds it.
func (l *lease) acquire(ctx context.Context) (bool, error) {
	return l.rdb.SetNX(ctx, l.key, l.id, l.ttl).Result()
}

// renew extends the lease; false means another process holds it.
func (l *lease) renew(ctx context.Context) (bool, error) {
	n, err := l.renewLua.Run(ctx, l.rdb, []string{l.key}, l.id, l.ttl.Milliseconds()).Int()
	return n == 1, err
}

// release gives the lease up if held.
func (l *lease) release(ctx context.Context) error {
	return l.freeLua.Run(ctx, l.rdb, []string{l.key}, l.id).Err()
}
