package throttle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

// redisClient returns a client of one Redis node.
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// redisSemaphore returns a started RedisSemaphore, stopped when the test
// ends.
func redisSemaphore(t testing.TB, c redis.UniversalClient, prefix string, lease time.Duration) *throttle.RedisSemaphore {
	t.Helper()
	s, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: c, Prefix: prefix, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // Start's context only carries values: this ends nothing
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// eventually checks cond every 20 ms until it holds or d passes, and
// returns how long that took.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
	return time.Since(start)
}

func tryAcquire(t testing.TB, s throttle.Semaphore, key string, limit int) (throttle.Permit, bool) {
	t.Helper()
	p, ok, err := s.TryAcquire(context.Background(), key, limit)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	return p, ok
}

func TestRedisSemaphoreSharedLimit(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreSharedLimit)
}

func testRedisSemaphoreSharedLimit(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	a := redisSemaphore(t, newClient(), prefix, time.Minute)
	b := redisSemaphore(t, newClient(), prefix, time.Minute)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		permits []throttle.Permit
	)
	for i := range 40 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			p, ok := tryAcquire(t, s, "acme", 3)
			if ok {
				mu.Lock()
				permits = append(permits, p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(permits) != 3 {
		t.Fatalf("two semaphores sharing Redis granted %d slots, want the limit of 3", len(permits))
	}
	if got := a.Held() + b.Held(); got != 3 {
		t.Errorf("Held() sums to %d, want 3", got)
	}
	if _, ok := tryAcquire(t, a, "other", 1); !ok {
		t.Error("another key refused")
	}
	permits[0].Release()
	permits[0].Release() // a second release gives nothing more back
	eventually(t, 5*time.Second, "a released slot free in Redis", func() bool {
		p, ok := tryAcquire(t, b, "acme", 3)
		if ok {
			permits[0] = p
		}
		return ok
	})
	if _, ok := tryAcquire(t, a, "acme", 3); ok {
		t.Error("a fourth slot granted after one release and one acquire")
	}
	if _, ok := tryAcquire(t, a, "acme", 4); !ok {
		t.Error("refused under a limit raised to 4")
	}
}

// TestRedisSemaphoreLeases: held slots outlive their lease while their
// holder runs, come back within one lease after it crashed, and at once
// after it stopped.
func TestRedisSemaphoreLeases(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreLeases)
}

func testRedisSemaphoreLeases(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	const lease = time.Second
	c := newClient()
	holder := redisSemaphore(t, c, prefix, lease)
	other := redisSemaphore(t, c, prefix, lease)
	var held []throttle.Permit
	for range 2 {
		p, ok := tryAcquire(t, holder, "acme", 2)
		if !ok {
			t.Fatal("refused on a free semaphore")
		}
		held = append(held, p)
	}
	// Three leases long, the holder's renewals keep the slots taken.
	renewed := time.NewTimer(3 * lease)
	tick := time.NewTicker(lease / 4)
	defer tick.Stop()
	for held := true; held; {
		select {
		case <-renewed.C:
			held = false
		case <-tick.C:
			if _, ok := tryAcquire(t, other, "acme", 2); ok {
				t.Fatal("a slot was free while its holder renewed it")
			}
		}
	}

	holder.Kill()
	crashed := time.Now()
	for _, p := range held {
		p.Release() // a crashed process releases nothing: its leases expire
	}
	if _, ok := tryAcquire(t, other, "acme", 2); ok {
		t.Fatal("a crashed holder's slot was free at once")
	}
	took := eventually(t, 3*lease, "the crashed holder's slot back", func() bool {
		_, ok := tryAcquire(t, other, "acme", 2)
		return ok
	})
	if took > lease+lease/2 {
		t.Errorf("a crashed holder's slot came back after %v, want within the lease of %v", took, lease)
	}
	if _, ok := tryAcquire(t, other, "acme", 2); !ok {
		t.Errorf("the second slot not back %v after the crash", time.Since(crashed))
	}

	// A stopped holder gives its slots back at once.
	stopper := redisSemaphore(t, c, prefix, time.Hour)
	if _, ok := tryAcquire(t, stopper, "acme2", 1); !ok {
		t.Fatal("refused on a free semaphore")
	}
	if err := stopper.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := tryAcquire(t, other, "acme2", 1); !ok {
		t.Error("the slot of a stopped holder, leased for an hour, is still taken")
	}
}

// TestRedisSemaphoreRenewalPutsBack: leases that vanished from Redis
// while their holder runs are put back by the next renewal, which renews
// the leases of every key, in whatever slots, in one pipeline.
func TestRedisSemaphoreRenewalPutsBack(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreRenewalPutsBack)
}

func testRedisSemaphoreRenewalPutsBack(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	c := newClient()
	ctx := context.Background()
	s, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: c, Prefix: prefix, Lease: 3 * time.Second, RenewEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	tenants := []string{"acme", "globex", "initech", "umbrella", "hooli", "stark"}
	slots := map[int]bool{}
	for _, tn := range tenants {
		slots[keyslot.Slot("sem:"+prefix+tn)] = true
	}
	if len(slots) < 2 {
		t.Fatalf("the keys of %v share a slot; the test wants several", tenants)
	}
	var permits []throttle.Permit
	for _, tn := range tenants {
		p, ok := tryAcquire(t, s, tn, 5)
		if !ok {
			t.Fatal("refused")
		}
		permits = append(permits, p)
		if err := c.Del(ctx, "sem:"+prefix+tn).Err(); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (n int64) {
		for _, tn := range tenants {
			n += c.ZCard(ctx, "sem:"+prefix+tn).Val()
		}
		return n
	}
	eventually(t, 3*time.Second, "the leases put back", func() bool { return count() == int64(len(tenants)) })
	for _, p := range permits {
		p.Release()
	}
	eventually(t, 3*time.Second, "the released leases removed", func() bool { return count() == 0 })
}

func TestRedisSemaphoreUnstarted(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreUnstarted)
}

func testRedisSemaphoreUnstarted(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	c := newClient()
	s, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: c, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tryAcquire(t, s, "acme", 1)
	if !ok {
		t.Fatal("refused")
	}
	p.Release() // not started: removed by the call itself
	if _, ok := tryAcquire(t, s, "acme", 1); !ok {
		t.Error("the slot released by an unstarted semaphore is still taken")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
}

func TestNewRedisSemaphoreInvalid(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for name, cfg := range map[string]throttle.RedisSemaphoreConfig{
		"no client":          {},
		"renewal past lease": {Client: c, Lease: time.Second, RenewEvery: time.Second},
		"negative renewal":   {Client: c, RenewEvery: -time.Second},
	} {
		if _, err := throttle.NewRedisSemaphore(cfg); err == nil {
			t.Errorf("%s: NewRedisSemaphore accepted it", name)
		}
	}
}

// TestRedisSemaphoreTellsFreedSlots: a slot given back by one process is
// told at once to the others sharing the Redis that asked (OnFreed), by
// its key, and not to the process that gave it back; a FailoverSemaphore
// passes OnFreed on to its Primary.
func TestRedisSemaphoreTellsFreedSlots(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreTellsFreedSlots)
}

func testRedisSemaphoreTellsFreedSlots(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	told := func(s throttle.FreedNotifier) <-chan string {
		ch := make(chan string, 10)
		s.OnFreed(func(key string) { ch <- key })
		return ch
	}
	unstarted := func() *throttle.RedisSemaphore {
		s, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: newClient(), Prefix: prefix, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := unstarted(), unstarted()
	overB, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{Primary: b})
	if err != nil {
		t.Fatal(err)
	}
	toA, toB := told(a), told(overB)
	for _, s := range []*throttle.RedisSemaphore{a, b} {
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}

	// The subscription is made by a goroutine: release until b hears.
	deadline := time.After(10 * time.Second)
	for heard := false; !heard; {
		p, ok := tryAcquire(t, a, "acme", 1)
		if !ok {
			t.Fatal("the only slot refused")
		}
		p.Release()
		select {
		case key := <-toB:
			if key != "acme" {
				t.Fatalf("told of %q, want acme", key)
			}
			heard = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("a slot given back by one semaphore was never told to the other")
		}
	}
	select {
	case key := <-toA:
		t.Errorf("the semaphore that gave %q back was told of it", key)
	case <-time.After(200 * time.Millisecond):
	}
}
