package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/envelope"
)

// TestDuplicatesDeleted: two copies of one message (a send the gateway
// tried again, which landed twice) reach the application once; the other
// is deleted without a push and counted as a duplicate.
func TestDuplicatesDeleted(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) {
				b, names := setup(t, kind)
				meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: "0190b3c4-7a1e-7c3d-9f00-5a6b7c8d9e0f"}
				send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
				send(t, b, names.Live[1], msg{tenant: "acme", meta: &meta})
				send(t, b, names.Live[1], msg{tenant: "acme"}) // another message
				var pushes atomic.Int32
				ran := make(chan string, 10)
				h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
					pushes.Add(1)
					ran <- m.ID
					return nil
				})
				reg := prometheus.NewRegistry()
				w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, Registerer: reg,
					Dedupe: dedupe.NewMemory(dedupe.MemoryConfig{})})
				recv(t, ran, time.Minute, "push")
				recv(t, ran, time.Minute, "push")
				waitFor(t, time.Minute, "both copies ended", func() bool {
					return metric(t, reg, "fairq_worker_processed_total") == 3
				})
				stop(t, w)
				if n := pushes.Load(); n != 2 {
					t.Errorf("%d pushes, want 2: the message once and the other", n)
				}
				if n := metric(t, reg, "fairq_worker_processed_total", "outcome", "duplicate"); n != 1 {
					t.Errorf("%v duplicates counted, want 1", n)
				}
				for _, q := range names.All() {
					if n := depth(t, b, q); n != 0 {
						t.Errorf("%s holds %d messages, want 0", q, n)
					}
				}
			})
		})
	}
}

// TestCopyRunningElsewhereWaits: a copy whose id another worker holds a
// claim on is not pushed while that claim holds; it is sent back to its
// queue, delayed, and runs once the claim is gone (here: released, as
// after the other worker's failure).
func TestCopyRunningElsewhereWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		store := dedupe.NewMemory(dedupe.MemoryConfig{})
		const id = "0190b3c4-7a1e-7c3d-9f00-5a6b7c8d9e0f"
		other, err := store.Claim(context.Background(), id)
		if err != nil || other.Outcome != dedupe.Run {
			t.Fatal(other, err)
		}
		meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: id}
		send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
		ran := make(chan time.Time, 10)
		h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error {
			ran <- time.Now()
			return nil
		})
		start(t, consumer.Config{Backend: b, Names: names, Handler: h, Dedupe: store})
		synctest.Wait()
		select {
		case <-ran:
			t.Fatal("pushed while another worker holds its claim")
		default:
		}
		released := time.Now()
		if err := store.Release(context.Background(), id, other.Token); err != nil {
			t.Fatal(err)
		}
		at := recv(t, ran, time.Minute, "push after the claim was released")
		if waited := at.Sub(released); waited > dedupe.LeaseDefault+time.Second {
			t.Errorf("ran %v after the release, want within the rest of the lease", waited)
		}
	})
}

// waitFor polls cond until it holds, or fails the test after d. In a
// synctest bubble the polling costs no real time.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
