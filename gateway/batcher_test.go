package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/gateway"
)

// recorder is a Flush that records its batches and answers each item
// with key/item.
type recorder struct {
	mu      sync.Mutex
	batches map[string][][]int
	at      []time.Duration // since start, per flush
	start   time.Time
}

func (r *recorder) flush(_ context.Context, key string, items []int) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.batches == nil {
		r.batches = map[string][][]int{}
	}
	r.batches[key] = append(r.batches[key], slices.Clone(items))
	r.at = append(r.at, time.Since(r.start))
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf("%s/%d", key, it)
	}
	return out, nil
}

func newBatcher(t *testing.T, cfg gateway.BatcherConfig[int, string]) *gateway.Batcher[int, string] {
	t.Helper()
	b, err := gateway.NewBatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBatcherCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		b := newBatcher(t, gateway.BatcherConfig[int, string]{Flush: rec.flush, Window: 2 * time.Millisecond})
		var wg sync.WaitGroup
		results := make([]string, 25)
		for i := range 25 {
			key := "a"
			if i >= 22 {
				key = "b"
			}
			wg.Go(func() {
				r, err := b.Do(context.Background(), key, i)
				if err != nil {
					t.Error(err)
				}
				results[i] = r
			})
			synctest.Wait() // submit in order
		}
		wg.Wait()
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[string][][]int{
			"a": {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {20, 21}},
			"b": {{22, 23, 24}},
		}
		if diff := cmp.Diff(want, rec.batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		// Two full batches at once, the partial ones after the window.
		if diff := cmp.Diff([]time.Duration{0, 0, 2 * time.Millisecond, 2 * time.Millisecond}, rec.at); diff != "" {
			t.Errorf("flush times (-want +got):\n%s", diff)
		}
		for i, r := range results {
			key := "a"
			if i >= 22 {
				key = "b"
			}
			if want := fmt.Sprintf("%s/%d", key, i); r != want {
				t.Errorf("item %d got %q, want its own result %q", i, r, want)
			}
		}
	})
}

func TestBatcherMaxBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		b := newBatcher(t, gateway.BatcherConfig[int, string]{
			Flush:    rec.flush,
			MaxBytes: 100,
			Size:     func(i int) int { return i },
		})
		var wg sync.WaitGroup
		for _, size := range []int{40, 50, 30, 150, 20, 80} {
			wg.Go(func() { b.Do(context.Background(), "k", size) })
			synctest.Wait()
		}
		wg.Wait()
		b.Stop(context.Background())
		// 40+50, then 30 would pass 100; 150 alone; 20+80 reaches 100.
		// Batches flushed at the same instant may go in either order.
		want := [][]int{{20, 80}, {30}, {40, 50}, {150}}
		got := rec.batches["k"]
		slices.SortFunc(got, func(a, b []int) int { return a[0] - b[0] })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
	})
}

func TestBatcherStopFlushesPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		b := newBatcher(t, gateway.BatcherConfig[int, string]{Flush: rec.flush, Window: time.Hour})
		var tickets []gateway.Ticket[int, string]
		for i := range 3 {
			tk, err := b.Submit("k", i)
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]time.Duration{0}, rec.at); diff != "" {
			t.Errorf("Stop did not flush at once: flush times %v", rec.at)
		}
		for i, tk := range tickets {
			if r, err := tk.Wait(context.Background()); err != nil || r != fmt.Sprintf("k/%d", i) {
				t.Errorf("ticket %d: %q, %v", i, r, err)
			}
		}
		if _, err := b.Submit("k", 9); !errors.Is(err, gateway.ErrBatcherStopped) {
			t.Errorf("Submit after Stop: %v", err)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

func TestBatcherStopGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var sawCancel atomic.Bool
		b := newBatcher(t, gateway.BatcherConfig[int, string]{Flush: func(ctx context.Context, _ string, items []int) ([]string, error) {
			select {
			case <-release:
			case <-ctx.Done():
				sawCancel.Store(true)
				return nil, ctx.Err()
			}
			return make([]string, len(items)), nil
		}})
		tk, _ := b.Submit("k", 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop: %v, want DeadlineExceeded", err)
		}
		if !sawCancel.Load() {
			t.Error("the flush's context was not cancelled")
		}
		if _, err := tk.Wait(context.Background()); !errors.Is(err, context.Canceled) {
			t.Errorf("ticket: %v, want the flush's error", err)
		}
	})
}

func TestBatcherFlushFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		for name, flush := range map[string]func(context.Context, string, []int) ([]string, error){
			"error": func(context.Context, string, []int) ([]string, error) { return nil, boom },
			"short": func(context.Context, string, []int) ([]string, error) { return []string{}, nil },
			"panic": func(context.Context, string, []int) ([]string, error) { panic("bug") },
		} {
			b := newBatcher(t, gateway.BatcherConfig[int, string]{Flush: flush})
			if _, err := b.Do(context.Background(), "k", 1); err == nil {
				t.Errorf("%s: no error", name)
			}
			b.Stop(context.Background())
		}
	})
}

func TestBatcherWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		b := newBatcher(t, gateway.BatcherConfig[int, string]{Flush: rec.flush, Window: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if _, err := b.Do(ctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do: %v", err)
		}
		b.Stop(context.Background())
		if len(rec.batches["k"]) != 1 {
			t.Errorf("the item of a caller that left was not sent on Stop")
		}
	})
}

// BenchmarkBatcher measures the cost of an item through the batcher and
// how many flushes (send calls) each item costs, with many concurrent
// callers and a flush that takes 1 ms like a fast network call.
func BenchmarkBatcher(b *testing.B) {
	for _, par := range []int{1, 8, 128} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			var flushes atomic.Int64
			bt, err := gateway.NewBatcher(gateway.BatcherConfig[int, int]{Flush: func(_ context.Context, _ string, items []int) ([]int, error) {
				flushes.Add(1)
				time.Sleep(time.Millisecond)
				return items, nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			bt.Start(context.Background())
			defer bt.Stop(context.Background())
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := bt.Do(ctx, "q", 1); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(flushes.Load())/float64(b.N), "flushes/item")
		})
	}
}
