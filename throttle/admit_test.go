package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

func tryAdmit(t *testing.T, a throttle.Admitter, n throttle.Need) throttle.Admission {
	t.Helper()
	got, err := a.TryAdmit(context.Background(), n)
	if err != nil {
		t.Fatalf("TryAdmit: %v", err)
	}
	if got.Admitted != (len(got.Permits) == len(n.Slots)) {
		t.Fatalf("Admitted %v with %d permits for %d slots", got.Admitted, len(got.Permits), len(n.Slots))
	}
	return got
}

func TestRedisAdmitterAllOrNothing(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisAdmitterAllOrNothing)
}

// testRedisAdmitterAllOrNothing: a Need refused for a slot takes no
// token, one refused for a token takes no slot, and the tokens are those
// of the RedisLimiter's bucket of the same key.
func testRedisAdmitterAllOrNothing(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	c := newClient()
	ctx := context.Background()
	sem := redisSemaphore(t, c, prefix, throttle.LeaseDefault)
	a, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: sem, RatePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	rl := redisLimiter(t, c, prefix)
	lim := throttle.Limit{Rate: 0.5, Burst: 3} // a token every 2 s: none comes back during the test
	need := throttle.Need{
		// An unlimited slot and bucket first: the indices of a refusal
		// are the Need's.
		Slots:  []throttle.Slot{{Key: "free:{acme}", Limit: 0}, {Key: "concurrency:{acme}", Limit: 2}},
		Tokens: []throttle.Token{{Key: "free:{acme}", Limit: throttle.Limit{}}, {Key: "process:{acme}", Limit: lim}},
	}
	inUse := func() int64 {
		t.Helper()
		n, err := c.ZCard(ctx, "sem:"+prefix+"concurrency:{acme}").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	first := tryAdmit(t, a, need)
	second := tryAdmit(t, a, need)
	if !first.Admitted || !second.Admitted {
		t.Fatalf("admitted %v, %v; want both", first.Admitted, second.Admitted)
	}
	if got := sem.Held(); got != 2 {
		t.Errorf("the semaphore renews %d leases, want 2", got)
	}
	full := tryAdmit(t, a, need)
	if full.Admitted || full.Slot != 1 || full.Token != -1 {
		t.Fatalf("with the slots taken: %+v, want refused for slot 1", full)
	}
	// Two tokens of three were taken, none by the refusal: the limiter
	// sharing the bucket finds the third.
	if d, err := rl.Allow(ctx, "process:{acme}", lim, 1); err != nil || d.Allowed != 1 {
		t.Fatalf("the limiter after two admissions: %+v, %v; want the third token", d, err)
	}

	first.Permits[1].Release()
	first.Permits[0].Release() // unlimited: gives back nothing, harmless
	eventually(t, 5*time.Second, "the released slot removed", func() bool { return inUse() == 1 })
	empty := tryAdmit(t, a, need)
	if empty.Admitted || empty.Token != 1 || empty.Slot != -1 {
		t.Fatalf("with the bucket empty: %+v, want refused for token 1", empty)
	}
	if empty.RetryAfter <= 0 || empty.RetryAfter > 2*time.Second {
		t.Errorf("RetryAfter %v, want within the 2 s of one token", empty.RetryAfter)
	}
	if got := inUse(); got != 1 {
		t.Errorf("%d slots in use after a refusal for a token, want 1: the refusal took one", got)
	}
	if got := sem.Held(); got != 1 {
		t.Errorf("the semaphore renews %d leases, want 1", got)
	}
	second.Permits[1].Release()
	eventually(t, 5*time.Second, "the last slot removed", func() bool { return inUse() == 0 })
}

func TestRedisAdmitterSharedLimit(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisAdmitterSharedLimit)
}

// testRedisAdmitterSharedLimit: two processes admitting at once never
// take more slots than the limit, nor more tokens than the bucket holds.
func testRedisAdmitterSharedLimit(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	const slots, tokens = 4, 6
	need := throttle.Need{
		Slots:  []throttle.Slot{{Key: "concurrency:{initech}", Limit: slots}},
		Tokens: []throttle.Token{{Key: "process:{initech}", Limit: throttle.Limit{Rate: 0.1, Burst: tokens}}},
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
		bySlot   int
	)
	for range 2 {
		a, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: redisSemaphore(t, newClient(), prefix, throttle.LeaseDefault), RatePrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			wg.Go(func() {
				got, err := a.TryAdmit(context.Background(), need)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Error(err)
				case got.Admitted:
					admitted++ // never released: each holds a slot
				case got.Slot == 0:
					bySlot++
				}
			})
		}
	}
	wg.Wait()
	if admitted != slots || bySlot != 20-slots {
		t.Errorf("admitted %d, refused for a slot %d; want %d and %d", admitted, bySlot, slots, 20-slots)
	}
}

// TestRedisAdmitterOneSlotOnly: on a Redis Cluster, keys without one hash
// tag land in different slots, and the Cluster refuses the script.
func TestRedisAdmitterOneSlotOnly(t *testing.T) {
	t.Parallel()
	topo := testenv.RedisTopologies()[1]
	if topo.Name != "cluster" {
		t.Fatalf("topology %q, want the cluster", topo.Name)
	}
	prefix := testenv.Prefix(t) + ":"
	a, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: redisSemaphore(t, topo.Client(t), prefix, throttle.LeaseDefault), RatePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.TryAdmit(context.Background(), throttle.Need{
		Slots:  []throttle.Slot{{Key: "concurrency:acme", Limit: 1}},
		Tokens: []throttle.Token{{Key: "process:acme", Limit: throttle.Limit{Rate: 1, Burst: 1}}},
	})
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("keys of two slots: %v, want CROSSSLOT", err)
	}
}

// flakyAdmitter is a primary Admitter over state in process that fails
// while down is set.
type flakyAdmitter struct {
	a throttle.Admitter
	outage
}

func (f *flakyAdmitter) TryAdmit(ctx context.Context, n throttle.Need) (throttle.Admission, error) {
	if err := f.call(); err != nil {
		return throttle.Admission{}, err
	}
	return f.a.TryAdmit(ctx, n)
}

func TestFailoverAdmitter(t *testing.T) {
	t.Parallel()
	failModes(t, func(t *testing.T, closed bool) {
		c := newClock()
		shared := throttle.NewLocalSemaphore() // Redis's slots, played in process
		primary := &flakyAdmitter{a: throttle.Separately{Semaphore: shared, Rate: throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})}}
		semPrimary := &flakySemaphore{s: shared}
		ratePrimary := &flaky{}
		reg := prometheus.NewRegistry()
		metrics := redisMetrics(t, reg)
		var logs, semLogs bytes.Buffer
		sem, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
			Primary: semPrimary, FailClosed: closed, FleetSizeFunc: func() int { return 2 },
			Cooldown: time.Second, Component: "semaphore", Logger: slog.New(slog.NewTextHandler(&semLogs, nil)), RedisMetrics: metrics, Now: c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		rate, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
			Primary: ratePrimary, Fallback: throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now}), FailClosed: closed,
			Cooldown: time.Second, Component: "ratelimit", Logger: slog.New(slog.NewTextHandler(&logs, nil)), RedisMetrics: metrics, Now: c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		f, err := throttle.NewFailoverAdmitter(throttle.FailoverAdmitterConfig{Primary: primary, Semaphore: sem, Rate: rate})
		if err != nil {
			t.Fatal(err)
		}
		need := throttle.Need{
			Slots:  []throttle.Slot{{Key: "k", Limit: 5}}, // a fleet of 2: a local share of 3
			Tokens: []throttle.Token{{Key: "k", Limit: throttle.Limit{Rate: 1000, Burst: 1000}}},
		}

		held := tryAdmit(t, f, need)
		if !held.Admitted || shared.InUse("k") != 1 {
			t.Fatalf("healthy: %+v, %d slots in the primary; want admitted, 1", held, shared.InUse("k"))
		}
		if semPrimary.calls != 0 || ratePrimary.calls != 0 {
			t.Errorf("healthy: the semaphore's and limiter's primaries asked %d and %d times, want none", semPrimary.calls, ratePrimary.calls)
		}

		primary.set(true)
		semPrimary.set(true)
		ratePrimary.set(true)
		granted := 0
		for i := range 4 {
			got, err := f.TryAdmit(context.Background(), need)
			switch {
			case closed:
				if !errors.Is(err, throttle.ErrUnavailable) {
					t.Fatalf("down, call %d: err %v, want ErrUnavailable", i, err)
				}
			case err != nil:
				t.Fatalf("down, call %d: %v", i, err)
			case got.Admitted:
				granted++
			}
		}
		// The share of 3 counts the slot taken through the primary.
		if want := map[bool]int{false: 2, true: 0}[closed]; granted != want {
			t.Errorf("admitted %d while down, want %d", granted, want)
		}
		if primary.calls != 2 || semPrimary.calls != 0 || ratePrimary.calls != 0 {
			t.Errorf("down: primaries asked %d, %d, %d times; want 2 (healthy, then the failure), 0, 0", primary.calls, semPrimary.calls, ratePrimary.calls)
		}
		if !sem.Degraded() || gauge(t, reg, "fairq_redis_degraded") != 1 {
			t.Error("the semaphore and the limiter not both degraded while down")
		}
		held.Permits[0].Release()
		if got := shared.InUse("k"); got != 0 {
			t.Errorf("the primary's slot not given back: %d in use", got)
		}

		primary.set(false)
		c.Advance(time.Second)
		if got := tryAdmit(t, f, need); !got.Admitted || shared.InUse("k") != 1 {
			t.Fatalf("after the cooldown: %+v, %d slots in the primary; want admitted, 1", got, shared.InUse("k"))
		}
		if sem.Degraded() {
			t.Error("the semaphore still degraded once the primary answers")
		}
		// Fail open, the limiter answered the two admitted while down.
		checkRecovered(t, reg, logs.String(), closed, 2.0)
		if down, back := strings.Count(semLogs.String(), "redis unreachable"), strings.Count(semLogs.String(), "redis is back"); down != 1 || back != 1 {
			t.Errorf("the semaphore logged %d failures and %d recoveries, want 1 and 1:\n%s", down, back, semLogs.String())
		}
	})
}

func TestRedisAdmitterHugeRate(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisAdmitterHugeRate)
}

// testRedisAdmitterHugeRate: a rate so high that a token moves the
// bucket's time less than a float can tell still admits (the bucket then
// needs no key).
func testRedisAdmitterHugeRate(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	a, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: redisSemaphore(t, newClient(), prefix, throttle.LeaseDefault), RatePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	need := throttle.Need{Tokens: []throttle.Token{{Key: "process:{hooli}", Limit: throttle.Limit{Rate: 1e9, Burst: 1 << 30}}}}
	for range 3 {
		if got := tryAdmit(t, a, need); !got.Admitted {
			t.Fatalf("refused: %+v", got)
		}
	}
}

// TestSeparately: asked one by one, a refusal gives back the slots taken
// before it and names what was missing.
func TestSeparately(t *testing.T) {
	t.Parallel()
	c := newClock()
	sem := throttle.NewLocalSemaphore()
	a := throttle.Separately{Semaphore: sem, Rate: throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})}
	lim := throttle.Limit{Rate: 1, Burst: 1}
	need := throttle.Need{
		Slots:  []throttle.Slot{{Key: "a", Limit: 5}, {Key: "b", Limit: 1}},
		Tokens: []throttle.Token{{Key: "free", Limit: throttle.Limit{}}, {Key: "t", Limit: lim}},
	}
	first := tryAdmit(t, a, need)
	if !first.Admitted {
		t.Fatalf("first: %+v, want admitted", first)
	}
	if got := tryAdmit(t, a, need); got.Admitted || got.Slot != 1 || got.Token != -1 {
		t.Fatalf("with b full: %+v, want refused for slot 1", got)
	}
	if got := sem.InUse("a"); got != 1 {
		t.Errorf("a holds %d slots after a refusal for b, want 1: the refusal's was not given back", got)
	}
	for _, p := range first.Permits {
		p.Release()
	}
	got := tryAdmit(t, a, need)
	if got.Admitted || got.Token != 1 || got.Slot != -1 || got.RetryAfter <= 0 {
		t.Fatalf("with the bucket empty: %+v, want refused for token 1 with a RetryAfter", got)
	}
	if sem.InUse("a") != 0 || sem.InUse("b") != 0 {
		t.Errorf("slots in use after a refusal for a token: a %d, b %d; want none", sem.InUse("a"), sem.InUse("b"))
	}
}
