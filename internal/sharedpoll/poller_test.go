package sharedpoll_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/sharedpoll"
	"github.com/fairq/fairq/internal/testenv"
)

// count is a reading: a number, and when it was taken.
type count struct {
	at, n int64
}

func (c count) TakenAt() int64 { return c.at }

func encode(c count) string { return fmt.Sprintf("%d %d", c.at, c.n) }

func decode(s string) (count, error) {
	var c count
	if _, err := fmt.Sscanf(s, "%d %d", &c.at, &c.n); err != nil {
		return count{}, fmt.Errorf("decode %q: %w", s, err)
	}
	return c, nil
}

// process is one process of the fleet: its poller, and what it polled.
type process struct {
	*sharedpoll.Poller[count]
	polls atomic.Int64
	fail  atomic.Pointer[error]
	dep   *degrade.Dependency
	reg   *prometheus.Registry
	log   *bytes.Buffer
}

const interval = time.Minute // in real time, the lease lives half of it

// newProcess returns a process sharing its readings through rdb under
// prefix; its polls read n.
func newProcess(t *testing.T, rdb redis.UniversalClient, prefix string, n int64) *process {
	t.Helper()
	p := &process{reg: prometheus.NewRegistry(), log: &bytes.Buffer{}}
	m, err := degrade.NewMetrics(p.reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(p.log, nil))
	p.dep = degrade.New(degrade.Config{Component: "test_depths", Metrics: m, Logger: logger, Cooldown: -1})
	p.Poller, err = sharedpoll.New(sharedpoll.Config[count]{
		Redis: rdb, Key: prefix + ":reading", LockKey: prefix + ":reading-lock", Interval: interval,
		PollFunc: func(_ context.Context, at int64) (count, error) {
			if err := p.fail.Load(); err != nil {
				return count{}, *err
			}
			p.polls.Add(1)
			return count{at: at, n: n}, nil
		},
		EncodeFunc: encode, DecodeFunc: decode, Dependency: p.dep, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func onRedis(t *testing.T, test func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			test(t, topo.Client(t))
		})
	}
}

type step struct {
	who        int   // which process polls
	after      int64 // ms after the start
	dropLease  bool  // delete the lease first, as if it expired
	want       count // n 0: none
	wantSource sharedpoll.Source
}

// TestPoll walks a fleet of three processes through the lease's turns,
// on the times given to Poll.
func TestPoll(t *testing.T) {
	t.Parallel()
	onRedis(t, testPoll)
}

func testPoll(t *testing.T, rdb redis.UniversalClient) {
	prefix := testenv.Prefix(t)
	ps := []*process{newProcess(t, rdb, prefix, 10), newProcess(t, rdb, prefix, 20), newProcess(t, rdb, prefix, 30)}
	start := time.Now().UnixMilli()
	iv := interval.Milliseconds()
	for i, s := range []step{
		{who: 0, want: count{0, 10}, wantSource: sharedpoll.Polled},                              // the first polls and shares
		{who: 1, after: 1, want: count{0, 10}, wantSource: sharedpoll.Shared},                    // the others adopt it
		{who: 2, after: iv - 1, want: count{0, 10}, wantSource: sharedpoll.Shared},               // while it is younger than the interval
		{who: 1, after: iv, want: count{0, 10}, wantSource: sharedpoll.Shared},                   // old, but 0 holds the lease: the old one
		{who: 1, after: iv, dropLease: true, want: count{iv, 20}, wantSource: sharedpoll.Polled}, // the lease expired: 1 polls
		{who: 0, after: iv + 1, want: count{iv, 20}, wantSource: sharedpoll.Shared},              // and 0 adopts its reading
	} {
		if s.dropLease {
			if err := rdb.Del(t.Context(), prefix+":reading-lock").Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, src, err := ps[s.who].Poll(t.Context(), start+s.after)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := count{start + s.want.at, s.want.n}
		if got != want || src != s.wantSource {
			t.Errorf("step %d: process %d got %+v from %v, want %+v from %v", i, s.who, got, src, want, s.wantSource)
		}
	}
	if got := []int64{ps[0].polls.Load(), ps[1].polls.Load(), ps[2].polls.Load()}; got[0] != 1 || got[1] != 1 || got[2] != 0 {
		t.Errorf("polls by process = %v, want [1 1 0]", got)
	}
	if owner, _ := rdb.Get(t.Context(), prefix+":reading-lock").Result(); owner != ps[1].Token() {
		t.Errorf("lease owner %q, want the process that polled last", owner)
	}
	if ttl := rdb.PTTL(t.Context(), prefix+":reading").Val(); ttl <= 2*interval || ttl > 3*interval {
		t.Errorf("the shared reading lives %v, want three intervals", ttl)
	}
}

// TestPollNoneYet: a process that finds the lease taken and nothing
// shared has no reading; the caller keeps what it had.
func TestPollNoneYet(t *testing.T) {
	t.Parallel()
	rdb := testenv.RedisTopologies()[0].Client(t)
	prefix := testenv.Prefix(t)
	if err := rdb.Set(t.Context(), prefix+":reading-lock", "another process", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newProcess(t, rdb, prefix, 1)
	if got, src, err := p.Poll(t.Context(), time.Now().UnixMilli()); err != nil || src != sharedpoll.None || got != (count{}) {
		t.Errorf("Poll = %+v, %v, %v; want none", got, src, err)
	}
	if p.polls.Load() != 0 {
		t.Error("polled without the lease")
	}
}

// TestPollFailureReleasesLease: a failed poll is the caller's error, and
// leaves the lease to the next process at once.
func TestPollFailureReleasesLease(t *testing.T) {
	t.Parallel()
	rdb := testenv.RedisTopologies()[0].Client(t)
	prefix := testenv.Prefix(t)
	a, b := newProcess(t, rdb, prefix, 1), newProcess(t, rdb, prefix, 2)
	cause := errors.New("no route to sqs")
	a.fail.Store(&cause)
	now := time.Now().UnixMilli()
	if _, _, err := a.Poll(t.Context(), now); !errors.Is(err, cause) {
		t.Fatalf("Poll with a failing poll: %v, want %v", err, cause)
	}
	if got, src, err := b.Poll(t.Context(), now); err != nil || src != sharedpoll.Polled || got.n != 2 {
		t.Errorf("next process: %+v from %v, %v; want its own poll", got, src, err)
	}
}

// TestPollIgnoresForeignReading: a reading the caller cannot decode is
// logged and polled over.
func TestPollIgnoresForeignReading(t *testing.T) {
	t.Parallel()
	rdb := testenv.RedisTopologies()[0].Client(t)
	prefix := testenv.Prefix(t)
	if err := rdb.Set(t.Context(), prefix+":reading", "{not a count}", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newProcess(t, rdb, prefix, 5)
	if got, src, err := p.Poll(t.Context(), time.Now().UnixMilli()); err != nil || src != sharedpoll.Polled || got.n != 5 {
		t.Errorf("Poll over a foreign reading = %+v, %v, %v; want its own", got, src, err)
	}
	if !strings.Contains(p.log.String(), "ignoring a shared reading") {
		t.Errorf("no line for the foreign reading:\n%s", p.log.String())
	}
}

// TestPollRedisAway: while Redis cannot be reached each process polls
// alone, counts each poll as a fallback and says so once; once Redis is
// back it shares again, and says so once.
func TestPollRedisAway(t *testing.T) {
	t.Parallel()
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.Prefix(t)
	a, b := newProcess(t, rdb, prefix, 1), newProcess(t, rdb, prefix, 2)
	now := time.Now().UnixMilli()
	if _, src, _ := a.Poll(t.Context(), now); src != sharedpoll.Polled {
		t.Fatalf("first poll from %v", src)
	}

	proxy.SetDown(true)
	for i := range 3 {
		for _, p := range []*process{a, b} {
			if _, src, err := p.Poll(t.Context(), now+int64(i)); err != nil || src != sharedpoll.Polled {
				t.Fatalf("Poll with Redis away: %v, %v; want a poll", src, err)
			}
		}
	}
	if got := []int64{a.polls.Load(), b.polls.Load()}; got[0] != 4 || got[1] != 3 {
		t.Errorf("polls with Redis away = %v, want [4 3]: each its own", got)
	}
	for _, p := range []*process{a, b} {
		if !p.dep.Down() {
			t.Error("dependency not down with Redis away")
		}
		if got := fallbacks(t, p); got != 3 {
			t.Errorf("fallbacks = %v, want 3", got)
		}
	}

	proxy.SetDown(false)
	var sources []string
	for _, p := range []*process{a, b} {
		_, src, err := p.Poll(t.Context(), now+10)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, src.String())
		if p.dep.Down() {
			t.Error("dependency still down once Redis is back")
		}
	}
	// a's reading of before the cut is fresh for a minute, so both
	// adopt it.
	if got := strings.Join(sources, ","); got != "redis,redis" {
		t.Errorf("sources once Redis is back = %s, want redis,redis", got)
	}
	for _, p := range []*process{a, b} {
		if down, up := strings.Count(p.log.String(), "level=WARN"), strings.Count(p.log.String(), "level=INFO"); down != 1 || up != 1 {
			t.Errorf("%d down and %d up lines, want one of each:\n%s", down, up, p.log.String())
		}
	}
}

// fallbacks returns p's fairq_redis_fallback_total.
func fallbacks(t *testing.T, p *process) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fairq_redis_fallback_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no fairq_redis_fallback_total")
	return 0
}

func TestPollWithoutRedis(t *testing.T) {
	t.Parallel()
	var polls int
	p, err := sharedpoll.New(sharedpoll.Config[count]{Interval: time.Second, PollFunc: func(_ context.Context, at int64) (count, error) {
		polls++
		return count{at: at, n: int64(polls)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got, src, err := p.Poll(t.Context(), int64(i)); err != nil || src != sharedpoll.Polled || got.n != int64(i+1) {
			t.Errorf("Poll %d without Redis = %+v, %v, %v; want a poll each", i, got, src, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	poll := func(context.Context, int64) (count, error) { return count{}, nil }
	dep := degrade.New(degrade.Config{Component: "test"})
	full := sharedpoll.Config[count]{Redis: rdb, Key: "k", LockKey: "k-lock", Interval: time.Second,
		PollFunc: poll, EncodeFunc: encode, DecodeFunc: decode, Dependency: dep}
	if _, err := sharedpoll.New(full); err != nil {
		t.Fatalf("a full config: %v", err)
	}
	for name, mutate := range map[string]func(*sharedpoll.Config[count]){
		"no poll":          func(c *sharedpoll.Config[count]) { c.PollFunc = nil },
		"no interval":      func(c *sharedpoll.Config[count]) { c.Interval = 0 },
		"kept too briefly": func(c *sharedpoll.Config[count]) { c.Keep = c.Interval / 2 },
		"no key":           func(c *sharedpoll.Config[count]) { c.Key = "" },
		"one key for both": func(c *sharedpoll.Config[count]) { c.LockKey = c.Key },
		"no codec":         func(c *sharedpoll.Config[count]) { c.DecodeFunc = nil },
		"no dependency":    func(c *sharedpoll.Config[count]) { c.Dependency = nil },
		"negative timeout": func(c *sharedpoll.Config[count]) { c.RedisTimeout = -time.Second },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := full
			mutate(&c)
			if _, err := sharedpoll.New(c); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// TestPollMaxAge: a reading older than MaxAge, though younger than the
// interval, is polled anew.
func TestPollMaxAge(t *testing.T) {
	t.Parallel()
	rdb := testenv.RedisTopologies()[0].Client(t)
	prefix := testenv.Prefix(t)
	var polls int64
	p, err := sharedpoll.New(sharedpoll.Config[count]{
		Redis: rdb, Key: prefix + ":reading", LockKey: prefix + ":reading-lock",
		Interval: time.Second, MaxAge: 900 * time.Millisecond,
		PollFunc: func(_ context.Context, at int64) (count, error) {
			polls++
			return count{at: at, n: polls}, nil
		},
		EncodeFunc: encode, DecodeFunc: decode, Dependency: degrade.New(degrade.Config{Component: "test"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UnixMilli()
	for _, s := range []struct {
		after      int64
		want       int64
		wantSource sharedpoll.Source
	}{
		{0, 1, sharedpoll.Polled},
		{899, 1, sharedpoll.Shared},
		{900, 1, sharedpoll.Shared}, // old, but the lease (half a second, in real time) is still held
	} {
		got, src, err := p.Poll(t.Context(), start+s.after)
		if err != nil || got.n != s.want || src != s.wantSource {
			t.Errorf("at +%d ms: reading %d from %v, %v; want %d from %v", s.after, got.n, src, err, s.want, s.wantSource)
		}
	}
	if err := rdb.Del(t.Context(), prefix+":reading-lock").Err(); err != nil {
		t.Fatal(err)
	}
	if got, src, err := p.Poll(t.Context(), start+900); err != nil || got.n != 2 || src != sharedpoll.Polled {
		t.Errorf("at +900 ms, the lease gone: reading %d from %v, %v; want a new poll", got.n, src, err)
	}
}
