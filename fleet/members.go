package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Member is a worker of the fleet as the registry in Redis has it.
type Member struct {
	ID string
	// LastHeartbeat is the worker's latest heartbeat, on Redis's clock.
	LastHeartbeat time.Time
}

// Members returns the workers registered under prefix that beat within
// three heartbeats (the ones Size counts), latest heartbeat first.
func Members(ctx context.Context, client redis.UniversalClient, prefix string, heartbeat time.Duration) ([]Member, error) {
	res, err := membersScript.Run(ctx, client, []string{workersKey(prefix)}, (staleBeats * heartbeat).Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("fleet: members: %w", err)
	}
	out := make([]Member, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		ms, _ := res[i+1].(int64)
		out = append(out, Member{ID: id, LastHeartbeat: time.UnixMilli(ms)})
	}
	return out, nil
}

// membersScript: KEYS[1] the workers; ARGV stale ms. It returns id,
// heartbeat ms, … of the workers heard from within stale, latest first.
var membersScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', now - tonumber(ARGV[1]), 'WITHSCORES')
local out = {}
for i = 1, #r, 2 do
  out[#out + 1] = r[i]
  out[#out + 1] = math.floor(tonumber(r[i + 1]))
end
return out
`)
