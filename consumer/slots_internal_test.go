package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// grab starts an acquire and returns a channel with its grant.
func grab(ctx context.Context, s *slots, p prio, need, most int) <-chan int {
	return grabWith(ctx, s.acquire, p, need, most)
}

// grabWith starts acquire (slots.acquire or slots.acquireSpare) and returns
// a channel with its grant.
func grabWith(ctx context.Context, acquire func(context.Context, prio, int, int) (int, error), p prio, need, most int) <-chan int {
	ch := make(chan int, 1)
	go func() {
		n, err := acquire(ctx, p, need, most)
		if err != nil {
			n = -1
		}
		ch <- n
	}()
	return ch
}

// waitWaiters waits until every goroutine of the bubble is blocked and
// checks that n loops wait.
func waitWaiters(t *testing.T, s *slots, n int) {
	t.Helper()
	synctest.Wait()
	if got := s.waiting(prioIdle); got != n {
		t.Fatalf("%d waiters, want %d", got, n)
	}
}

func TestSlots(t *testing.T) { synctest.Test(t, testSlots) }

func testSlots(t *testing.T) {
	ctx := context.Background()
	s := newSlots(10)
	if n, _ := s.acquire(ctx, prioLive, 1, 10); n != 10 {
		t.Fatalf("first acquire got %d, want all 10", n)
	}
	idle := grab(ctx, s, prioIdle, 1, 1)
	waitWaiters(t, s, 1)
	batch := grab(ctx, s, prioLive, 3, 10)
	waitWaiters(t, s, 2)
	over := grab(ctx, s, prioOverflow, 1, 1)
	waitWaiters(t, s, 3)

	s.release(2) // not enough for the live batch, and nobody overtakes it
	waitWaiters(t, s, 3)
	s.release(2) // 4 free: the live batch takes them all
	if n := <-batch; n != 4 {
		t.Errorf("live batch got %d, want 4", n)
	}
	s.release(1)
	if n := <-over; n != 1 {
		t.Errorf("overflow got %d, want 1 (before idle)", n)
	}
	s.release(1)
	if n := <-idle; n != 1 {
		t.Errorf("idle got %d, want 1", n)
	}

	// A cancelled waiter leaves the queue and those behind it move up.
	cctx, cancel := context.WithCancel(ctx)
	blocked := grab(cctx, s, prioLive, 5, 5)
	waitWaiters(t, s, 1)
	behind := grab(ctx, s, prioLive, 1, 1)
	waitWaiters(t, s, 2)
	s.release(1)
	cancel()
	if n := <-blocked; n != -1 {
		t.Errorf("cancelled waiter got %d", n)
	}
	if n := <-behind; n != 1 {
		t.Errorf("waiter behind a cancelled one got %d, want 1", n)
	}
	if got := s.available(); got != 0 {
		t.Errorf("%d slots free, want 0", got)
	}
}

func TestBackoff(t *testing.T) {
	w := &Worker{cfg: Config{BackoffBase: time.Second, ErrorVisibilityTimeout: 300 * time.Second}}
	for _, tt := range []struct {
		n    int
		want time.Duration // the top of the jitter range
	}{{1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {9, 256 * time.Second}, {10, 300 * time.Second}, {1000, 300 * time.Second}} {
		w.cfg.RandFunc = func() float64 { return 1 }
		if got := w.backoff(tt.n); got != tt.want {
			t.Errorf("backoff(%d) at the top = %v, want %v", tt.n, got, tt.want)
		}
		w.cfg.RandFunc = func() float64 { return 0.25 }
		if got := w.backoff(tt.n); got != tt.want/4 {
			t.Errorf("backoff(%d) at a quarter = %v, want %v", tt.n, got, tt.want/4)
		}
	}
}

func TestSlotsSpare(t *testing.T) { synctest.Test(t, testSlotsSpare) }

func testSlotsSpare(t *testing.T) {
	ctx := context.Background()
	s := newSlots(10)
	var now atomic.Int32 // the share of spare reservations
	now.Store(int32(shareMost))
	acquireSpare := func(ctx context.Context, p prio, need, most int) (int, error) {
		return s.acquireSpare(ctx, p, need, most, func() share { return share(now.Load()) })
	}
	if n, _ := s.acquire(ctx, prioLive, 2, 2); n != 2 {
		t.Fatalf("live acquire got %d, want 2", n)
	}
	// 8 left: spare reservations leave a tenth of the 10 free, one.
	if n, _ := acquireSpare(ctx, prioIdle, 1, 10); n != 7 {
		t.Fatalf("spare acquire got %d, want 7 of the 8 left", n)
	}
	spare := grabWith(ctx, acquireSpare, prioIdle, 1, 10)
	waitWaiters(t, s, 1)
	// A waiting spare reservation holds no one up, at its priority or below.
	if n, _ := s.acquire(ctx, prioIdle, 1, 1); n != 1 {
		t.Fatalf("an idle acquire behind a waiting spare one got %d, want 1", n)
	}
	s.release(1) // 1 free: the one left free
	waitWaiters(t, s, 1)
	s.release(2) // the live work ends: 3 free, so two more
	if n := <-spare; n != 2 {
		t.Errorf("spare waiter got %d, want 2 of the 3 free", n)
	}
	s.releaseSpare(9)
	if got := s.available(); got != 10 {
		t.Errorf("%d slots free after every release, want 10", got)
	}
	// A live waiter comes before a spare one whatever their order.
	s.acquire(ctx, prioLive, 10, 10)
	spare = grabWith(ctx, acquireSpare, prioIdle, 1, 10)
	waitWaiters(t, s, 1)
	live := grab(ctx, s, prioLive, 1, 10)
	waitWaiters(t, s, 2)
	s.release(3)
	if n := <-live; n != 3 {
		t.Errorf("live waiter got %d, want all 3", n)
	}
	s.release(3)
	if n := <-spare; n != 2 {
		t.Errorf("spare waiter got %d, want 2 of 3", n)
	}

	// Held to no share, a spare reservation waits; allowed all, it takes
	// what is free at the next release.
	now.Store(int32(shareNone))
	spare = grabWith(ctx, acquireSpare, prioIdle, 1, 10)
	waitWaiters(t, s, 1)
	s.release(1)
	waitWaiters(t, s, 1)
	now.Store(int32(shareAll))
	s.release(1)
	if n := <-spare; n != 3 {
		t.Errorf("spare waiter allowed all got %d, want all 3 free", n)
	}
}
