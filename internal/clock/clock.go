// Package clock holds the time helpers that the gateway and the worker
// share.
package clock

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends and then returns ctx.Err(). Its timer
// is stopped either way.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
