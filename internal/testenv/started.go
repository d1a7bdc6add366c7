package testenv

import (
	"context"
	"testing"
)

// Component is what has the Start/Stop lifecycle of fairq's long-lived
// parts.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Started starts c and stops it when the test ends; either failing fails
// the test.
func Started[C Component](t testing.TB, c C) C {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}
