package consumer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

// cpuTime returns the user plus system CPU time of the process.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fill sends n small messages with the gateway's attributes, in batches of
// ten spread over the live queues.
func fill(b *testing.B, be consumer.Backend, names queue.Names, n int) {
	b.Helper()
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), RequestID: "bench"}
	attrs := map[string]string{envelope.AttrTenant: "acme", envelope.AttrMeta: meta.Encode()}
	entries := make([]queue.Entry, 0, queue.MaxBatch)
	for i := 0; i < n; i++ {
		entries = append(entries, queue.Entry{ID: fmt.Sprint(len(entries)), Body: `{"n":1}`, Attributes: attrs})
		if len(entries) == queue.MaxBatch || i == n-1 {
			if _, err := be.Send(context.Background(), names.Live[(i/queue.MaxBatch)%len(names.Live)], entries); err != nil {
				b.Fatal(err)
			}
			entries = entries[:0]
		}
	}
}

// counting wraps a handler and closes done after n messages.
func counting(h consumer.Handler, n int64) (consumer.Handler, <-chan struct{}) {
	done := make(chan struct{})
	var count atomic.Int64
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		err := h.Handle(ctx, m)
		if count.Add(1) == n {
			close(done)
		}
		return err
	}), done
}

// runWorker measures the worker draining b.N messages that fill put on the
// queues (outside the timer): messages per second until the last one is
// handled, and CPU per message including the stop that flushes the last
// deletes. The stop's wall time is left out: it lets the long polls under
// way end, as SQS may still answer them with messages, a fixed second
// that would swamp a small b.N and keep the benchmark from growing it.
func runWorker(b *testing.B, be queue.Backend, names queue.Names, h consumer.Handler) {
	b.ReportAllocs()
	fill(b, be, names, b.N)
	handler, done := counting(h, int64(b.N))
	w, err := consumer.New(consumer.Config{Backend: be, Names: names, Handler: handler, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime(b)
	b.ResetTimer()
	t0 := time.Now()
	if err := w.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	<-done
	elapsed := time.Since(t0)
	b.StopTimer()
	if err := w.Stop(context.Background()); err != nil { // includes flushing the last deletes
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/msg")
}

func noop(context.Context, *consumer.Message) error { return nil }

// BenchmarkWorkerMemory: the worker on the memory backend with an
// in-process no-op handler (target ≥ 5,000 msg/s).
func BenchmarkWorkerMemory(b *testing.B) {
	be, names := setup(b, "memory")
	runWorker(b, be, names, consumer.HandlerFunc(noop))
}

// BenchmarkWorkerPush: the same with the HTTP push to a local no-op
// application (target ≥ 2,000 msg/s).
func BenchmarkWorkerPush(b *testing.B) {
	be, names := setup(b, "memory")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p, err := consumer.NewPush(consumer.PushConfig{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	runWorker(b, be, names, p)
}

// BenchmarkWorkerSQS: the worker on the SQS emulator at a steady load,
// messages sent in batches of ten while it works; reports the SQS requests
// per message, sends included (target ≤ 0.35), from
// fairq_sqs_requests_total.
func BenchmarkWorkerSQS(b *testing.B) {
	reg := prometheus.NewRegistry()
	be, err := queue.NewSQS(context.Background(), queue.SQSConfig{
		Region:      testenv.SQSRegion,
		Endpoint:    testenv.SQSEndpoint(b),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  reg,
		Logger:      discard,
	})
	if err != nil {
		b.Fatal(err)
	}
	names := queue.PoolNames(testenv.Prefix(b), 2)
	queuetest.CreatePool(b, be, names)
	requests := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		byOp := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() == "fairq_sqs_requests_total" {
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "op" {
							byOp[l.GetValue()] += m.GetCounter().GetValue()
						}
					}
					byOp["total"] += m.GetCounter().GetValue()
				}
			}
		}
		return byOp
	}

	n := max(b.N, 1000)
	var handled atomic.Int64
	handler, done := counting(consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		handled.Add(1)
		return nil
	}), int64(n))
	wreg := prometheus.NewRegistry()
	w, err := consumer.New(consumer.Config{Backend: be, Names: names, Handler: handler, Logger: discard, Registerer: wreg})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	req0, cpu0, t0 := requests(), cpuTime(b), time.Now()
	if err := w.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The producer keeps about 200 messages waiting: a steady load the
	// worker keeps up with.
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli()}
	attrs := map[string]string{envelope.AttrTenant: "acme", envelope.AttrMeta: meta.Encode()}
	for sent := 0; sent < n; {
		if int64(sent)-handled.Load() > 200 {
			time.Sleep(5 * time.Millisecond) // pacing the producer, not synchronising
			continue
		}
		k := min(queue.MaxBatch, n-sent)
		entries := make([]queue.Entry, k)
		for i := range entries {
			entries[i] = queue.Entry{ID: fmt.Sprint(i), Body: `{"n":1}`, Attributes: attrs}
		}
		if _, err := be.Send(context.Background(), names.Live[(sent/queue.MaxBatch)%2], entries); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	<-done
	if err := w.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(n), "cpu-ns/msg")
	b.ReportMetric(metric(b, wreg, "fairq_worker_empty_receives_total")/float64(n), "empty-receives/msg")
	req1 := requests()
	for op, v := range req1 {
		unit := "sqs-req/msg"
		if op != "total" {
			unit = op + "/msg"
		}
		b.ReportMetric((v-req0[op])/float64(n), unit)
	}
}
