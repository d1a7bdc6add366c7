package notices_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/notices"
	"github.com/fairq/fairq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }

// TestEach: the payloads published reach f in order, and Each returns
// when its context ends.
func TestEach(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := c.Subscribe(ctx, t.Name())
	if _, err := sub.Receive(ctx); err != nil { // subscribed
		t.Fatal(err)
	}

	var (
		mu  sync.Mutex
		got []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		notices.Each(ctx, sub, func(p string) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		})
	}()
	want := []string{"a", "b", "c"}
	for _, p := range want {
		if err := c.Publish(ctx, t.Name(), p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := slices.Clone(got)
		mu.Unlock()
		if slices.Equal(n, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %q, want %q", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Each did not return when its context ended")
	}
}
