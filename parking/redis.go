package parking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Lot of a fleet. Every key carries one hash tag, so that the
// scripts that touch a tenant's spots and the set of tenants together work
// on a Redis Cluster: a hash of spots per tenant and a set of the tenants
// that have some.
type Redis struct {
	c      redis.UniversalClient
	prefix string
	ttl    time.Duration
	now    func() time.Time
}

// NewRedis returns a Redis lot. Its keys go after prefix ("fairq:") and
// expire ttl after their latest spot (at least the longest a message is
// parked). now nil uses time.Now.
func NewRedis(c redis.UniversalClient, prefix string, ttl time.Duration, now func() time.Time) (*Redis, error) {
	if c == nil {
		return nil, errors.New("parking: Redis needs a client")
	}
	if now == nil {
		now = time.Now
	}
	return &Redis{c: c, prefix: prefix, ttl: ttl, now: now}, nil
}

// keys returns the hash of a tenant's spots and the set of tenants with
// spots, in one slot.
func (r *Redis) keys(tenant string) []string {
	tag := "{" + r.prefix + "parking}"
	return []string{tag + ":spots:" + tenant, tag + ":tenants"}
}

// parkScript: KEYS spots, tenants; ARGV field, spot, ttl ms, tenant.
var parkScript = redis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`)

// takeScript: KEYS spots, tenants; ARGV tenant. Returns the spots and
// forgets them.
var takeScript = redis.NewScript(`
local v = redis.call('HVALS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return v
`)

// Park records a parked message of a tenant.
func (r *Redis) Park(ctx context.Context, tenant string, s Spot) error {
	raw, _ := json.Marshal(s) // cannot fail: strings and a number
	err := parkScript.Run(ctx, r.c, r.keys(tenant), s.Queue+"\x1f"+s.Handle, raw, r.ttl.Milliseconds(), tenant).Err()
	if err != nil {
		return fmt.Errorf("%w: park: %w", ErrUnavailable, err)
	}
	return nil
}

// Tenants returns the tenants with parked messages.
func (r *Redis) Tenants(ctx context.Context) ([]string, error) {
	v, err := r.c.SMembers(ctx, r.keys("")[1]).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: tenants: %w", ErrUnavailable, err)
	}
	return v, nil
}

// Take removes and returns a tenant's spots whose invisibility has not
// ended on its own; of the workers that take at once, one gets each spot.
func (r *Redis) Take(ctx context.Context, tenant string) ([]Spot, error) {
	raws, err := takeScript.Run(ctx, r.c, r.keys(tenant), tenant).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: take: %w", ErrUnavailable, err)
	}
	spots := make([]Spot, 0, len(raws))
	for _, raw := range raws {
		var s Spot
		if json.Unmarshal([]byte(raw), &s) == nil {
			spots = append(spots, s)
		}
	}
	return live(spots, r.now()), nil
}
