package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestMemIdemReleasedClaimsDoNotPileUp: keys claimed and released (the
// requests refused, which cost a client nothing) leave no trace behind a
// live key, and the store never holds more than its bound.
func TestMemIdemReleasedClaimsDoNotPileUp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := newMemIdem(func() time.Time { return now }, 100)
	ctx := context.Background()
	live, err := m.claim(ctx, "live", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.complete(ctx, "live", live.token, []byte(`{}`), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		key := fmt.Sprint("refused-", i)
		c, err := m.claim(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.release(ctx, key, c.token); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.order.Len(); got != 1 || len(m.entries) != 1 {
		t.Errorf("after 10,000 released claims: %d in order, %d entries; want 1 and 1", got, len(m.entries))
	}
	for i := range 1_000 {
		key := fmt.Sprint("done-", i)
		c, _ := m.claim(ctx, key, time.Minute)
		_ = m.complete(ctx, key, c.token, []byte(`{}`), time.Hour)
	}
	m.trim(now)
	if got := m.order.Len(); got > 100 || len(m.entries) > 100 {
		t.Errorf("after 1,000 completed keys: %d in order, %d entries; want at most the bound 100", got, len(m.entries))
	}
	if c, _ := m.claim(ctx, "done-999", time.Minute); c.state != claimDone {
		t.Errorf("the newest key was forgotten (state %v); the oldest should go first", c.state)
	}
}
