package throttle

import (
	"context"
	"errors"
	"math"
	"time"
)

// ErrUnavailable is returned by a limiter that cannot decide, such as a
// FailoverLimiter that fails closed while Redis is unreachable.
var ErrUnavailable = errors.New("rate limiter unavailable")

// Limit is a token bucket: Rate tokens a second, at most Burst at once.
// A Rate of zero or less, or +Inf, is no limit; a Burst below one counts
// as one.
type Limit struct {
	Rate  float64
	Burst int
}

// Unlimited reports whether l admits everything.
func (l Limit) Unlimited() bool { return l.Rate <= 0 || math.IsInf(l.Rate, 1) }

// Scale returns the limit with its rate and bucket multiplied by f in
// (0, 1]; the bucket keeps at least one token so that a slowed tenant is
// still admitted at the slower rate. An unlimited l stays unlimited, and
// so does f ≥ 1 leave l as it is.
func (l Limit) Scale(f float64) Limit {
	if f >= 1 || l.Unlimited() {
		return l
	}
	l.Rate *= f
	l.Burst = max(1, int(math.Floor(float64(l.Burst)*f)))
	return l
}

// Decision is the answer to one Allow.
type Decision struct {
	// Allowed is how many of the n tokens asked for were granted, 0 to n.
	Allowed int
	// Limit is the limit the decision applied.
	Limit Limit
	// Remaining is the number of whole tokens left in the bucket.
	Remaining int
	// RetryAfter is, when Allowed < n, the time until the bucket holds
	// one more token; zero otherwise.
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again.
	ResetAfter time.Duration
}

// RateLimiter grants tokens from the bucket of a key.
type RateLimiter interface {
	// Allow takes up to n tokens from the bucket of key, which holds at
	// most l.Burst and refills at l.Rate a second, and reports how many it
	// took. It never waits.
	Allow(ctx context.Context, key string, l Limit, n int) (Decision, error)
}

// unlimited is the decision for a limit that admits everything.
func unlimited(l Limit, n int) Decision {
	return Decision{Allowed: n, Limit: l, Remaining: max(l.Burst, n)}
}

// seconds converts a number of seconds to a Duration, rounding up to the
// nanosecond so that waiting that long is never too short.
func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s > float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}
