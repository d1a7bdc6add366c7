package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handler processes one message, as http.Handler serves one request.
//
// Returning nil means the message was processed: the worker deletes it.
// Returning an error that is or wraps a *RetryAfterError asks for the
// message again after RetryAfterError.After without counting a failure (an
// application answering 429 or 503 with Retry-After). Any other error is a
// failure: the message comes back after an exponential backoff and, after
// Config.MaxRetries attempts, goes to the dead-letter queue with the error's
// text.
//
// ctx ends at Config.InactivityTimeout or when the worker is stopped past
// its grace period; a handler must return soon after.
// Standard queues deliver at least once, so a handler must tolerate seeing
// the same message twice.
type Handler interface {
	Handle(ctx context.Context, m *Message) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, m *Message) error

// Handle calls f(ctx, m).
func (f HandlerFunc) Handle(ctx context.Context, m *Message) error { return f(ctx, m) }

var _ Handler = HandlerFunc(nil)

// RetryAfterError asks for a message back after a delay, not counted as a
// failure nor toward Config.MaxRetries. The delay may be longer than SQS's
// 900 s: the message then waits in steps of at most 900 s, with the time
// it may run again in fairq-meta.
type RetryAfterError struct {
	After time.Duration
	Err   error // why; may be nil
}

// RetryAfter returns an error that asks for the message back after d.
func RetryAfter(d time.Duration) error { return &RetryAfterError{After: d} }

func (e *RetryAfterError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("retry after %v: %v", e.After, e.Err)
	}
	return fmt.Sprintf("retry after %v", e.After)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// StatusError is the failure of a push the application answered with a
// status other than 2xx.
type StatusError struct {
	Code   int
	Status string // e.g. "500 Internal Server Error"
}

func (e *StatusError) Error() string { return "push: " + e.Status }

// ErrNoResponse is wrapped by the error of a push whose application did not
// answer within its context's deadline (Config.InactivityTimeout).
var ErrNoResponse = errors.New("no response before the inactivity timeout")
