package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairq/fairq/queue"
)

// benchChunk is how many batch calls a benchmark makes between refills of
// a fresh queue, done with the timer stopped, so that memory stays bounded.
const benchChunk = 1000

// benchEntries is a batch of ten messages of about 200 bytes with the
// three attributes fairq sets.
func benchEntries() []queue.Entry {
	entries := make([]queue.Entry, queue.MaxBatch)
	for i := range entries {
		entries[i] = queue.Entry{
			ID:   fmt.Sprint("e", i),
			Body: `{"order":12345,"customer":"c-987","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"note":"benchmark payload"}`,
			Attributes: map[string]string{
				"fairq-tenant": "acme",
				"fairq-meta":   `{"t":1700000000000,"a":0,"r":"req-1","q":"fairq-live-03"}`,
				"traceparent":  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			},
		}
	}
	return entries
}

// benchQueue returns a fresh Memory with queue "q" holding n visible
// messages.
func benchQueue(b *testing.B, n int) *queue.Memory {
	b.Helper()
	ctx := context.Background()
	m := queue.NewMemory(queue.MemoryConfig{})
	if _, err := m.Create(ctx, queue.Spec{Name: "q"}); err != nil {
		b.Fatal(err)
	}
	entries := benchEntries()
	for range n / queue.MaxBatch {
		if _, err := m.Send(ctx, "q", entries); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

func reportMsgs(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkMemorySend(b *testing.B) {
	ctx := context.Background()
	entries := benchEntries()
	var m *queue.Memory
	b.ReportAllocs()
	for i := range b.N {
		if i%benchChunk == 0 {
			b.StopTimer()
			m = benchQueue(b, 0)
			b.StartTimer()
		}
		if _, err := m.Send(ctx, "q", entries); err != nil {
			b.Fatal(err)
		}
	}
	reportMsgs(b, queue.MaxBatch)
}

func BenchmarkMemoryReceive(b *testing.B) {
	ctx := context.Background()
	var m *queue.Memory
	b.ReportAllocs()
	for i := range b.N {
		if i%benchChunk == 0 {
			b.StopTimer()
			m = benchQueue(b, benchChunk*queue.MaxBatch)
			b.StartTimer()
		}
		msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{})
		if err != nil || len(msgs) != queue.MaxBatch {
			b.Fatalf("Receive: %d messages, %v", len(msgs), err)
		}
	}
	reportMsgs(b, queue.MaxBatch)
}

func BenchmarkMemoryDelete(b *testing.B) {
	ctx := context.Background()
	var (
		m       *queue.Memory
		handles [][]string
	)
	b.ReportAllocs()
	for i := range b.N {
		if i%benchChunk == 0 {
			b.StopTimer()
			m = benchQueue(b, benchChunk*queue.MaxBatch)
			handles = handles[:0]
			for range benchChunk {
				msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{})
				if err != nil {
					b.Fatal(err)
				}
				hs := make([]string, len(msgs))
				for j, msg := range msgs {
					hs[j] = msg.ReceiptHandle
				}
				handles = append(handles, hs)
			}
			b.StartTimer()
		}
		if _, err := m.Delete(ctx, "q", handles[i%benchChunk]); err != nil {
			b.Fatal(err)
		}
	}
	reportMsgs(b, queue.MaxBatch)
}

// BenchmarkMemoryCycle sends, receives and deletes a batch of ten per op:
// the steady state of a gateway and a worker sharing a queue.
func BenchmarkMemoryCycle(b *testing.B) {
	ctx := context.Background()
	m := benchQueue(b, 0)
	entries := benchEntries()
	handles := make([]string, 0, queue.MaxBatch)
	b.ReportAllocs()
	for range b.N {
		if _, err := m.Send(ctx, "q", entries); err != nil {
			b.Fatal(err)
		}
		msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{})
		if err != nil || len(msgs) != queue.MaxBatch {
			b.Fatalf("Receive: %d messages, %v", len(msgs), err)
		}
		handles = handles[:0]
		for _, msg := range msgs {
			handles = append(handles, msg.ReceiptHandle)
		}
		if _, err := m.Delete(ctx, "q", handles); err != nil {
			b.Fatal(err)
		}
	}
	reportMsgs(b, queue.MaxBatch)
}

// BenchmarkMemoryPipeline runs one sender against consumers that long-poll,
// receive and delete, as `fairq dev` does; an op is one batch of ten sent
// and, by the end, handled.
func BenchmarkMemoryPipeline(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprint("consumers=", consumers), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := benchQueue(b, 0)
			entries := benchEntries()
			var (
				handled atomic.Int64
				done    = make(chan struct{})
				wg      sync.WaitGroup
			)
			want := int64(b.N * queue.MaxBatch)
			b.ReportAllocs()
			b.ResetTimer()
			for range consumers {
				wg.Go(func() {
					handles := make([]string, 0, queue.MaxBatch)
					for ctx.Err() == nil {
						msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{Wait: time.Second})
						if err != nil || len(msgs) == 0 {
							continue
						}
						handles = handles[:0]
						for _, msg := range msgs {
							handles = append(handles, msg.ReceiptHandle)
						}
						if _, err := m.Delete(ctx, "q", handles); err != nil {
							b.Error(err)
							return
						}
						if handled.Add(int64(len(msgs))) == want {
							close(done)
						}
					}
				})
			}
			for range b.N {
				if _, err := m.Send(ctx, "q", entries); err != nil {
					b.Fatal(err)
				}
			}
			<-done
			b.StopTimer()
			cancel()
			wg.Wait()
			reportMsgs(b, queue.MaxBatch)
		})
	}
}
