package batch_test

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
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/internal/batch"
)

// recorder is a Flush that records its batches and answers each item
// with key/item, taking delay (fake time under synctest) like a call on
// the wire.
type recorder struct {
	mu      sync.Mutex
	batches map[string][][]int
	at      []time.Duration // since start, per flush
	start   time.Time
	delay   time.Duration
}

func (r *recorder) flush(_ context.Context, key string, items []int) ([]string, error) {
	r.mu.Lock()
	if r.batches == nil {
		r.batches = map[string][][]int{}
	}
	r.batches[key] = append(r.batches[key], slices.Clone(items))
	r.at = append(r.at, time.Since(r.start))
	r.mu.Unlock()
	time.Sleep(r.delay)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = fmt.Sprintf("%s/%d", key, it)
	}
	return out, nil
}

// flushTimes returns the flush times in order.
func (r *recorder) flushTimes() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.at))
}

func newBatcher(t *testing.T, cfg batch.Config[int, string]) *batch.Batcher[int, string] {
	t.Helper()
	b, err := batch.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAdaptive feeds one key a steady stream of items, one every gap, and
// checks when each batch went: the times are those of synctest's fake
// clock, so that they are exact.
func TestAdaptive(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		window time.Duration
		gap    time.Duration
		n      int
		// Of the ten batches before the last (the end of the stream, which
		// waits out its window): their sizes, and the longest an item
		// waited in the second half of the stream.
		wantSizes []int
		wantWait  time.Duration
		// wantCalls bounds the flushes of the whole stream.
		wantCalls int
	}{
		{
			name:   "a key with few items never waits",
			window: 10 * ms, gap: 50 * ms, n: 40,
			wantSizes: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, wantWait: 0, wantCalls: 40,
		},
		{
			name:   "a busy key's items gather for the window, once its rate is known",
			window: 4500 * time.Microsecond, gap: ms, n: 100,
			wantSizes: []int{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, wantWait: 4500 * time.Microsecond, wantCalls: 30,
		},
		{
			name:   "a full batch goes before its window ends",
			window: 10 * ms, gap: 100 * time.Microsecond, n: 400,
			wantSizes: []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, wantWait: 900 * time.Microsecond, wantCalls: 50,
		},
		{
			name: "a batch goes when the rest of its window is unlikely to bring more",
			// At one item every 4.5 ms, the 0.5 ms left after the second
			// is expected to bring a ninth of an item.
			window: 5 * ms, gap: 4500 * time.Microsecond, n: 100,
			wantSizes: []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, wantWait: 4500 * time.Microsecond, wantCalls: 60,
		},
		{
			name:   "no window: every item goes at once, however busy its key",
			window: 0, gap: 100 * time.Microsecond, n: 100,
			wantSizes: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, wantWait: 0, wantCalls: 100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{start: time.Now(), delay: 10 * ms}
				b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: tt.window})
				sent := make([]time.Duration, tt.n)
				var mu sync.Mutex
				flushed := make([]time.Duration, tt.n)
				for i := range tt.n {
					time.Sleep(time.Duration(i)*tt.gap - time.Since(rec.start))
					sent[i] = time.Since(rec.start)
					err := b.SubmitFunc("k", i, func(r string, err error) {
						if want := fmt.Sprintf("k/%d", i); r != want || err != nil {
							t.Errorf("item %d: %q, %v, want its own result %q", i, r, err, want)
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					synctest.Wait() // a batch taken at once is flushed before the next item
				}
				time.Sleep(time.Second)
				if err := b.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				batches := rec.batches["k"]
				at := rec.flushTimes()
				for j, items := range batches {
					for _, i := range items {
						mu.Lock()
						flushed[i] = at[j]
						mu.Unlock()
					}
				}
				if len(batches) > tt.wantCalls {
					t.Errorf("%d flushes for %d items, want at most %d", len(batches), tt.n, tt.wantCalls)
				}
				last := batches[len(batches)-1]
				var sizes []int
				for _, items := range batches[max(0, len(batches)-11) : len(batches)-1] {
					sizes = append(sizes, len(items))
				}
				if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
					t.Errorf("sizes of the last batches (-want +got):\n%s", diff)
				}
				var longest time.Duration
				for i := range tt.n {
					wait := flushed[i] - sent[i]
					if wait > tt.window {
						t.Errorf("item %d waited %v, past the window of %v", i, wait, tt.window)
					}
					if i >= tt.n/2 && !slices.Contains(last, i) {
						longest = max(longest, wait)
					}
				}
				if longest != tt.wantWait {
					t.Errorf("items of the second half waited up to %v, want %v", longest, tt.wantWait)
				}
			})
		})
	}
}

// TestAdaptiveCallersWaitingForAnswers: eight callers that each send
// again only once answered, all to one key, under a window of 10 ms and
// flushes of 1 ms. Once all eight are in a batch nobody else can come; the
// batch goes when the key has been quiet for three of its mean gaps rather
// than at the end of the window, which would hold every caller to one item
// per 11 ms. (With C such callers a cycle settles at 1 ms ÷ (1 − 3/C):
// 1.6 ms for eight; three or fewer wait out the window.)
func TestAdaptiveCallersWaitingForAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: time.Millisecond}
		b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: 10 * time.Millisecond})
		var done atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := b.Do(context.Background(), "k", c); err != nil {
						t.Error(err)
						return
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		b.Stop(context.Background())
		// At the end of the window: 8 × 1 s / 11 ms = 727 items; quiet
		// after three gaps, up to 8 × 1 s / 1.6 ms = 5,000.
		if n := done.Load(); n < 2500 {
			t.Errorf("%d items in a second, want at least 2,500", n)
		}
		var sizes []int
		for _, items := range rec.batches["k"][10:] { // once the rate is known
			sizes = append(sizes, len(items))
		}
		if slices.Max(sizes) != 8 {
			t.Errorf("batches of %v items, want up to the eight callers", sizes)
		}
	})
}

// TestAdaptiveDoesNotWaitForAFlush: without a window, an item goes at once
// even while a flush of its key is under way, in a flush of its own.
func TestAdaptiveDoesNotWaitForAFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: time.Minute}
		b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush})
		for i := range 3 {
			time.Sleep(time.Millisecond)
			if err := b.SubmitFunc("k", i, nil); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		ms := time.Millisecond
		if diff := cmp.Diff([]time.Duration{ms, 2 * ms, 3 * ms}, rec.flushTimes()); diff != "" {
			t.Errorf("flush times (-want +got):\n%s", diff)
		}
		b.Stop(context.Background())
	})
}

func TestBatcherSubmitAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: 10 * time.Millisecond}
		b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: 2 * time.Millisecond})
		keys := []string{"a", "a", "b", "a"}
		items := []int{0, 1, 2, 3}
		for i := 4; i < 16; i++ {
			keys, items = append(keys, "c"), append(items, i)
		}
		tickets, err := b.SubmitAll(keys, items)
		if err != nil {
			t.Fatal(err)
		}
		for i, tk := range tickets {
			if r, err := tk.Wait(context.Background()); err != nil || r != fmt.Sprintf("%s/%d", keys[i], items[i]) {
				t.Errorf("ticket %d: %q, %v", i, r, err)
			}
		}
		b.Stop(context.Background())
		// Each key's items go together at once: sixteen items at one
		// instant are not taken for a rate that fills a 2 ms window.
		want := map[string][][]int{
			"a": {{0, 1, 3}},
			"b": {{2}},
			"c": {{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {14, 15}},
		}
		if diff := cmp.Diff(want, rec.batches); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]time.Duration{0, 0, 0, 0}, rec.flushTimes()); diff != "" {
			t.Errorf("flush times (-want +got):\n%s", diff)
		}
		if _, err := b.SubmitAll([]string{"a"}, nil); err == nil {
			t.Error("SubmitAll took one key for no item")
		}
	})
}

func TestBatcherMaxBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: 10 * time.Millisecond}
		b := newBatcher(t, batch.Config[int, string]{
			Flush:    rec.flush,
			MaxBytes: 100,
			Size:     func(i int) int { return i },
			Window:   time.Hour,
			Mode:     batch.Linger,
		})
		var wg sync.WaitGroup
		for _, size := range []int{40, 50, 30, 150, 20, 80} {
			wg.Go(func() { b.Do(context.Background(), "k", size) })
			synctest.Wait()
		}
		wg.Wait()
		b.Stop(context.Background())
		// 40+50, then 30 would pass 100; 30, then 150 would; 150 alone
		// is past it; 20+80 reaches 100. Batches flushed at the same
		// instant may go in either order.
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
		rec := &recorder{start: time.Now(), delay: time.Minute}
		b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: time.Hour, Mode: batch.Linger})
		var tickets []batch.Ticket[int, string]
		for i := range 3 {
			tk, err := b.Submit("k", i)
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
			synctest.Wait()
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The items waited for a window of an hour; Stop sent them
		// without waiting for it.
		if diff := cmp.Diff([]time.Duration{0}, rec.flushTimes()); diff != "" {
			t.Errorf("Stop did not flush at once: flush times %v", rec.at)
		}
		for i, tk := range tickets {
			if r, err := tk.Wait(context.Background()); err != nil || r != fmt.Sprintf("k/%d", i) {
				t.Errorf("ticket %d: %q, %v", i, r, err)
			}
		}
		if _, err := b.Submit("k", 9); !errors.Is(err, batch.ErrStopped) {
			t.Errorf("Submit after Stop: %v", err)
		}
		if _, err := b.SubmitAll([]string{"k"}, []int{9}); !errors.Is(err, batch.ErrStopped) {
			t.Errorf("SubmitAll after Stop: %v", err)
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
		b := newBatcher(t, batch.Config[int, string]{Flush: func(ctx context.Context, _ string, items []int) ([]string, error) {
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
			b := newBatcher(t, batch.Config[int, string]{Flush: flush})
			if _, err := b.Do(context.Background(), "k", 1); err == nil {
				t.Errorf("%s: no error", name)
			}
			b.Stop(context.Background())
		}
	})
}

func TestBatcherWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: time.Minute}
		b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: time.Hour, Mode: batch.Linger})
		if _, err := b.Submit("k", 0); err != nil { // waits for an hour
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if _, err := b.Do(ctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do: %v", err)
		}
		b.Stop(context.Background())
		if diff := cmp.Diff([][]int{{0, 1}}, rec.batches["k"]); diff != "" {
			t.Errorf("the item of a caller that left was not sent on Stop (-want +got):\n%s", diff)
		}
	})
}

func TestLingerWaitsForItsWindow(t *testing.T) {
	const ms = time.Millisecond
	type submit struct {
		key  string
		item int
		at   time.Duration // since start, in order
	}
	tests := []struct {
		name    string
		submits []submit
		want    map[string][][]int
		wantAt  []time.Duration
	}{
		{
			name:    "a lone item waits the window",
			submits: []submit{{"a", 0, 0}},
			want:    map[string][][]int{"a": {{0}}},
			wantAt:  []time.Duration{20 * ms},
		},
		{
			name: "each key's batch waits from its first item; a full batch goes at once",
			submits: []submit{
				{"a", 0, 0}, {"a", 1, 5 * ms}, {"b", 2, 10 * ms},
				{"c", 3, 12 * ms}, {"c", 4, 12 * ms}, {"c", 5, 12 * ms}, {"c", 6, 12 * ms}, {"c", 7, 12 * ms},
				{"c", 8, 12 * ms}, {"c", 9, 12 * ms}, {"c", 10, 12 * ms}, {"c", 11, 12 * ms}, {"c", 12, 12 * ms},
				{"a", 13, 25 * ms}, // a flush of a is under way: it waits all the same
			},
			want: map[string][][]int{
				"a": {{0, 1}, {13}},
				"b": {{2}},
				"c": {{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
			},
			wantAt: []time.Duration{12 * ms, 20 * ms, 30 * ms, 45 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{start: time.Now(), delay: 10 * ms}
				b := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: 20 * ms, Mode: batch.Linger})
				var mu sync.Mutex
				results := make(map[int]string)
				for _, sub := range tt.submits {
					time.Sleep(sub.at - time.Since(rec.start))
					err := b.SubmitFunc(sub.key, sub.item, func(r string, err error) {
						if err != nil {
							t.Error(err)
						}
						mu.Lock()
						results[sub.item] = r
						mu.Unlock()
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Second)
				if err := b.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, rec.batches); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantAt, rec.flushTimes()); diff != "" {
					t.Errorf("flush times (-want +got):\n%s", diff)
				}
				for _, sub := range tt.submits {
					if want := fmt.Sprintf("%s/%d", sub.key, sub.item); results[sub.item] != want {
						t.Errorf("item %d got %q, want its own result %q", sub.item, results[sub.item], want)
					}
				}
			})
		})
	}
}

func TestSubmitFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		type result struct {
			r   string
			err error
		}
		var mu sync.Mutex
		got := map[int]result{}
		record := func(item int) func(string, error) {
			return func(r string, err error) {
				mu.Lock()
				got[item] = result{r, err}
				mu.Unlock()
			}
		}
		b := newBatcher(t, batch.Config[int, string]{Mode: batch.Linger, Flush: func(_ context.Context, key string, items []int) ([]string, error) {
			if key == "bad" {
				return nil, boom
			}
			out := make([]string, len(items))
			for i, it := range items {
				out[i] = fmt.Sprint(it)
			}
			return out, nil
		}})
		// A ticket and callbacks share a batch; an item without a
		// callback among them is skipped.
		tk, err := b.Submit("k", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, key := range []string{"k", "k", "bad"} {
			if err := b.SubmitFunc(key, i+1, record(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SubmitFunc("k", 4, nil); err != nil {
			t.Fatal(err)
		}
		if r, err := tk.Wait(context.Background()); err != nil || r != "0" {
			t.Errorf("ticket: %q, %v", r, err)
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := map[int]result{1: {"1", nil}, 2: {"2", nil}, 3: {"", boom}}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{}), cmpopts.EquateErrors()); diff != "" {
			t.Errorf("callbacks (-want +got):\n%s", diff)
		}
		if err := b.SubmitFunc("k", 9, record(9)); !errors.Is(err, batch.ErrStopped) {
			t.Errorf("SubmitFunc after Stop: %v, want ErrStopped", err)
		}
		if _, ok := got[9]; ok {
			t.Error("the callback of an item refused at Stop was called")
		}
	})
}

func TestMaxFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var now, most atomic.Int64
		b := newBatcher(t, batch.Config[int, string]{MaxFlushes: 2, MaxItems: 1, Mode: batch.Linger,
			Flush: func(_ context.Context, _ string, items []int) ([]string, error) {
				n := now.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(10 * time.Millisecond)
				now.Add(-1)
				return make([]string, len(items)), nil
			}})
		var done atomic.Int64
		for i := range 7 {
			if err := b.SubmitFunc(fmt.Sprint("k", i%3), i, func(string, error) { done.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if most.Load() != 2 {
			t.Errorf("at most %d flushes under way at once, want 2", most.Load())
		}
		if done.Load() != 7 {
			t.Errorf("%d callbacks after Stop, want 7", done.Load())
		}
	})
}

func TestConfigRefused(t *testing.T) {
	flush := func(context.Context, string, []int) ([]string, error) { return nil, nil }
	for name, cfg := range map[string]batch.Config[int, string]{
		"no flush":           {},
		"bytes without size": {Flush: flush, MaxBytes: 10},
		"negative window":    {Flush: flush, Window: -1},
		"unknown mode":       {Flush: flush, Mode: 7},
		"negative flushes":   {Flush: flush, MaxFlushes: -1},
	} {
		if _, err := batch.New(cfg); err == nil {
			t.Errorf("%s: New took it", name)
		}
	}
	if _, err := batch.New(batch.Config[int, string]{Flush: flush}); err != nil {
		t.Errorf("New refused a valid config: %v", err)
	}
}

// BenchmarkBatcher measures the cost of an item through the batcher and
// how many flushes (send calls) each item costs, with many concurrent
// callers and a flush that takes 1 ms like a fast network call, without a
// window and with one of 2 ms.
func BenchmarkBatcher(b *testing.B) {
	for _, window := range []time.Duration{0, 2 * time.Millisecond} {
		for _, par := range []int{1, 8, 128} {
			b.Run(fmt.Sprintf("window=%v/parallelism=%d", window, par), func(b *testing.B) {
				var flushes atomic.Int64
				bt, err := batch.New(batch.Config[int, int]{Window: window, Flush: func(_ context.Context, _ string, items []int) ([]int, error) {
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
}

// TestWaiting: a key has a batch waiting from its first item until its
// window ends, and none while its batch is being taken at once.
func TestWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now(), delay: time.Millisecond}
		lingering := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: 10 * time.Millisecond, Mode: batch.Linger})
		adaptive := newBatcher(t, batch.Config[int, string]{Flush: rec.flush, Window: 10 * time.Millisecond})
		if lingering.Waiting("k") {
			t.Error("waiting before any item")
		}
		if err := lingering.SubmitFunc("k", 1, nil); err != nil {
			t.Fatal(err)
		}
		if !lingering.Waiting("k") || lingering.Waiting("other") {
			t.Errorf("after an item: waiting %t, another key %t; want true, false", lingering.Waiting("k"), lingering.Waiting("other"))
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if lingering.Waiting("k") {
			t.Error("still waiting after the window")
		}
		// A key with no rate yet: its item is taken at once.
		if err := adaptive.SubmitFunc("k", 1, nil); err != nil {
			t.Fatal(err)
		}
		if adaptive.Waiting("k") {
			t.Error("an item taken at once is waiting")
		}
		lingering.Stop(context.Background())
		adaptive.Stop(context.Background())
	})
}
