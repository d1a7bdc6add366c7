package dedupe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
)

// RedisConfig configures a Redis store.
type RedisConfig struct {
	Client redis.UniversalClient // required
	// Prefix goes in front of every key ("fairq:").
	Prefix string
	// Window and Lease are as in MemoryConfig.
	Window, Lease time.Duration
	// Dependency, if not nil, follows Redis's health: while Redis rests
	// after a failure, calls fail at once with ErrUnavailable (and count
	// as fallbacks) rather than wait for a timeout.
	Dependency *degrade.Dependency
}

// Redis keeps the ids of a fleet: one key per id, "r:<token>" while a
// worker runs the message (expiring with its lease) and "d" once it ran
// (expiring after the window).
type Redis struct {
	c             redis.UniversalClient
	prefix        string
	window, lease time.Duration
	dep           *degrade.Dependency
}

// NewRedis returns a Redis store.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if cfg.Client == nil {
		return nil, errors.New("dedupe: Redis needs a Client")
	}
	return &Redis{c: cfg.Client, prefix: cfg.Prefix, window: cmp.Or(cfg.Window, WindowDefault), lease: cmp.Or(cfg.Lease, LeaseDefault), dep: cfg.Dependency}, nil
}

func (r *Redis) key(id string) string { return r.prefix + "dedupe:" + id }

// claimScript: KEYS key; ARGV "r:<token>", lease ms. Returns "run", "d",
// or the lease left in ms of another worker's claim.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 'run'
end
if v == 'd' then return 'd' end
return tostring(redis.call('PTTL', KEYS[1]))
`)

// resolveScript: KEYS key; ARGV "r:<token>", action (done, release,
// renew), ms. Acts only for the claim's owner.
var resolveScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'done' then
  redis.call('SET', KEYS[1], 'd', 'PX', ARGV[3])
elseif ARGV[2] == 'release' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
`)

// Claim claims a message id (see the package documentation).
func (r *Redis) Claim(ctx context.Context, id string) (Claim, error) {
	if err := r.resting(); err != nil {
		return Claim{}, err
	}
	token := newToken()
	v, err := claimScript.Run(ctx, r.c, []string{r.key(id)}, "r:"+token, r.lease.Milliseconds()).Text()
	if err = r.answered(ctx, err); err != nil {
		return Claim{}, fmt.Errorf("%w: claim: %w", ErrUnavailable, err)
	}
	switch v {
	case "run":
		return Claim{Outcome: Run, Token: token}, nil
	case "d":
		return Claim{Outcome: Duplicate}, nil
	}
	ms, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return Claim{Outcome: Running, RetryAfter: time.Duration(max(ms, 0)) * time.Millisecond}, nil
}

// Complete remembers a claimed id as done for the window.
func (r *Redis) Complete(ctx context.Context, id, token string) error {
	return r.resolve(ctx, id, token, "done", r.window)
}

// Release forgets a claimed id: the message may run again.
func (r *Redis) Release(ctx context.Context, id, token string) error {
	return r.resolve(ctx, id, token, "release", 0)
}

// Renew extends the leases of claims still held, in one round trip.
func (r *Redis) Renew(ctx context.Context, leases []Lease) error {
	if len(leases) == 0 {
		return nil
	}
	if err := r.resting(); err != nil {
		return err
	}
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, l := range leases {
			resolveScript.Eval(ctx, p, []string{r.key(l.ID)}, "r:"+l.Token, "renew", r.lease.Milliseconds()) // EVAL: a pipeline cannot fall back from a missing EVALSHA
		}
		return nil
	})
	if err = r.answered(ctx, err); err != nil {
		return fmt.Errorf("%w: renew: %w", ErrUnavailable, err)
	}
	return nil
}

func (r *Redis) resolve(ctx context.Context, id, token, action string, d time.Duration) error {
	if err := r.resting(); err != nil {
		return err
	}
	err := resolveScript.Run(ctx, r.c, []string{r.key(id)}, "r:"+token, action, d.Milliseconds()).Err()
	if err = r.answered(ctx, err); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, action, err)
	}
	return nil
}

// errResting is the error of a call not made while Redis rests.
var errResting = fmt.Errorf("%w: redis failed moments ago; not asked", ErrUnavailable)

// resting returns errResting, and counts a fallback, while the
// Dependency rests after a failure.
func (r *Redis) resting() error {
	if r.dep != nil && r.dep.Resting() {
		r.dep.Fallback()
		return errResting
	}
	return nil
}

// answered records Redis's answer with the Dependency; a Nil reply is an
// answer.
func (r *Redis) answered(ctx context.Context, err error) error {
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if r.dep == nil || ctx.Err() != nil {
		return err
	}
	if err != nil {
		r.dep.Failed(ctx, err)
		r.dep.Fallback()
	} else {
		r.dep.OK(ctx)
	}
	return err
}
