package backlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

func known(t *testing.T, tr *backlog.Tracker, tenant string) int64 {
	t.Helper()
	n, ok, err := tr.Get(context.Background(), tenant)
	if err != nil || !ok {
		t.Fatalf("Get(%s) = %d, %v, %v; want a known count", tenant, n, ok, err)
	}
	return n
}

// TestTracker: Adds and Dones reach the counter, and Get sees them at
// once, those gathered and not applied yet included.
func TestTracker(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newCounter func(now func() time.Time) *backlog.Counter) {
		ctx := context.Background()
		c := newCounter(time.Now)
		tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c})
		if err != nil {
			t.Fatal(err)
		}
		// Not started: with Redis nothing is applied yet.
		tr.Add("a", 5)
		tr.Done("a", 2)
		tr.Add("b", 1)
		if got := known(t, tr, "a"); got != 3 {
			t.Errorf("before the round: a = %d, want 3", got)
		}
		if err := tr.Start(ctx); err != nil {
			t.Fatal(err)
		}
		tr.Done("b", 1)
		tr.Add("a", 1)
		if err := tr.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for tenant, want := range map[string]int64{"a": 4, "b": 0} {
			if got := get(t, c, tenant); got != want {
				t.Errorf("counter after Stop: %s = %d, want %d", tenant, got, want)
			}
			if got := known(t, tr, tenant); got != want {
				t.Errorf("tracker after Stop: %s = %d, want %d", tenant, got, want)
			}
		}
	})
}

// TestTrackerFlush: a tracker that was never started applies what is
// pending on Flush.
func TestTrackerFlush(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { client.Close() })
	c, err := backlog.New(backlog.Config{Redis: client, Prefix: testenv.Prefix(t) + ":", MaxStale: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c})
	if err != nil {
		t.Fatal(err)
	}
	tr.Add("a", 7)
	if got := get(t, c, "a"); got != 0 {
		t.Fatalf("applied before Flush: %d", got)
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "a"); got != 7 {
		t.Errorf("after Flush: %d, want 7", got)
	}
}

// TestTrackerRedisDown: while Redis is unreachable, Get answers that the
// count is unknown (fail open, counted as a fallback) or ErrUnavailable
// (fail closed), the ended messages of the rounds are dropped and
// counted, and the outage is said once; once Redis is back the counts
// apply again.
func TestTrackerRedisDown(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail open", true: "fail closed"}[closed], func(t *testing.T) {
			t.Parallel()
			proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
			client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			t.Cleanup(func() { client.Close() })
			c, err := backlog.New(backlog.Config{Redis: client, Prefix: testenv.Prefix(t) + ":", MaxStale: -1})
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			redisMetrics, err := degrade.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			var logs testenv.LogBuffer
			tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c, FailClosed: closed, Registerer: reg, RedisMetrics: redisMetrics,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			tr.Add("a", 3)
			if err := tr.Flush(ctx); err != nil {
				t.Fatal(err)
			}

			proxy.SetDown(true)
			if n, ok, err := tr.Get(ctx, "a"); ok || closed != errors.Is(err, backlog.ErrUnavailable) || !closed && err != nil {
				t.Errorf("Get while Redis is down, fail closed %v: %d, %v, %v; want an unknown count, ErrUnavailable when failing closed", closed, n, ok, err)
			}
			tr.Done("a", 2)
			if err := tr.Flush(ctx); !errors.Is(err, backlog.ErrUnavailable) {
				t.Errorf("Flush while Redis is down: %v, want ErrUnavailable", err)
			}
			if got := testutil.ToFloat64(redisMetrics.FallbackFor("backlog")); closed && got != 0 || !closed && got != 1 {
				t.Errorf("fairq_redis_fallback_total{component=backlog} = %v", got)
			}
			want := `
# HELP fairq_redis_degraded 1 while a component cannot reach Redis and runs on local state or refuses, by component.
# TYPE fairq_redis_degraded gauge
fairq_redis_degraded{component="backlog"} 1
# HELP fairq_worker_backlog_decrements_dropped_total Ended messages whose tenant's backlog counter could not be decremented (the counter is reconciled).
# TYPE fairq_worker_backlog_decrements_dropped_total counter
fairq_worker_backlog_decrements_dropped_total 2
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairq_redis_degraded", "fairq_worker_backlog_decrements_dropped_total"); err != nil {
				t.Error(err)
			}

			proxy.SetDown(false)
			time.Sleep(degrade.CooldownDefault) // Redis rests after a failure: a real second
			tr.Done("a", 1)
			if err := tr.Flush(ctx); err != nil {
				t.Fatalf("Flush once Redis is back: %v", err)
			}
			if got := known(t, tr, "a"); got != 2 {
				t.Errorf("once back: a = %d, want 2 (3 added, the 2 dropped never taken off, 1 taken off)", got)
			}
			checkLines(t, logs.String(), map[string]int{
				"redis unreachable":    1,
				"redis is back":        1,
				"counts dropped until": 1,
				"decremented again":    1,
				"component=backlog":    2,
				"messages=2":           1,
				"dropped=2":            1,
				"level=ERROR":          map[bool]int{false: 0, true: 1}[closed],
			})
		})
	}
}

// checkLines checks how many lines of logs hold each text.
func checkLines(t *testing.T, logs string, want map[string]int) {
	t.Helper()
	for text, n := range want {
		if got := strings.Count(logs, text); got != n {
			t.Errorf("%d lines with %q, want %d:\n%s", got, text, n, logs)
		}
	}
}

// TestTrackerHung: with a counter that does not answer, Add and Done do
// not wait, a round gives up after one call's timeout and drops the rest,
// and Stop waits for at most the call under way.
func TestTrackerHung(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	client := redis.NewClient(&redis.Options{Addr: testenv.Blackhole(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	c, err := backlog.New(backlog.Config{Redis: client, Prefix: "hung:", MaxStale: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c, CallTimeout: timeout, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 400 {
		tr.Done([]string{"a", "b", "c", "d"}[i%4], 1)
	}
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("400 Dones took %v with the counter hung", took)
	}
	t0 := time.Now()
	if err := tr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 2*timeout+timeout/2 {
		t.Errorf("Stop took %v, want at most the %v of the call under way and one more", took, 2*timeout)
	}
	want := `
# HELP fairq_worker_backlog_decrements_dropped_total Ended messages whose tenant's backlog counter could not be decremented (the counter is reconciled).
# TYPE fairq_worker_backlog_decrements_dropped_total counter
fairq_worker_backlog_decrements_dropped_total 400
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestTrackerReconciles: every ReconcileEvery the counts are capped at
// the larger of the last two readings of the queues.
func TestTrackerReconciles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := queue.NewMemory(queue.MemoryConfig{})
		for _, q := range []string{"live", "overflow"} {
			if _, err := mem.Create(ctx, queue.Spec{Name: q}); err != nil {
				t.Fatal(err)
			}
		}
		send := func(q string, n int) {
			for range n {
				if _, err := mem.Send(ctx, q, []queue.Entry{{ID: "0", Body: "x"}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		send("live", 2)
		send("overflow", 1)
		c, err := backlog.New(backlog.Config{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c, Depths: mem, Queues: []string{"live", "overflow"}, ReconcileEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		testenv.Started(t, tr)
		tr.Add("a", 10)
		time.Sleep(time.Minute) // the first reading: 3
		synctest.Wait()
		if got := known(t, tr, "a"); got != 10 {
			t.Errorf("after one reading: %d, want 10 (two readings are needed)", got)
		}
		send("live", 2)
		time.Sleep(time.Minute) // the second: 5; the larger of the two caps
		synctest.Wait()
		if got := known(t, tr, "a"); got != 5 {
			t.Errorf("after two readings: %d, want 5", got)
		}
	})
}

// TestOff: the tracker of a process that keeps no counts.
func TestOff(t *testing.T) {
	var off backlog.Off
	off.Add("a", 3)
	off.Done("a", 1)
	if n, ok, err := off.Get(context.Background(), "a"); n != 0 || ok || err != nil {
		t.Errorf("Get = %d, %v, %v; want an unknown count", n, ok, err)
	}
}

// scriptCalls counts the backlog scripts a client runs: those that update
// or read a tenant's hash with the set of tenants (add, take, and so a
// Get that asks Redis), and those that read counts alone (Refresh).
type scriptCalls struct{ updates, reads atomic.Int64 }

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if name := strings.ToLower(fmt.Sprint(args[0])); (name == "evalsha" || name == "eval") && len(args) > 2 {
			n, _ := strconv.Atoi(fmt.Sprint(args[2]))
			update := false
			for _, k := range args[3:min(len(args), 3+n)] {
				update = update || strings.HasSuffix(fmt.Sprint(k), ":tenants")
			}
			if update {
				h.updates.Add(1)
			} else {
				h.reads.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

// TestTrackerKeepsFresh: a tenant asked for within KeepFresh is read again
// in the background, so that Get answers it from the cache, no staler
// than MaxStale, without asking Redis itself; once not asked for within
// KeepFresh, it is no longer read.
func TestTrackerKeepsFresh(t *testing.T) {
	t.Parallel()
	const maxStale, keepFresh = 400 * time.Millisecond, 1500 * time.Millisecond
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client, calls := topo.Client(t), &scriptCalls{}
			client.AddHook(calls)
			prefix := testenv.Prefix(t) + ":"
			gw, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix, MaxStale: maxStale})
			if err != nil {
				t.Fatal(err)
			}
			other, err := backlog.New(backlog.Config{Redis: topo.Client(t), Prefix: prefix, MaxStale: -1})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: gw, KeepFresh: keepFresh})
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Stop(ctx) })

			known(t, tr, "a") // asked of Redis: a is kept fresh from now on
			if err := other.Add(ctx, "a", 7); err != nil {
				t.Fatal(err)
			}
			added := time.Now()
			for known(t, tr, "a") != 7 {
				if time.Since(added) > 2*maxStale {
					t.Fatalf("another process's Add not seen %v after it", time.Since(added))
				}
				time.Sleep(10 * time.Millisecond)
			}
			updates := calls.updates.Load()
			for range 12 { // over three MaxStales
				if got := known(t, tr, "a"); got != 7 {
					t.Fatalf("a = %d, want 7", got)
				}
				time.Sleep(maxStale / 4)
			}
			if n := calls.updates.Load() - updates; n != 0 {
				t.Errorf("Get asked Redis itself %d times over %v, while a was kept fresh", n, 3*maxStale)
			}

			time.Sleep(keepFresh + maxStale) // a not asked for since
			reads := calls.reads.Load()
			time.Sleep(maxStale)
			if n := calls.reads.Load() - reads; n != 0 {
				t.Errorf("%d reads in the background %v after a was last asked for, want none past KeepFresh (%v)", n, keepFresh+maxStale, keepFresh)
			}
			if calls.reads.Load() == 0 {
				t.Error("no reads in the background")
			}
		})
	}
}
