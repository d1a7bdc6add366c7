// Package lifecycle runs the goroutines of a long-lived fairq component
// (the shard tracker, the tenant registry, the fleet registration, the
// lease renewer, the scheduler, the gateway's background loops) between
// its Start and its Stop.
//
// One rule holds for all of them: the ctx given to Start carries values
// only. Its cancellation does not end the component's goroutines; Stop
// does. A process hands its signal context to every Start, and its
// shutdown is the ordered Stop of its components (the worker drains
// before the lease renewer and the fleet registration stop; the gateway
// flushes its sends before the shard tracker stops): were the loops bound
// to that context, a SIGTERM would end them all at once, in no order.
package lifecycle

import (
	"context"
	"errors"
	"sync"
)

// Errors of Start, and the causes of the loops' context.
var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("already started")
	// ErrStopped is the cause of the loops' context once Stop began.
	ErrStopped = errors.New("stopped")
	// ErrKilled is the cause of the loops' context after Kill.
	ErrKilled = errors.New("killed")
)

// Loops are the goroutines of one component. Start returns their context;
// Go runs each; Stop cancels the context and waits for them. The zero
// value is ready for Start; Loops must not be copied.
type Loops struct {
	mu      sync.Mutex
	started bool
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
	done    chan struct{} // closed once the goroutines of a stopped Loops ended
	waiting sync.Once     // starts the goroutine that closes done

	cleanup sync.Mutex // held while StopThen's clean-up runs
	cleaned bool
}

// Start marks the component started and returns the context its
// goroutines run under: ctx's values, not its cancellation (see the
// package documentation), cancelled by Stop with the cause ErrStopped or
// by Kill with ErrKilled. A second Start returns ErrStarted.
func (l *Loops) Start(ctx context.Context) (context.Context, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return nil, ErrStarted
	}
	l.started = true
	l.done = make(chan struct{})
	ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	return ctx, nil
}

// Go runs f on a goroutine that Stop waits for. Call it from Start, after
// Loops.Start, or from a goroutine Go runs.
func (l *Loops) Go(f func()) { l.wg.Go(f) }

// Started reports whether Start was called.
func (l *Loops) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// Stop cancels the loops' context with the cause ErrStopped and waits
// for the goroutines to return, or for ctx to end (then it returns ctx's
// error, and a later Stop waits again). It is idempotent; before Start it
// does nothing.
func (l *Loops) Stop(ctx context.Context) error { return l.StopThen(ctx, nil) }

// StopThen is Stop followed, once the goroutines returned, by then (if
// not nil): the component's own clean-up, such as giving up a lease.
// Whichever call first sees the goroutines end runs it, once; a
// concurrent StopThen waits for it and returns nil.
func (l *Loops) StopThen(ctx context.Context, then func(context.Context) error) error {
	done, ok := l.stop(ErrStopped)
	if !ok {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.cleanup.Lock()
	defer l.cleanup.Unlock()
	if l.cleaned || then == nil {
		l.cleaned = true
		return nil
	}
	l.cleaned = true
	return then(ctx)
}

// Kill cancels the loops' context with the cause ErrKilled, as a crash
// would end them, and does not wait. Tests play crashes with it; Stop
// must still be called to wait for the goroutines.
func (l *Loops) Kill() { l.stop(ErrKilled) }

// Done returns a channel closed once the loops were stopped (or killed)
// and their goroutines returned; nil before Start.
func (l *Loops) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// stop cancels the context with cause, unless an earlier cause stands,
// and returns the channel closed when the goroutines returned; ok is
// false before Start.
func (l *Loops) stop(cause error) (done <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return nil, false
	}
	l.cancel(cause)
	l.waiting.Do(func() {
		go func() {
			l.wg.Wait()
			close(l.done)
		}()
	})
	return l.done, true
}
