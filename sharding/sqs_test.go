package sharding

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

// TestTrackerSQS runs the tracker against the SQS emulator: with one queue
// of a shard made deep, new messages go to the other; a second tracker
// sharing readings through Redis does the same without reading the queues.
func TestTrackerSQS(t *testing.T) {
	t.Parallel()
	backend := testenv.SQSBackend(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	prefix := testenv.Prefix(t)
	names := queue.PoolNames(prefix, 4).Live
	for _, q := range names {
		if _, err := backend.Create(ctx, queue.Spec{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	newTracker := func(r DepthReader, rdb redis.UniversalClient) *Tracker {
		tr, err := NewTracker(Config{
			Reader: r, Queues: names, ShardSize: 2, Interval: time.Minute,
			Redis: rdb, KeyPrefix: prefix,
			Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	send := func(q, n int) {
		t.Helper()
		for n > 0 {
			batch := make([]queue.Entry, min(n, queue.MaxBatch))
			for i := range batch {
				batch[i] = queue.Entry{ID: fmt.Sprint(i), Body: "x"}
			}
			res, err := backend.Send(ctx, names[q], batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			n -= len(batch)
		}
	}

	a := newTracker(backend, nil)
	tenant := tenantWithShard(t, a.Pool(), 1, 3)
	send(1, 30)
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if d, fresh := a.Estimate(1); d != 30 || !fresh {
		t.Fatalf("Estimate(1) = %d, %v; want 30, true", d, fresh)
	}
	for i := range 10 {
		q := a.Pick(tenant)
		if q != 3 {
			t.Fatalf("pick %d = queue %d, want 3, the shallow queue of the shard", i, q)
		}
		send(q, 1)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[int]int64{1: 30, 3: 10} {
		if d, _ := a.Estimate(q); d != want {
			t.Errorf("after sending: Estimate(%d) = %d, want %d", q, d, want)
		}
	}

	// A fleet: p polls and shares the reading, b adopts it.
	p := newTracker(backend, rdb)
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	counter := &readerCounter{DepthReader: backend}
	b := newTracker(counter, rdb)
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if counter.calls != 0 {
		t.Errorf("second tracker read the queues %d times, want 0 (shared reading)", counter.calls)
	}
	for i := range 20 {
		if q := b.Pick(tenant); q != 3 {
			t.Fatalf("second tracker: pick %d = queue %d, want 3", i, q)
		}
	}
	// Queue 3 now stands at 30 for b too: further picks alternate.
	got := map[int]int{}
	for range 10 {
		got[b.Pick(tenant)]++
	}
	if got[1] != 5 || got[3] != 5 {
		t.Errorf("picks once the queues are level = %v, want 5 on each", got)
	}
}
