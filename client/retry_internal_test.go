package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	t.Parallel()
	p := retryPolicy{maxAttempts: 10, base: 100 * time.Millisecond, ceiling: time.Second}
	tests := []struct {
		name       string
		n          int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{name: "first backoff, top of its range", n: 1, jitter: 0.999, want: 99900 * time.Microsecond},
		{name: "doubles", n: 3, jitter: 0.5, want: 200 * time.Millisecond},
		{name: "capped", n: 8, jitter: 0.5, want: 500 * time.Millisecond},
		{name: "no overflow far out", n: 200, jitter: 0.5, want: 500 * time.Millisecond},
		{name: "full jitter may wait nothing", n: 2, jitter: 0, want: 0},
		{name: "Retry-After, plus jitter up to base", n: 1, retryAfter: 3 * time.Second, jitter: 0.5, want: 3050 * time.Millisecond},
		{name: "Retry-After above the cap is kept", n: 5, retryAfter: 30 * time.Second, jitter: 0, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.wait(tt.n, tt.retryAfter, tt.jitter); got != tt.want {
				t.Errorf("wait(%d, %v, %v) = %v, want %v", tt.n, tt.retryAfter, tt.jitter, got, tt.want)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	answers := []struct {
		e    *Error
		want bool
	}{
		{&Error{Status: 429, Code: CodeRateLimited}, true},
		{&Error{Status: 429, Code: CodeBacklogFull}, true},
		{&Error{Status: 503, Code: CodeUnavailable}, true},
		{&Error{Status: 409, Code: CodeIdempotencyKeyInProgress}, true},
		{&Error{Status: 409, Code: "conflict"}, false},
		{&Error{Status: 400, Code: CodeInvalidRequest}, false},
		{&Error{Status: 401, Code: CodeUnauthorized}, false},
		{&Error{Status: 422, Code: CodeIdempotencyKeyReused}, false},
		{&Error{Status: 423, Code: CodeTenantPaused}, false},
		{&Error{Status: 500, Code: CodeInternal}, false},
	}
	for _, a := range answers {
		if got := retryableAnswer(a.e); got != a.want {
			t.Errorf("retryableAnswer(%d %s) = %v, want %v", a.e.Status, a.e.Code, got, a.want)
		}
	}
	dial := fmt.Errorf("post: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	reset := fmt.Errorf("post: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	failures := []struct {
		name       string
		ctx        context.Context
		err        error
		replaySafe bool
		want       bool
	}{
		{"dial, not replay-safe", context.Background(), dial, false, true},
		{"dns, not replay-safe", context.Background(), &net.DNSError{Err: "no such host", Name: "x"}, false, true},
		{"reset, not replay-safe", context.Background(), reset, false, false},
		{"reset, replay-safe", context.Background(), reset, true, true},
		{"context done", done, dial, true, false},
	}
	for _, f := range failures {
		if got := retryableFailure(f.ctx, f.err, f.replaySafe); got != f.want {
			t.Errorf("%s: retryableFailure = %v, want %v", f.name, got, f.want)
		}
	}
}

func TestErrorOf(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   Error
		is     error
	}{
		{name: "problem", status: 429,
			header: http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"3"}, "X-Request-Id": {"r1"}},
			body:   `{"type":"urn:fairq:problem:backlog_full","title":"Too Many Requests","status":429,"code":"backlog_full","detail":"full","request_id":"r1"}`,
			want:   Error{Status: 429, Code: CodeBacklogFull, Detail: "full", RequestID: "r1", RetryAfter: 3 * time.Second}, is: ErrBacklogFull},
		{name: "new code", status: 423,
			header: http.Header{"Content-Type": {"application/problem+json"}},
			body:   `{"status":423,"code":"tenant_paused","detail":"paused","request_id":"r2"}`,
			want:   Error{Status: 423, Code: CodeTenantPaused, Detail: "paused", RequestID: "r2"}, is: ErrTenantPaused},
		{name: "a proxy's page", status: 503,
			header: http.Header{"Content-Type": {"text/html"}, "Retry-After": {now.Add(10 * time.Second).UTC().Format(http.TimeFormat)}},
			body:   "<html>down</html>",
			want:   Error{Status: 503, Code: CodeUnavailable, Detail: "<html>down</html>", RetryAfter: 10 * time.Second}, is: ErrUnavailable},
		{name: "429 without a code", status: 429, header: http.Header{}, body: "slow down",
			want: Error{Status: 429, Code: CodeRateLimited, Detail: "slow down"}, is: ErrRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorOf(&http.Response{StatusCode: tt.status, Header: tt.header}, []byte(tt.body))
			// An HTTP date has whole seconds: allow for the rounding.
			if d := got.RetryAfter - tt.want.RetryAfter; d > 0 || d < -time.Second {
				t.Errorf("RetryAfter %v, want %v", got.RetryAfter, tt.want.RetryAfter)
			}
			got.RetryAfter = tt.want.RetryAfter
			if *got != tt.want {
				t.Errorf("errorOf = %+v, want %+v", *got, tt.want)
			}
			if !errors.Is(got, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", got, tt.is)
			}
			for _, other := range sentinels {
				if other != tt.is && errors.Is(got, other) {
					t.Errorf("%v also matches %v", got, other)
				}
			}
		})
	}
}
