package throttle

import "context"

// ScaledLimiter is a RateLimiter that applies a share of each limit: it
// asks Limiter with the limit scaled by FactorFunc (Limit.Scale). As the
// Fallback of a FailoverLimiter whose FactorFunc returns 1/n for a fleet
// of n processes, it keeps the fleet near the shared limit while Redis is
// unreachable, each process enforcing its share locally.
type ScaledLimiter struct {
	// Limiter answers; required.
	Limiter RateLimiter
	// FactorFunc returns the share, in (0, 1]; nil, or a value outside,
	// applies the whole limit.
	FactorFunc func() float64
}

var _ RateLimiter = (*ScaledLimiter)(nil)

// Allow implements RateLimiter. The Decision carries the scaled limit.
func (s *ScaledLimiter) Allow(ctx context.Context, key string, lim Limit, n int) (Decision, error) {
	if s.FactorFunc != nil {
		if f := s.FactorFunc(); f > 0 {
			lim = lim.Scale(f)
		}
	}
	return s.Limiter.Allow(ctx, key, lim, n)
}

// Share returns the factor of a fleet of n processes, 1/n, for
// ScaledLimiter.FactorFunc; n below one counts as one.
func Share(n int) float64 { return 1 / float64(max(n, 1)) }
