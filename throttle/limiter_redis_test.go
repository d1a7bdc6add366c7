package throttle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

// onRedis runs test against one Redis node and against a Redis Cluster,
// each with a fresh key prefix; newClient returns a new client of it.
func onRedis(t *testing.T, test func(t *testing.T, newClient func() redis.UniversalClient, prefix string)) {
	t.Helper()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			test(t, func() redis.UniversalClient { return topo.Client(t) }, testenv.Prefix(t)+":")
		})
	}
}

func redisLimiter(t testing.TB, client redis.UniversalClient, prefix string) *throttle.RedisLimiter {
	t.Helper()
	l, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: client, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRedisLimiterSharedBucket(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisLimiterSharedBucket)
}

// testRedisLimiterSharedBucket: two limiters, each with its own client,
// share a bucket.
func testRedisLimiterSharedBucket(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	a, b := redisLimiter(t, newClient(), prefix), redisLimiter(t, newClient(), prefix)
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1, Burst: 10} // refills slowly enough to count exactly

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for i := range 30 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			d, err := l.Allow(ctx, "acme", lim, 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			granted += d.Allowed
			mu.Unlock()
		})
	}
	wg.Wait()
	// The test may take up to a second, in which one more token drips in.
	if granted < 10 || granted > 11 {
		t.Errorf("two limiters sharing Redis granted %d, want the burst of 10 (+1 refilled)", granted)
	}
	d, err := a.Allow(ctx, "other", lim, 3)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed != 3 || d.Remaining != 7 {
		t.Errorf("another key: allowed %d remaining %d, want 3 and 7", d.Allowed, d.Remaining)
	}
}

func TestRedisLimiterDecision(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisLimiterDecision)
}

func testRedisLimiterDecision(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	l := redisLimiter(t, newClient(), prefix)
	ctx := context.Background()
	lim := throttle.Limit{Rate: 0.5, Burst: 2} // a token every 2 s

	d, err := l.Allow(ctx, "k", lim, 5)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed != 2 || d.Remaining != 0 {
		t.Fatalf("first: %+v, want 2 allowed, 0 remaining", d)
	}
	if d.RetryAfter < 1900*time.Millisecond || d.RetryAfter > 2*time.Second {
		t.Errorf("RetryAfter %v, want about 2s", d.RetryAfter)
	}
	if d.ResetAfter < 3900*time.Millisecond || d.ResetAfter > 4*time.Second {
		t.Errorf("ResetAfter %v, want about 4s", d.ResetAfter)
	}
	d, err = l.Allow(ctx, "k", lim, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed != 0 || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Second {
		t.Errorf("refusal: %+v, want 0 allowed and RetryAfter in (0, 2s]", d)
	}
}

// TestRedisRetryAfterIsTruthful waits what a refusal says and expects a
// token then.
func TestRedisRetryAfterIsTruthful(t *testing.T) {
	t.Parallel()
	l := redisLimiter(t, redisClient(t), testenv.Prefix(t)+":")
	ctx := context.Background()
	lim := throttle.Limit{Rate: 20, Burst: 1}
	for range 5 {
		d, err := l.Allow(ctx, "k", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed == 1 {
			d, err = l.Allow(ctx, "k", lim, 1)
			if err != nil {
				t.Fatal(err)
			}
		}
		if d.Allowed != 0 || d.RetryAfter <= 0 {
			t.Fatalf("second call in a row: %+v, want a refusal with RetryAfter", d)
		}
		time.Sleep(d.RetryAfter) // the subject under test: what waiting that long yields
		if d, _ = l.Allow(ctx, "k", lim, 1); d.Allowed != 1 {
			t.Fatalf("refused after waiting RetryAfter: %+v", d)
		}
	}
}

func BenchmarkRedisLimiter(b *testing.B) {
	l := redisLimiter(b, redisClient(b), testenv.Prefix(b)+":")
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1e9, Burst: 1 << 30}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Allow(ctx, "tenant-a", lim, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
