package throttle_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

// tenantKeys are the keys the benchmarks spread their checks over, as a
// worker serving many tenants does.
var tenantKeys = func() []string {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "process:tenant-" + strconv.Itoa(i)
	}
	return keys
}()

// BenchmarkLocalCheck is the worker's local throttle check: one token from
// the bucket of one of 1,000 tenants, on one goroutine.
func BenchmarkLocalCheck(b *testing.B) {
	l := throttle.NewLocalLimiter(throttle.LocalConfig{})
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1e9, Burst: 1 << 30}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := l.Allow(ctx, tenantKeys[i%len(tenantKeys)], lim, 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// latencies records the time of each operation and reports percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	at := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p99.9-µs")
}

// BenchmarkRedisCheckLatency is the worker's shared throttle check: one
// round trip to Redis on loopback (GCRA through redis_rate), one caller at
// a time, with the latency of every call recorded.
func BenchmarkRedisCheckLatency(b *testing.B) {
	l := redisLimiter(b, redisClient(b), testenv.Prefix(b)+":")
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1e9, Burst: 1 << 30}
	for _, k := range tenantKeys[:10] { // connections up, script loaded
		if _, err := l.Allow(ctx, k, lim, 1); err != nil {
			b.Fatal(err)
		}
	}
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := l.Allow(ctx, tenantKeys[i%len(tenantKeys)], lim, 1); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		i++
	}
	lat.report(b)
}

// BenchmarkRedisSemaphoreLatency takes and releases one slot of a shared
// semaphore: one round trip to take it; the release is batched by the
// semaphore's goroutine.
func BenchmarkRedisSemaphoreLatency(b *testing.B) {
	s := redisSemaphore(b, redisClient(b), testenv.Prefix(b)+":", time.Minute)
	ctx := context.Background()
	lat := make(latencies, 0, 1<<16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		p, ok, err := s.TryAcquire(ctx, tenantKeys[i%len(tenantKeys)], 1<<20)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		lat = append(lat, time.Since(start))
		p.Release()
		i++
	}
	lat.report(b)
}

// BenchmarkRedisAdmit is what a worker asks Redis before it starts a
// message: a slot of its tenant's semaphore and a token of its bucket,
// given back when the message is done. "separately" asks for each in a
// round trip (throttle.Separately), "together" for both in one
// (throttle.RedisAdmitter); one caller at a time over 1,000 tenants, on
// one Redis node and on a three-master Cluster, with the latency of every
// ask recorded (the releases go on in the semaphore's goroutine).
func BenchmarkRedisAdmit(b *testing.B) {
	for _, topo := range testenv.RedisTopologies() {
		for _, way := range []string{"separately", "together"} {
			b.Run(topo.Name+"/"+way, func(b *testing.B) {
				c := topo.Client(b)
				prefix := testenv.Prefix(b) + ":"
				sem := redisSemaphore(b, c, prefix, time.Minute)
				var a throttle.Admitter = throttle.Separately{Semaphore: sem, Rate: redisLimiter(b, c, prefix)}
				if way == "together" {
					var err error
					if a, err = throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: sem, RatePrefix: prefix}); err != nil {
						b.Fatal(err)
					}
				}
				needs := make([]throttle.Need, len(tenantKeys))
				for i := range needs {
					tag := "{tenant-" + strconv.Itoa(i) + "}"
					needs[i] = throttle.Need{
						Slots:  []throttle.Slot{{Key: "concurrency:" + tag, Limit: 1 << 20}},
						Tokens: []throttle.Token{{Key: "process:" + tag, Limit: throttle.Limit{Rate: 1e9, Burst: 1 << 30}}},
					}
				}
				ctx := context.Background()
				lat := make(latencies, 0, 1<<16)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					start := time.Now()
					got, err := a.TryAdmit(ctx, needs[i%len(needs)])
					lat = append(lat, time.Since(start))
					if err != nil || !got.Admitted {
						b.Fatalf("%+v, %v", got, err)
					}
					got.Permits[0].Release()
					i++
				}
				lat.report(b)
			})
		}
	}
}
