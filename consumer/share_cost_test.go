package consumer_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

// The cost of watching the live queues, measured on the SQS emulator:
//
//	go test ./consumer -run TestShareCost -share.cost -v
//
// For each pool size N, fleet size W and watchers per queue k, it starts
// W workers in this process, registered in one Redis, on N live queues,
// and counts the requests they send (fairq_sqs_requests_total, every
// attempt, as SQS bills them): idle for a while, then under a steady load
// of single messages spread evenly over the queues. BENCHMARKS.md has the
// figures and the model they check.
var (
	shareCost      = flag.Bool("share.cost", false, "measure the SQS requests of workers sharing the live queues (minutes)")
	shareCostCases = flag.String("share.cost.cases", "8x1,8x4,8x16,64x4", "pool sizes × fleet sizes to measure, N×W")
	shareCostK     = flag.String("share.cost.k", "0,2", "watchers per queue to measure (0: every worker watches every queue)")
	shareCostWait  = flag.Duration("share.cost.wait", 5*time.Second, "the receive wait (worker.receive_wait is 20s)")
	shareCostIdle  = flag.Duration("share.cost.idle", 30*time.Second, "how long the idle workers are counted")
	shareCostRate  = flag.Float64("share.cost.rate", 200, "messages a second under load")
	shareCostLoad  = flag.Duration("share.cost.load", 20*time.Second, "how long the load lasts")
)

func TestShareCost(t *testing.T) {
	if !*shareCost {
		t.Skip("a measurement of minutes: run with -share.cost")
	}
	var rows []string
	for _, c := range strings.Split(*shareCostCases, ",") {
		var n, w int
		if _, err := fmt.Sscanf(c, "%dx%d", &n, &w); err != nil {
			t.Fatalf("-share.cost.cases: %q: want N×W as 8x4", c)
		}
		for _, ks := range strings.Split(*shareCostK, ",") {
			k, err := strconv.Atoi(ks)
			if err != nil {
				t.Fatalf("-share.cost.k: %v", err)
			}
			if k > 0 && k >= w && slices.Contains(strings.Split(*shareCostK, ","), "0") {
				continue // the same as every worker watching every queue
			}
			r := measureShare(t, n, w, k)
			rows = append(rows, r.String())
			t.Log(r.String())
		}
	}
	t.Logf("\n| N | W | k | loops per worker | idle ReceiveMessage/s | model | receives/msg | empty | non-empty receives/msg | worker requests/msg | push latency p50 / max |\n|---|---|---|---|---|---|---|---|---|---|---|\n%s",
		strings.Join(rows, "\n"))
}

// shareResult is one measurement.
type shareResult struct {
	n, w, k          int
	loopsMin         int
	loopsMax         int
	idle, model      float64 // ReceiveMessage/s
	receivesPerMsg   float64
	requestsPerMsg   float64 // receives, deletes and visibility changes
	emptyShare       float64 // of the receives under load
	p50, worst       time.Duration
	messages, pushed int
}

func (r shareResult) String() string {
	return fmt.Sprintf("| %d | %d | %d | %d–%d | %.2f | %.2f | %.3f | %.0f%% | %.3f | %.3f | %v / %v |",
		r.n, r.w, r.k, r.loopsMin, r.loopsMax, r.idle, r.model, r.receivesPerMsg, 100*r.emptyShare,
		r.receivesPerMsg*(1-r.emptyShare), r.requestsPerMsg, r.p50.Round(time.Millisecond), r.worst.Round(time.Millisecond))
}

// idleRate is the model of one idle worker's receives a second: each of
// its loops long-polls for the receive wait, unless a rule of the loops
// shortens the polls to batchWait (1 s) for want of slots (poller.go,
// contended).
func idleRate(loops, slots int, wait time.Duration) float64 {
	need := min(queue.MaxBatch, max(1, (slots+9)/10))
	switch {
	case loops <= slots-need:
		return float64(loops) / wait.Seconds()
	case loops <= slots:
		return float64(loops)
	}
	return float64(slots)
}

func measureShare(t *testing.T, n, w, k int) shareResult {
	t.Helper()
	const slots = consumer.ConnectionsDefault
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	b, err := queue.NewSQS(ctx, queue.SQSConfig{
		Region: testenv.SQSRegion, Endpoint: testenv.SQSEndpoint(t),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t)
	names := queue.PoolNames(prefix, n)
	queuetest.CreatePool(t, b, names)
	rc := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	defer rc.Close()

	var mu sync.Mutex
	var latencies []time.Duration
	h := consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		if ns, err := strconv.ParseInt(m.Body, 10, 64); err == nil {
			mu.Lock()
			latencies = append(latencies, time.Since(time.Unix(0, ns)))
			mu.Unlock()
		}
		return nil
	})
	ids := make([]string, w)
	workers := make([]*consumer.Worker, w)
	fleets := make([]*fleet.Fleet, w)
	regs := make([]*prometheus.Registry, w)
	for i := range w {
		regs[i] = prometheus.NewRegistry()
		ids[i] = fleet.NewID()
		fleets[i], err = fleet.New(fleet.Config{Redis: rc, Prefix: prefix + ":", ID: ids[i], Heartbeat: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := fleets[i].Start(ctx); err != nil {
			t.Fatal(err)
		}
		workers[i], err = consumer.New(consumer.Config{
			Backend: b, Names: names, Handler: h, Logger: discard, ReceiveWait: *shareCostWait, Registerer: regs[i],
			Fleet: fleets[i], WatchersPerQueue: k, ShareInterval: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := workers[i].Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for i := range w {
			stop(t, workers[i])
			if err := fleets[i].Stop(ctx); err != nil {
				t.Error(err)
			}
		}
	}()

	r := shareResult{n: n, w: w, k: k, loopsMin: 1 << 30}
	watchers := min(k, w)
	if k == 0 {
		watchers = w
	}
	deadline := time.Now().Add(time.Minute)
	for {
		total := 0
		for _, wk := range workers {
			total += len(wk.Watched())
		}
		if total == watchers*n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("N=%d W=%d k=%d: the workers watch %d queue places, want %d", n, w, k, total, watchers*n)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition of W workers
	}
	for _, wk := range workers {
		loops := len(wk.Watched()) + 2 // and overflow, backlog
		r.loopsMin, r.loopsMax = min(r.loopsMin, loops), max(r.loopsMax, loops)
		r.model += idleRate(loops, slots, *shareCostWait)
	}
	// The first receives are short, and the loops of queues a worker gave
	// up when the others joined finish their long polls: two waits.
	time.Sleep(2 * *shareCostWait)

	count := func(op string) float64 { return metric(t, reg, "fairq_sqs_requests_total", "op", op) }
	before := count("ReceiveMessage")
	time.Sleep(*shareCostIdle)
	r.idle = (count("ReceiveMessage") - before) / shareCostIdle.Seconds()

	ops := []string{"ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"}
	start := map[string]float64{}
	for _, op := range ops {
		start[op] = count(op)
	}
	emptyReceives := func() float64 {
		sum := 0.0
		for _, wr := range regs {
			sum += metric(t, wr, "fairq_worker_empty_receives_total")
		}
		return sum
	}
	emptyStart := emptyReceives()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(w)))
	tick := time.NewTicker(time.Duration(float64(time.Second) / *shareCostRate))
	end := time.Now().Add(*shareCostLoad)
	for time.Now().Before(end) {
		<-tick.C
		q := names.Live[rng.IntN(n)]
		queuetest.Put(t, b, q, queuetest.Msg{Body: strconv.FormatInt(time.Now().UnixNano(), 10), Tenant: "t" + strconv.Itoa(rng.IntN(100))})
		r.messages++
	}
	tick.Stop()
	drained := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		r.pushed = len(latencies)
		mu.Unlock()
		if r.pushed >= r.messages || time.Now().After(drained) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.pushed < r.messages {
		t.Errorf("N=%d W=%d k=%d: %d of %d messages pushed", n, w, k, r.pushed, r.messages)
	}
	time.Sleep(time.Second) // the deletes' batches
	r.receivesPerMsg = (count("ReceiveMessage") - start["ReceiveMessage"]) / float64(r.messages)
	for _, op := range ops {
		r.requestsPerMsg += (count(op) - start[op]) / float64(r.messages)
	}
	if got := count("ReceiveMessage") - start["ReceiveMessage"]; got > 0 {
		r.emptyShare = (emptyReceives() - emptyStart) / got
	}
	mu.Lock()
	slices.Sort(latencies)
	if len(latencies) > 0 {
		r.p50, r.worst = latencies[len(latencies)/2], latencies[len(latencies)-1]
	}
	mu.Unlock()
	return r
}

// TestShareCostModel prints the model of an idle fleet's receives a
// second, extrapolated to the default receive wait and slots, for pools
// and fleets too large to run here:
//
//	go test ./consumer -run TestShareCostModel -share.cost -v
//
// Before: every worker watches every live queue, and cuts its watch
// polls to a second once its loops outnumber half its slots. After: each
// live queue has two watchers, and a worker cuts its polls once fewer
// than a batch of slots would be left. Each worker also runs an overflow
// and a backlog loop. The loops per worker come from the assignment of
// 20 fleets of random ids.
func TestShareCostModel(t *testing.T) {
	if !*shareCost {
		t.Skip("run with -share.cost")
	}
	const slots = consumer.ConnectionsDefault
	wait := consumer.ReceiveWaitDefault
	before := func(loops int) float64 {
		if loops <= slots/2 {
			return float64(loops) / wait.Seconds()
		}
		return float64(min(loops, slots))
	}
	r := rand.New(rand.NewPCG(5, 5))
	var rows []string
	for _, n := range []int{8, 64, 256} {
		live := queue.PoolNames("fairq", n).Live
		for _, w := range []int{1, 4, 16} {
			const fleets = 20
			var after, loopsMax float64
			for range fleets {
				ids := make([]string, w)
				for i := range ids {
					ids[i] = fmt.Sprintf("ip-10-0-%d-%d-%08x", r.IntN(256), r.IntN(256), r.Uint32())
				}
				for _, id := range ids {
					loops := len(consumer.Assign(live, ids, id, 2)) + 2
					after += idleRate(loops, slots, wait) / fleets
					loopsMax = max(loopsMax, float64(loops))
				}
			}
			b := float64(w) * before(n+2)
			// fleet.Autoscaling reads the N + 2 queues every 10 s: each
			// worker did; now one worker does for the fleet.
			depthReadsBefore, depthReads := float64(w*(n+2))/10, float64(n+2)/10
			rows = append(rows, fmt.Sprintf("| %d | %d | %d | %.1f | %.0f–%.0f | %.1f | %.0f× | %.1f → %.1f |",
				n, w, n+2, b, float64(min(2, w)*n)/float64(w)+2, loopsMax, after, b/after, depthReadsBefore, depthReads))
		}
	}
	t.Logf("\n| N | W | loops per worker before | idle ReceiveMessage/s before | loops per worker after (mean–max) | after | saved | GetQueueAttributes/s (autoscaling) before → after |\n|---|---|---|---|---|---|---|---|\n%s",
		strings.Join(rows, "\n"))
}
