package spillover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// redisWorker returns the Limiter of a worker whose concurrency slots are
// a started RedisSemaphore on the Redis at addr, its keys under prefix.
func redisWorker(t *testing.T, addr string, reg *tenant.Registry, prefix string) *spillover.Limiter {
	t.Helper()
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

// TestHoldWokenBySlotFreedElsewhere: a message held for a slot of its
// tenant on one worker is woken when another worker sharing the Redis
// gives a slot back, not only at its next ask.
func TestHoldWokenBySlotFreedElsewhere(t *testing.T) {
	t.Parallel()
	addr := testenv.RedisAddr(t)
	reg := registry(t, map[string]tenant.Limits{"acme": limits(1000, 1000, 1)})
	prefix := "fairq-test:" + t.Name() + ":"
	a, b := redisWorker(t, addr, reg, prefix), redisWorker(t, addr, reg, prefix)
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

// TestHoldWokenOnceSlotFree: a slot given back on the worker that holds
// a message for it wakes the message once the slot is free in Redis, so
// that the message, asked again, runs; woken at the release, before the
// semaphore's removal reached Redis, it was refused and held again.
func TestHoldWokenOnceSlotFree(t *testing.T) {
	t.Parallel()
	addr := testenv.RedisAddr(t)
	// A tenant per round: a round's slot is told of to every round after
	// it too, a moment after the next round may have taken it.
	const rounds = 40
	tenants := map[string]tenant.Limits{}
	for i := range rounds {
		tenants[fmt.Sprintf("acme-%d", i)] = limits(1000, 1000, 1)
	}
	l := redisWorker(t, addr, registry(t, tenants), "fairq-test:"+t.Name()+":")
	ctx := context.Background()
	// The semaphore subscribes from a goroutine of its own: the first
	// rounds may wake nothing.
	woken := 0
	for i := 0; woken < 20 && i < rounds; i++ {
		id := fmt.Sprintf("acme-%d", i)
		run, err := l.Admit(ctx, &consumer.Message{ID: "run", Tenant: id})
		if err != nil || run.Action != consumer.Dispatch {
			t.Fatalf("%s: %v, %v; want the tenant's one slot", id, run.Action, err)
		}
		held, err := l.Admit(ctx, &consumer.Message{ID: "held", Tenant: id, Spare: 8})
		if err != nil || held.Action != consumer.Hold || held.Wake == nil {
			t.Fatalf("%s: %v, %v; want a hold for the slot", id, held.Action, err)
		}
		if held.Delay != spillover.HoldMaxDefault {
			// Every slot given back is told: asking meanwhile finds none.
			t.Fatalf("held for %v before asking again; want the whole HoldMax, %v", held.Delay, spillover.HoldMaxDefault)
		}
		run.Done()
		select {
		case <-held.Wake:
			held.Done()
			woken++
			again, err := l.Admit(ctx, &consumer.Message{ID: "held", Tenant: id, Spare: 8, Held: 10 * time.Millisecond})
			if err != nil || again.Action != consumer.Dispatch {
				if again.Done != nil {
					again.Done()
				}
				t.Fatalf("woken %d times; asked again: %v, %v; want the slot given back", woken, again.Action, err)
			}
			again.Done()
		case <-time.After(500 * time.Millisecond):
			held.Done()
		}
	}
	if woken < 20 {
		t.Fatalf("a slot given back woke the message held for it %d times in %d rounds, want 20", woken, rounds)
	}
}

// TestOldWorkYieldsToFreshWorkElsewhere: a worker that receives none of a
// tenant's fresh messages still has its old work leave them their share,
// from the rate the workers that receive them measure in Redis.
func TestOldWorkYieldsToFreshWorkElsewhere(t *testing.T) {
	t.Parallel()
	addr := testenv.RedisAddr(t)
	reg := registry(t, map[string]tenant.Limits{"acme": limits(1000, 1000, 4)})
	prefix := "fairq-test:" + t.Name() + ":"
	worker := func() (*spillover.Limiter, *throttle.RedisMeter) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		m, err := throttle.NewRedisMeter(throttle.RedisMeterConfig{Client: c, Prefix: prefix,
			Window: spillover.FreshWindow, Every: 20 * time.Millisecond, Component: "worker_fresh"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := spillover.New(spillover.Config{Tenants: reg, Meter: m, FleetSizeFunc: func() int { return 2 }, HoldMax: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := m.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		return l, m
	}
	a, _ := worker()
	b, meterB := worker()
	ctx := context.Background()

	fresh, err := a.Admit(ctx, &consumer.Message{ID: "fresh", Tenant: "acme"})
	if err != nil || fresh.Action != consumer.Dispatch {
		t.Fatalf("a, a fresh message: %v, %v; want dispatch", fresh.Action, err)
	}
	fresh.Done()
	// b learns of it at its meter's next read (the key is spillover's).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r, _, ok := meterB.Rate("fresh:acme"); ok && r > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's meter never measured a's fresh message")
		}
	}
	// No job time known yet: old work has half of the 4 slots.
	for i, want := range []consumer.Action{consumer.Dispatch, consumer.Dispatch, consumer.Spill} {
		v, err := b.Admit(ctx, &consumer.Message{ID: "old", Tenant: "acme", Backlog: true})
		if err != nil || v.Action != want {
			t.Fatalf("b, old message %d: %v, %v; want %v", i+1, v.Action, err, want)
		}
	}
}
