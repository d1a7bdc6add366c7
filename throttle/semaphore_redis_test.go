package throttle_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// acquireAll takes all n slots of key, a semaphore of limit n that has
// them free.
func acquireAll(t testing.TB, s throttle.Semaphore, key string, n int) []throttle.Permit {
	t.Helper()
	ps := make([]throttle.Permit, n)
	for i := range ps {
		var ok bool
		if ps[i], ok = tryAcquire(t, s, key, n); !ok {
			t.Fatalf("slot %d of %d refused on a free semaphore", i+1, n)
		}
	}
	return ps
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
	held := acquireAll(t, holder, "acme", 2)
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

// TestRedisSemaphoreTellsFreedSlots: the slots given back by one process
// are told to every process sharing the Redis that asked (OnFreed), the
// one that gave them back included, by key and number, once they are
// free in Redis; a FailoverSemaphore passes OnFreed on to its Primary.
func TestRedisSemaphoreTellsFreedSlots(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisSemaphoreTellsFreedSlots)
}

// freed is what a FreedNotifier told.
type freed struct {
	key string
	n   int
}

// told returns the channel on which s tells what it is told.
func told(s throttle.FreedNotifier) <-chan freed {
	ch := make(chan freed, 100)
	if !s.OnFreed(func(key string, n int) { ch <- freed{key, n} }) {
		panic("a FreedNotifier over a RedisSemaphore will tell of nothing")
	}
	return ch
}

// waitTold waits until ch told of n slots of key in all, and fails the
// test if it told of any other key or of more.
func waitTold(t *testing.T, who string, ch <-chan freed, key string, n int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for got := 0; got < n; {
		select {
		case f := <-ch:
			if f.key != key {
				t.Fatalf("%s: told of %q, want %q", who, f.key, key)
			}
			got += f.n
			if got > n {
				t.Fatalf("%s: told of %d slots of %s, want %d", who, got, key, n)
			}
		case <-deadline:
			t.Fatalf("%s: told of fewer than %d slots of %s within 5 s", who, n, key)
		}
	}
}

func testRedisSemaphoreTellsFreedSlots(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
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
		p, ok := tryAcquire(t, a, "probe", 1)
		if !ok {
			t.Fatal("the only slot refused")
		}
		p.Release()
		select {
		case <-toB:
			heard = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("a slot given back by one semaphore was never told to the other")
		}
	}
	// a's subscription too.
	for heard := false; !heard; {
		select {
		case <-toA:
			heard = true
		case <-deadline:
			t.Fatal("a slot given back was never told to the semaphore that gave it back")
		}
	}
	drain := func(ch <-chan freed) {
		for {
			select {
			case <-ch:
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	drain(toA)
	drain(toB)

	// Three slots given back at once: told to both, three in all, and
	// each time a slot is free in Redis: b can take as many as it was
	// told of.
	for _, p := range acquireAll(t, a, "acme", 3) {
		p.Release()
	}
	waitTold(t, "a, which gave them back", toA, "acme", 3)
	waitTold(t, "b", toB, "acme", 3)
	for i := range 3 {
		if _, ok := tryAcquire(t, b, "acme", 3); !ok {
			t.Errorf("b, told of three free slots: slot %d refused", i+1)
		}
	}
}

// TestFailoverSemaphoreTellsLocalSlots: while its Primary fails, a
// FailoverSemaphore tells at once of the slots given back here, those it
// took locally and those it took from Primary before the failure.
func TestFailoverSemaphoreTellsLocalSlots(t *testing.T) {
	t.Parallel()
	primary := &failingPrimary{}
	s, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{Primary: primary})
	if err != nil {
		t.Fatal(err)
	}
	ch := told(s)
	before, ok := tryAcquire(t, s, "acme", 2)
	if !ok {
		t.Fatal("Primary's slot refused")
	}
	primary.failing.Store(true)
	during, ok := tryAcquire(t, s, "acme", 2)
	if !ok {
		t.Fatal("a local slot refused, failing open")
	}
	for name, p := range map[string]throttle.Permit{"taken from Primary": before, "taken locally": during} {
		p.Release()
		select {
		case f := <-ch:
			if f != (freed{"acme", 1}) {
				t.Errorf("a slot %s given back: told %+v, want one slot of acme", name, f)
			}
		default:
			t.Errorf("a slot %s given back while Primary fails: not told at once", name)
		}
	}
}

// failingPrimary is a Primary that tells of slots (as a RedisSemaphore
// does, here of none) and fails once failing is set.
type failingPrimary struct{ failing atomic.Bool }

func (p *failingPrimary) TryAcquire(context.Context, string, int) (throttle.Permit, bool, error) {
	if p.failing.Load() {
		return throttle.Permit{}, false, errors.New("primary down")
	}
	return throttle.Permit{}, true, nil
}

func (p *failingPrimary) OnFreed(func(string, int)) bool { return true }

// TestParseFreed: the payload of a release, as this version publishes it
// and as an earlier one did (one slot, no number), while a fleet is
// upgraded one process at a time.
func TestParseFreed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		payload string
		key     string
		n       int
		ok      bool
	}{
		{"0a1b 3 concurrency:acme", "concurrency:acme", 3, true},
		{"0a1b concurrency:acme", "concurrency:acme", 1, true},
		{"0a1b 2 concurrency:a b", "concurrency:a b", 2, true},
		{"0a1b concurrency:a b", "concurrency:a b", 1, true},
		{"0a1b 0 concurrency:acme", "0 concurrency:acme", 1, true},
		{"0a1b", "", 0, false},
		{"0a1b ", "", 0, false},
	} {
		key, n, ok := throttle.ParseFreed(tt.payload)
		if key != tt.key || n != tt.n || ok != tt.ok {
			t.Errorf("parseFreed(%q) = %q, %d, %t; want %q, %d, %t", tt.payload, key, n, ok, tt.key, tt.n, tt.ok)
		}
	}
}
