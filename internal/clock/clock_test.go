package clock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fairq/fairq/internal/clock"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := clock.Sleep(context.Background(), time.Minute); err != nil {
			t.Errorf("Sleep: %v", err)
		}
		if got := time.Since(start); got != time.Minute {
			t.Errorf("slept %v, want 1m", got)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := clock.Sleep(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sleep past its context: %v, want DeadlineExceeded", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("returned after %v, want when its context ended (1s)", got)
		}
	})
}
