package spillover_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// TestHoldWokenBySlotFreedElsewhere: a message held for a slot of its
// tenant on one worker is woken when another worker sharing the Redis
// gives a slot back, not only at its next ask.
func TestHoldWokenBySlotFreedElsewhere(t *testing.T) {
	t.Parallel()
	addr := testenv.RedisAddr(t)
	reg := registry(t, map[string]tenant.Limits{"acme": limits(1000, 1000, 1)})
	prefix := "fairq-test:" + t.Name() + ":"
	worker := func() *spillover.Limiter {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		sem, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: c, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		l, err := spillover.New(spillover.Config{Tenants: reg, Semaphore: sem, Rate: throttle.NewLocalLimiter(throttle.LocalConfig{})})
		if err != nil {
			t.Fatal(err)
		}
		if err := sem.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := sem.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		return l
	}
	a, b := worker(), worker()
	ctx := context.Background()

	// The semaphores subscribe from a goroutine of their own: try until
	// a release on b wakes a hold on a.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		run, err := b.Admit(ctx, &consumer.Message{ID: "run", Tenant: "acme"})
		if err != nil || run.Action != consumer.Dispatch {
			t.Fatalf("b: %v, %v; want the tenant's one slot", run.Action, err)
		}
		held, err := a.Admit(ctx, &consumer.Message{ID: "held", Tenant: "acme", Spare: 8})
		if err != nil || held.Action != consumer.Hold || held.Wake == nil {
			t.Fatalf("a: %v, %v; want a hold for the slot", held.Action, err)
		}
		run.Done()
		select {
		case <-held.Wake:
			held.Done()
			return
		case <-time.After(500 * time.Millisecond):
		}
		held.Done()
	}
	t.Fatal("a slot given back on one worker never woke the message held for it on the other")
}
