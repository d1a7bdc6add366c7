package degrade_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fairq/fairq/internal/degrade"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestDependency(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := degrade.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	d := degrade.New(degrade.Config{Component: "test", Metrics: m, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Down: "going local", Up: "shared again"})
	other := degrade.New(degrade.Config{Component: "other", Metrics: m})
	ctx := context.Background()

	if d.Down() || d.Resting() {
		t.Fatal("a new dependency is down")
	}
	if !d.Failed(ctx, errors.New("dial: refused")) || d.Failed(ctx, errors.New("again")) {
		t.Error("Failed: want true for the first failure only")
	}
	if !d.Down() || !d.Resting() {
		t.Error("after a failure: want down and resting")
	}
	d.Fallback()
	d.Fallback()
	other.Fallback()
	clk.Advance(degrade.CooldownDefault)
	if d.Resting() || !d.Down() {
		t.Error("after the cooldown: want down, not resting (ask Redis again)")
	}
	want := `
# HELP fairq_redis_degraded 1 while a component cannot reach Redis and runs on local state or refuses, by component.
# TYPE fairq_redis_degraded gauge
fairq_redis_degraded{component="other"} 0
fairq_redis_degraded{component="test"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairq_redis_degraded"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.FallbackFor("test")); got != 2 {
		t.Errorf("fallbacks of test: %v, want 2", got)
	}
	if !d.OK(ctx) || d.OK(ctx) || d.Down() {
		t.Error("OK: want true for the first answer after a failure only, and up after")
	}
	if got := strings.Count(log.String(), "going local"); got != 1 {
		t.Errorf("%d down lines, want 1:\n%s", got, log.String())
	}
	if got := strings.Count(log.String(), "shared again"); got != 1 {
		t.Errorf("%d up lines, want 1:\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), "component=test") || !strings.Contains(log.String(), "dial: refused") {
		t.Errorf("log lines lack the component or the cause:\n%s", log.String())
	}
}

// TestMetricsRegisterOnce: two sets of metrics on one registry is a wiring
// mistake, reported, not tolerated.
func TestMetricsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := degrade.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := degrade.NewMetrics(reg); err == nil {
		t.Error("second NewMetrics on one registry: no error")
	}
}

// TestTransitionAttrs: the attributes given with a transition follow the
// component (and the error) in its log line; answers while up log
// nothing.
func TestTransitionAttrs(t *testing.T) {
	var log bytes.Buffer
	d := degrade.New(degrade.Config{Component: "fleet", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	ctx := context.Background()
	d.OK(ctx, slog.Int("fleet_size", 9))
	d.Failed(ctx, errors.New("refused"), slog.Int("fleet_size", 3))
	d.OK(ctx, slog.Int("fleet_size", 4))
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want the failure and the recovery:\n%s", len(lines), log.String())
	}
	for i, want := range []string{"component=fleet err=refused fleet_size=3", "component=fleet fleet_size=4"} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d: %q, want it to end with %q", i, lines[i], want)
		}
	}
}

// BenchmarkUp is what a dependency costs every request while Redis is up.
func BenchmarkUp(b *testing.B) {
	d := degrade.New(degrade.Config{Component: "bench"})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !d.Resting() {
				d.OK(ctx)
			}
		}
	})
}

// TestFailClosedLine: a component that refuses without Redis says so at
// Error, with its Closed line (or the default one) instead of Down.
func TestFailClosedLine(t *testing.T) {
	for _, tt := range []struct {
		closed   bool
		line     string
		wantLine string
		level    string
	}{
		{false, "", "going local", "level=WARN"},
		{true, "", "redis unreachable; refusing until it is back (fail closed)", "level=ERROR"},
		{true, "refusing slots", "refusing slots", "level=ERROR"},
	} {
		var log bytes.Buffer
		d := degrade.New(degrade.Config{Component: "c", Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Down: "going local", FailClosed: tt.closed, Closed: tt.line})
		d.Failed(context.Background(), errors.New("refused"))
		if got := log.String(); !strings.Contains(got, tt.level) || !strings.Contains(got, `msg="`+tt.wantLine+`"`) {
			t.Errorf("closed %v, Closed %q: logged %q, want %s and %q", tt.closed, tt.line, got, tt.level, tt.wantLine)
		}
	}
}
