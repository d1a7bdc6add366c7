package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

// sqsPool returns an SQS backend on the emulator whose requests count in
// reg, with a pool of n live queues created under a fresh prefix.
func sqsPool(t testing.TB, reg prometheus.Registerer, n int) (*queue.SQS, queue.Names) {
	t.Helper()
	// No keep-alive: no idle connection outlives the test (goleak).
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true })
	b, err := queue.NewSQS(context.Background(), queue.SQSConfig{
		Region: testenv.SQSRegion, Endpoint: testenv.SQSEndpoint(t),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  reg, Logger: slog.New(slog.DiscardHandler), HTTPClient: client,
	})
	if err != nil {
		t.Fatal(err)
	}
	names := queue.PoolNames(testenv.Prefix(t), n)
	queuetest.CreatePool(t, b, names)
	return b, names
}

// autoscalingFleet is the autoscaling of W workers of one fleet, each
// with its registry, on one backend.
type autoscalingFleet struct {
	members []*fleet.Autoscaling
	regs    []*prometheus.Registry
}

// startAutoscaling starts w Autoscalings reading names' live, overflow
// and backlog queues every interval through rdb (nil: each alone); they
// are stopped when the test ends.
func startAutoscaling(t testing.TB, b fleet.DepthReader, names queue.Names, rdb redis.UniversalClient, w int, interval time.Duration) *autoscalingFleet {
	t.Helper()
	f := &autoscalingFleet{}
	prefix := testenv.Prefix(t) + ":"
	for range w {
		reg := prometheus.NewRegistry()
		redisMetrics, err := degrade.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := fleet.NewAutoscaling(fleet.AutoscalingConfig{
			Depths: b, Queues: append(append([]string{}, names.Live...), names.Overflow, names.Backlog),
			SizeFunc: func() int { return w }, Interval: interval,
			Redis: rdb, Prefix: prefix, RedisMetrics: redisMetrics, Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		f.members, f.regs = append(f.members, a), append(f.regs, reg)
	}
	return f
}

// readings returns, for each member, the readings it took up from source.
func (f *autoscalingFleet) readings(t testing.TB, source string) []float64 {
	t.Helper()
	out := make([]float64, len(f.regs))
	for i, reg := range f.regs {
		out[i] = counter(t, reg, "fairq_backlog_readings_total", "source", source)
	}
	return out
}

// counter returns the value of the series of a counter with label=value.
func counter(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// span counts the GetQueueAttributes requests sent over d of real time.
func span(t testing.TB, sqsRegistry *prometheus.Registry, d time.Duration) float64 {
	t.Helper()
	before := counter(t, sqsRegistry, "fairq_sqs_requests_total", "op", "GetQueueAttributes")
	// The measurement window: counting requests over a span of real time
	// is the point here, not synchronisation.
	<-time.After(d)
	return counter(t, sqsRegistry, "fairq_sqs_requests_total", "op", "GetQueueAttributes") - before
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestAutoscalingSharedReads runs the autoscaling of four workers sharing
// one Redis against the SQS emulator and counts their GetQueueAttributes
// requests: about one reading of the N + 2 queues per interval for the
// fleet, where each worker used to take one. With Redis cut, each worker
// reads alone, four readings an interval, and says so; once Redis is
// back they share again.
func TestAutoscalingSharedReads(t *testing.T) {
	t.Parallel()
	const n, w, interval, intervals = 8, 4, 400 * time.Millisecond, 10
	const queues = n + 2
	sqsRegistry := prometheus.NewRegistry()
	b, names := sqsPool(t, sqsRegistry, n)
	for i, q := range []string{names.Live[0], names.Live[0], names.Live[5], names.Overflow, names.Backlog, names.DLQ} {
		queuetest.Put(t, b, q, queuetest.Msg{Body: fmt.Sprint(i)})
	}
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	f := startAutoscaling(t, b, names, rdb, w, interval)
	for i, reg := range f.regs {
		eventually(t, 5*time.Second, fmt.Sprintf("worker %d reads the backlog", i), func() bool {
			v, _ := optionalGauge(t, reg, "fairq_backlog_visible_messages")
			return v == 5 // not the dead letter
		})
	}

	shared := span(t, sqsRegistry, intervals*interval)
	readings := shared / queues
	t.Logf("%d workers sharing: %.0f GetQueueAttributes over %d intervals, %.1f readings an interval", w, shared, intervals, readings/intervals)
	// A reading is at least nine tenths of an interval after the one
	// before (the slack of its maximum age), plus one under way at either
	// end: 13 at most. A machine so slow that reads outlast the lease
	// makes a few more, and one that drops ticks fewer; each worker
	// reading alone would make 40.
	if readings > 2*intervals || readings < intervals/3 {
		t.Errorf("the fleet took %.1f readings in %d intervals, want about one an interval", readings, intervals)
	}
	if adopted := sum(f.readings(t, "redis")); adopted < float64(w-1)*intervals/3 {
		t.Errorf("readings adopted from Redis = %v, want most of the others' refreshes", adopted)
	}

	pollsBefore := f.readings(t, "poll")
	proxy.SetDown(true)
	for i, reg := range f.regs {
		eventually(t, 5*time.Second, fmt.Sprintf("worker %d sees Redis away", i), func() bool {
			return gaugeOf(t, reg, "fairq_redis_degraded", "autoscaling") == 1
		})
	}
	alone := span(t, sqsRegistry, intervals*interval)
	t.Logf("%d workers, Redis away: %.0f GetQueueAttributes over %d intervals, %.1f readings an interval", w, alone, intervals, alone/queues/intervals)
	if readings := alone / queues; readings < w*intervals/3 || readings > w*(intervals+2) {
		t.Errorf("with Redis away the fleet took %.1f readings in %d intervals, want about %d an interval (each worker alone)", readings, intervals, w)
	}
	for i, polls := range f.readings(t, "poll") {
		if took := polls - pollsBefore[i]; took < intervals/3 {
			t.Errorf("worker %d read the queues %v times with Redis away, want about once an interval", i, took)
		}
	}

	proxy.SetDown(false)
	for i, reg := range f.regs {
		eventually(t, 5*time.Second, fmt.Sprintf("worker %d shares again", i), func() bool {
			return gaugeOf(t, reg, "fairq_redis_degraded", "autoscaling") == 0
		})
	}
	if again := span(t, sqsRegistry, intervals*interval) / queues; again > 2*intervals {
		t.Errorf("once Redis is back the fleet took %.1f readings in %d intervals, want about one an interval", again, intervals)
	}
}

// gaugeOf returns the series of a gauge with component=c.
func gaugeOf(t testing.TB, reg *prometheus.Registry, name, c string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "component" && lp.GetValue() == c {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestAutoscalingAloneWithRedis: a worker alone in its fleet still reads
// the queues every interval: its own reading is old at its next tick.
func TestAutoscalingAloneWithRedis(t *testing.T) {
	t.Parallel()
	const n, interval, intervals = 2, 400 * time.Millisecond, 10
	sqsRegistry := prometheus.NewRegistry()
	b, names := sqsPool(t, sqsRegistry, n)
	f := startAutoscaling(t, b, names, testenv.RedisTopologies()[0].Client(t), 1, interval)
	eventually(t, 5*time.Second, "the first reading", func() bool { return f.readings(t, "poll")[0] == 1 })
	readings := span(t, sqsRegistry, intervals*interval) / (n + 2)
	t.Logf("one worker with Redis: %.1f readings in %d intervals", readings, intervals)
	if readings < intervals*7/10 || readings > intervals+1 {
		t.Errorf("one worker took %.1f readings in %d intervals, want one an interval", readings, intervals)
	}
}

// TestAutoscalingTurns: with Redis, a worker adopts the reading another
// took less than an interval ago, and reads anew at its next tick, which
// may come a little less than an interval after its previous reading
// began (the ticker starts before the reading takes the time).
func TestAutoscalingTurns(t *testing.T) {
	t.Parallel()
	rdb := testenv.RedisTopologies()[0].Client(t)
	prefix := testenv.Prefix(t) + ":"
	queues := []string{"live-00", "live-01", "overflow", "backlog"}
	c := &clock{now: time.Now()}
	type worker struct {
		a   *fleet.Autoscaling
		d   *depths
		reg *prometheus.Registry
	}
	var ws []worker
	for range 2 {
		w := worker{d: &depths{visible: map[string]int{"live-00": 6, "backlog": 3}}, reg: prometheus.NewRegistry()}
		var err error
		w.a, err = fleet.NewAutoscaling(fleet.AutoscalingConfig{
			Depths: w.d, Queues: queues, SizeFunc: func() int { return 3 }, Interval: 10 * time.Second,
			Redis: rdb, Prefix: prefix, Registerer: w.reg, Now: c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	refresh := func(w worker) {
		t.Helper()
		if err := w.a.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	calls := func() []int {
		var out []int
		for _, w := range ws {
			w.d.mu.Lock()
			out = append(out, w.d.calls)
			w.d.mu.Unlock()
		}
		return out
	}

	refresh(ws[0])
	c.Advance(time.Second)
	refresh(ws[1])
	if got := calls(); got[0] != 4 || got[1] != 0 {
		t.Errorf("reads by worker = %v, want [4 0]: the second adopts the first's reading", got)
	}
	if got := gauge(t, ws[1].reg, "fairq_backlog_per_instance"); got != 3 {
		t.Errorf("the second's backlog per instance = %v, want the 9 visible ÷ 3 workers", got)
	}

	// The first's next tick, a millisecond short of an interval after its
	// reading; its lease (half an interval, in Redis's time) is over.
	c.Advance(9*time.Second - time.Millisecond)
	if err := rdb.Del(t.Context(), fleet.DepthsLockKey(prefix, queues)).Err(); err != nil {
		t.Fatal(err)
	}
	refresh(ws[0])
	if got := calls(); got[0] != 8 || got[1] != 0 {
		t.Errorf("reads by worker = %v, want [8 0]: the first reads again at its next tick", got)
	}
}
