package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// retryPolicy is how often a call is tried and how long to wait between
// tries.
type retryPolicy struct {
	maxAttempts   int
	base, ceiling time.Duration
}

// wait returns the pause after the n-th attempt (n >= 1). With a
// Retry-After from the server, it is that, which the gateway computes so
// that a client waiting that long is admitted, plus up to base of jitter
// so that clients refused together do not come back together. Without,
// it is an exponential backoff with full jitter: uniform in [0, min(ceiling,
// base·2^(n-1))). jitter is uniform in [0, 1).
func (p retryPolicy) wait(n int, retryAfter time.Duration, jitter float64) time.Duration {
	if retryAfter > 0 {
		return retryAfter + time.Duration(jitter*float64(p.base))
	}
	d := p.ceiling
	if n-1 < 62 && p.base <= p.ceiling>>(n-1) {
		d = p.base << (n - 1)
	}
	return time.Duration(jitter * float64(d))
}

// retryableAnswer reports whether an error answer may be retried: the
// message was refused and not enqueued (429), the gateway could not reach
// what it depends on (503), or the first request with the same
// idempotency key is still being answered (409).
func retryableAnswer(e *Error) bool {
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	case http.StatusConflict:
		return e.Code == CodeIdempotencyKeyInProgress
	}
	return false
}

// retryableFailure reports whether a request that got no answer may be
// retried. One whose context is done (the caller cancelled, or its
// deadline passed) may not. One whose connection failed before it was
// sent may. Any other may have reached the gateway, and is retried only
// when replaying it is safe (a GET, or a POST whose messages all carry an
// idempotency key).
func retryableFailure(ctx context.Context, err error, replaySafe bool) bool {
	if ctx.Err() != nil {
		return false
	}
	return notSent(err) || replaySafe
}

// notSent reports whether err happened before a byte of the request could
// reach the server: dialling, or resolving the host.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
