package throttle_test

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

// startedMeter returns a RedisMeter on client, started, stopped at the
// end of the test.
func startedMeter(t *testing.T, client redis.UniversalClient, prefix string) *throttle.RedisMeter {
	t.Helper()
	m, err := throttle.NewRedisMeter(throttle.RedisMeterConfig{Client: client, Prefix: prefix,
		Window: 2 * time.Second, Every: 20 * time.Millisecond, Component: "test_meter"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return m
}

// rateOf waits for m's answer on key that satisfies ok, and returns it.
func rateOf(t *testing.T, m *throttle.RedisMeter, key string, ok func(perSecond float64, since time.Duration) bool) (float64, time.Duration) {
	t.Helper()
	var r float64
	var since time.Duration
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var known bool
		if r, since, known = m.Rate(key); known && ok(r, since) {
			return r, since
		}
	}
	t.Fatalf("%s: the last answer %.2f/s, latest %v ago; not as wanted within 5 s", key, r, since)
	return 0, 0
}

func TestRedisMeter(t *testing.T) {
	t.Parallel()
	onRedis(t, testRedisMeter)
}

// testRedisMeter: the events two processes mark make one rate, which a
// third process that marked none reads too.
func testRedisMeter(t *testing.T, newClient func() redis.UniversalClient, prefix string) {
	a, b, c := startedMeter(t, newClient(), prefix), startedMeter(t, newClient(), prefix), startedMeter(t, newClient(), prefix)
	// c has not read x yet.
	if _, _, ok := c.Rate("x"); ok {
		t.Fatal("a rate known before it was read")
	}
	// Each event adds 1/Window to the average: 20 of them, 10/s, less
	// the decay while they are sent and read (e^-0.25 after 500 ms).
	for range 10 {
		a.MarkAt("x", time.Now())
		b.MarkAt("x", time.Now())
	}
	inRange := func(r float64, since time.Duration) bool { return r > 7.5 && r <= 10.0001 && since < time.Second }
	for _, m := range []*throttle.RedisMeter{a, b, c} {
		rateOf(t, m, "x", inRange)
	}
	// A key nobody marked is known, at zero, and never had an event.
	r, since := rateOf(t, c, "y", func(float64, time.Duration) bool { return true })
	if r != 0 || since != time.Duration(math.MaxInt64) {
		t.Errorf("y, never marked: %.2f/s, latest %v ago; want 0 and none", r, since)
	}
	// Events that happened a Window ago count e^-1 each, as the average
	// would have had them: 20 of them, 3.68/s, less the decay meanwhile.
	for range 20 {
		a.MarkAt("w", time.Now().Add(-2*time.Second))
	}
	rateOf(t, c, "w", func(r float64, since time.Duration) bool { return r > 2.5 && r <= 3.68 && since < time.Second })
	// The rate decays once the events stop.
	rateOf(t, c, "x", func(r float64, _ time.Duration) bool { return r < 7 })
}

// TestRedisMeterUnreachable: without Redis, MarkAt does not block and Rate
// knows nothing, so that the caller goes by what it sees itself.
func TestRedisMeterUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	m := startedMeter(t, client, testenv.Prefix(t)+":")
	for range 100 {
		m.MarkAt("x", time.Now())
	}
	time.Sleep(200 * time.Millisecond) // a few syncs, all failing
	if r, since, ok := m.Rate("x"); ok {
		t.Errorf("Rate with Redis unreachable: %.2f/s, %v; want unknown", r, since)
	}
}

func TestNewRedisMeterRefuses(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { client.Close() })
	for _, cfg := range []throttle.RedisMeterConfig{
		{Window: time.Second, Component: "c"},
		{Client: client, Component: "c"},
		{Client: client, Window: time.Second},
		{Client: client, Window: time.Second, Component: "c", Every: -time.Second},
	} {
		if _, err := throttle.NewRedisMeter(cfg); err == nil {
			t.Errorf("NewRedisMeter(%+v): no error", cfg)
		}
	}
}
