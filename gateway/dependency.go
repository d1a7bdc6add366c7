package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/fairq/fairq/internal/degrade"
)

// newDependency returns the view of Redis of one of the gateway's
// Redis-backed collaborators (the backlog counts, the idempotency keys),
// which the gateway goes on without (fail open) or refuses without (fail
// closed, 503): see package degrade.
func (s *Server) newDependency(component string) *degrade.Dependency {
	return degrade.New(degrade.Config{
		Component:  component,
		Metrics:    s.cfg.RedisMetrics,
		Logger:     s.log,
		Down:       "redis unreachable; going on with local state until it is back (fail open)",
		FailClosed: s.cfg.FailClosed, // the default Closed line
		Now:        s.cfg.Now,
	})
}

// failed records a failure of d; it returns the error to answer with when
// the gateway fails closed, nil when it goes on without.
func (s *Server) failed(ctx context.Context, d *degrade.Dependency, err error) error {
	d.Failed(ctx, err)
	return s.without(d, err)
}

// without returns the error to answer with when failing closed, or counts
// an answer given without d.
func (s *Server) without(d *degrade.Dependency, err error) error {
	if s.cfg.FailClosed {
		return &Error{Code: CodeUnavailable, Detail: "a service the gateway depends on is unavailable; retry", RetryAfter: time.Second, Err: err}
	}
	d.Fallback()
	return nil
}

var errResting = errors.New("redis failed moments ago; not asked")
