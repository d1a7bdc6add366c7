package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/throttle"
)

func redisPacer(t testing.TB, client redis.UniversalClient, prefix string) *throttle.RedisPacer {
	t.Helper()
	p, err := throttle.NewRedisPacer(throttle.RedisConfig{Client: client, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRedisPacerSharedLine(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisPacerSharedLine)
}

// testRedisPacerSharedLine: two pacers, each with its own client, hand
// out turns of one line at the key's rate; a turn beyond the horizon is
// not taken.
func testRedisPacerSharedLine(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	a, b := redisPacer(t, newClient(), prefix), redisPacer(t, newClient(), prefix)
	ctx := context.Background()
	start := time.Now()
	for i := range 6 {
		p := a
		if i%2 == 1 {
			p = b
		}
		got, err := p.Reserve(ctx, "acme", 10, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Turn i is 100 ms × i after the first, which was taken at most
		// the time elapsed since start ago.
		want := time.Duration(i) * 100 * time.Millisecond
		if elapsed := time.Since(start); got > want || got < want-elapsed-time.Millisecond {
			t.Errorf("turn %d: wait %v, want %v less at most the %v elapsed", i, got, want, elapsed)
		}
	}

	// A turn beyond the horizon: the horizon, and the line is not pushed
	// back by it.
	for i, want := range []time.Duration{5 * time.Second, 6 * time.Second} {
		got, err := a.Reserve(ctx, "slow", 1, 5*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got > want || got < want-time.Second {
			t.Errorf("slow turn %d: wait %v, want about %v", i, got, want)
		}
	}
	for range 2 {
		got, err := b.Reserve(ctx, "slow", 1, 0, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got != 3*time.Second {
			t.Errorf("a turn beyond the horizon of 3 s: wait %v, want the horizon", got)
		}
	}
	got, err := b.Reserve(ctx, "slow", 1, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got > 7*time.Second || got < 6*time.Second {
		t.Errorf("after turns refused at the horizon: wait %v, want the line's next turn, about 7 s", got)
	}

	// No limit: the earliest wait, capped by the horizon.
	if got, err := a.Reserve(ctx, "free", 0, 2*time.Second, time.Second); err != nil || got != time.Second {
		t.Errorf("unlimited: %v, %v; want the horizon of 1 s", got, err)
	}
}

// TestRedisPacerUnreachable: a pacer whose Redis does not answer says so.
func TestRedisPacerUnreachable(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	if _, err := redisPacer(t, client, "x:").Reserve(context.Background(), "acme", 1, 0, time.Minute); err == nil {
		t.Error("Reserve against no Redis: no error")
	}
}
