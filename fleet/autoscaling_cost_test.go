package fleet_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
)

// The cost of the autoscaling gauges' reads, measured on the SQS emulator
// and Redis:
//
//	go test ./fleet -run TestAutoscalingCost -autoscaling.cost -v
//
// For each pool size N and fleet size W it runs the autoscaling of W
// workers, reading alone and then sharing their readings through Redis,
// and counts their GetQueueAttributes requests (fairq_sqs_requests_total,
// every attempt, as SQS bills them). BENCHMARKS.md has the figures.
var (
	autoscalingCost          = flag.Bool("autoscaling.cost", false, "measure the GetQueueAttributes requests of the autoscaling gauges (minutes)")
	autoscalingCostCases     = flag.String("autoscaling.cost.cases", "8x1,8x4,8x16,64x4,64x16", "pool sizes × fleet sizes to measure, N×W")
	autoscalingCostInterval  = flag.Duration("autoscaling.cost.interval", 2*time.Second, "the interval of the reads (worker's default: 10s)")
	autoscalingCostIntervals = flag.Int("autoscaling.cost.intervals", 10, "how many intervals each case is counted")
)

func TestAutoscalingCost(t *testing.T) {
	if !*autoscalingCost {
		t.Skip("a measurement of minutes: run with -autoscaling.cost")
	}
	iv, k := *autoscalingCostInterval, *autoscalingCostIntervals
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	var rows []string
	for _, c := range strings.Split(*autoscalingCostCases, ",") {
		var n, w int
		if _, err := fmt.Sscanf(c, "%dx%d", &n, &w); err != nil {
			t.Fatalf("-autoscaling.cost.cases: %q: want N×W as 8x4", c)
		}
		alone := measureReads(t, n, w, nil, iv, k)
		shared := measureReads(t, n, w, rdb, iv, k)
		row := fmt.Sprintf("| %d | %d | %.1f | %d | %.1f | %d | %.1f → %.1f |",
			n, w, alone, w*(n+2), shared, n+2, alone/10, shared/10)
		rows = append(rows, row)
		t.Log(row)
	}
	t.Logf("\n| N | W | GetQueueAttributes an interval, alone | model W·(N+2) | sharing | model N+2 | per second at 10 s, alone → sharing |\n|---|---|---|---|---|---|---|\n%s",
		strings.Join(rows, "\n"))
}

// measureReads runs the autoscaling of w workers on n live queues for k
// intervals of iv, after one to settle, and returns their
// GetQueueAttributes requests an interval.
func measureReads(t *testing.T, n, w int, rdb redis.UniversalClient, iv time.Duration, k int) float64 {
	t.Helper()
	var got float64
	t.Run(fmt.Sprintf("%dx%d/shared=%v", n, w, rdb != nil), func(t *testing.T) {
		reg := prometheus.NewRegistry()
		b, names := sqsPool(t, reg, n)
		startAutoscaling(t, b, names, rdb, w, iv)
		<-time.After(iv) // the first reads, at start
		got = span(t, reg, time.Duration(k)*iv) / float64(k)
	})
	return got
}
