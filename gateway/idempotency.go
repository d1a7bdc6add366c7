package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fairq/fairq/idempotency"
	"github.com/fairq/fairq/internal/degrade"
)

// idemStore is an idempotency store (idempotency.Memory, idempotency.Redis).
type idemStore interface {
	Claim(ctx context.Context, r idempotency.Request) (idempotency.Claim, error)
	Complete(ctx context.Context, key, token string, answer []byte) error
	Release(ctx context.Context, key, token string) error
	Abandon(ctx context.Context, key, token string) error
}

var (
	_ idemStore = (*idempotency.Memory)(nil)
	_ idemStore = (*idempotency.Redis)(nil)
)

// idempotencyKeys is the gateway's memory of Idempotency-Keys: in Redis
// when configured, with the in-process store as the fallback while Redis
// is unreachable (fail open), else in process.
type idempotencyKeys struct {
	redis idemStore // nil without Redis
	local *idempotency.Memory
	dep   *degrade.Dependency
}

// held is an owned idempotency key.
type held struct {
	store      idemStore
	key, token string
}

// idemClaim claims a tenant's idempotency key for a message about to be
// sent with id. It returns the claim, and the key to resolve with
// idemResolve when the claim is Owned.
func (s *Server) idemClaim(ctx context.Context, tenant, key, fingerprint, id string) (idempotency.Claim, *held, error) {
	req := idempotency.Request{Key: idempotency.Key(tenant, key), Fingerprint: fingerprint, ID: id}
	k := &s.idem
	var store idemStore = k.local
	if k.redis != nil {
		if !k.dep.Resting() {
			c, err := k.redis.Claim(ctx, req)
			switch {
			case err == nil:
				k.dep.OK(ctx)
				return c, &held{store: k.redis, key: req.Key, token: c.Token}, nil
			case ctx.Err() != nil:
				return idempotency.Claim{}, nil, ctx.Err()
			}
			if err := s.failed(ctx, k.dep, err); err != nil {
				return idempotency.Claim{}, nil, err
			}
		} else if err := s.without(k.dep, errResting); err != nil {
			return idempotency.Claim{}, nil, err
		}
	}
	c, err := store.Claim(ctx, req)
	return c, &held{store: store, key: req.Key, token: c.Token}, err
}

// How a held key is resolved once its message's fate is known.
type resolution int

const (
	resolveComplete resolution = iota // sent: remember the answer
	resolveRelease                    // nothing sent: forget the key
	resolveAbandon                    // the send may have landed: keep the id for a retry
)

// idemResolve resolves a held key. The call outlives the request's
// cancellation, briefly.
func (s *Server) idemResolve(ctx context.Context, h *held, how resolution, answer []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var err error
	switch how {
	case resolveComplete:
		err = h.store.Complete(ctx, h.key, h.token, answer)
	case resolveRelease:
		err = h.store.Release(ctx, h.key, h.token)
	default:
		err = h.store.Abandon(ctx, h.key, h.token)
	}
	if err != nil {
		// The key stays owned until its lease ends; then it counts as
		// abandoned, and a repeat is sent under the same id.
		s.log.LogAttrs(ctx, slog.LevelWarn, "idempotency key not resolved; it frees itself when its lease ends", slog.Any("err", err))
	}
}

// idemError is the answer to a claim that does not own the key.
func idemError(c idempotency.Claim) error {
	switch c.Outcome {
	case idempotency.InProgress:
		return &Error{Code: CodeIdempotencyKeyInProgress, RetryAfter: max(c.RetryAfter, time.Second),
			Detail: "a request with this Idempotency-Key is still being processed; retry after it"}
	case idempotency.Reused:
		return &Error{Code: CodeIdempotencyKeyReused,
			Detail: "this Idempotency-Key was used for a different message; use a new key for a new message"}
	}
	return &Error{Code: CodeInternal, Detail: "internal error", Err: errors.New("idempotency: unexpected claim " + c.Outcome.String())}
}
