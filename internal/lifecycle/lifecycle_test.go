package lifecycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/fairq/fairq/internal/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testLoops)
}

func testLoops(t *testing.T) {
	var l lifecycle.Loops
	if err := l.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if l.Started() || l.Done() != nil {
		t.Fatal("started before Start")
	}
	parent, cancelParent := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	ctx, err := l.Start(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Start(parent); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	if ctx.Value(key{}) != "v" {
		t.Error("the loops' context lost Start's values")
	}
	ended := make(chan error, 1)
	l.Go(func() {
		<-ctx.Done()
		ended <- context.Cause(ctx)
	})
	cancelParent()
	select {
	case <-ended:
		t.Fatal("the cancellation of Start's context ended a loop")
	case <-time.After(time.Minute): // in the bubble: once every goroutine is blocked
	}

	var cleanups atomic.Int32
	cleanup := func(context.Context) error { cleanups.Add(1); return nil }
	if err := l.StopThen(t.Context(), cleanup); err != nil {
		t.Fatal(err)
	}
	if cause := <-ended; !errors.Is(cause, lifecycle.ErrStopped) {
		t.Errorf("cause %v, want ErrStopped", cause)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done not closed after Stop returned")
	}
	if err := l.StopThen(t.Context(), cleanup); err != nil {
		t.Fatal(err)
	}
	if n := cleanups.Load(); n != 1 {
		t.Errorf("clean-up ran %d times, want once", n)
	}
}

type key struct{}

// TestStopWaits: Stop waits for the goroutines, or returns ctx's error
// and leaves a later Stop to wait; the clean-up waits for them too.
func TestStopWaits(t *testing.T) {
	t.Parallel()
	var l lifecycle.Loops
	if _, err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	l.Go(func() { <-release })
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	cleaned := false
	if err := l.StopThen(short, func(context.Context) error { cleaned = true; return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a loop that does not return: %v, want DeadlineExceeded", err)
	}
	if cleaned {
		t.Error("clean-up ran before the loops returned")
	}
	close(release)
	if err := l.StopThen(t.Context(), func(context.Context) error { cleaned = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if !cleaned {
		t.Error("clean-up did not run once the loops returned")
	}
}

// TestKill: Kill ends the loops with ErrKilled, which a later Stop
// keeps as the cause.
func TestKill(t *testing.T) {
	t.Parallel()
	var l lifecycle.Loops
	ctx, err := l.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l.Go(func() { <-ctx.Done() })
	l.Kill()
	<-l.Done()
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, lifecycle.ErrKilled) {
		t.Errorf("cause %v, want ErrKilled", cause)
	}
}
