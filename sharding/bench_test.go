package sharding

import (
	"context"
	"fmt"
	"testing"

	"github.com/fairq/fairq/queue"
)

// BenchmarkPick measures the gateway's per-message pick at N=64, k=4 with
// fresh readings, over a thousand tenants.
func BenchmarkPick(b *testing.B) {
	for _, c := range []struct{ n, k int }{{8, 2}, {64, 4}} {
		b.Run(fmt.Sprintf("N%d_k%d", c.n, c.k), func(b *testing.B) {
			tr := benchTracker(b, c.n, c.k)
			tenants := benchTenants()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				tr.Pick(tenants[i&1023])
				i++
			}
		})
	}
	b.Run("N64_k4_parallel", func(b *testing.B) {
		tr := benchTracker(b, 64, 4)
		tenants := benchTenants()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				tr.Pick(tenants[i&1023])
				i++
			}
		})
	})
}

func BenchmarkShard(b *testing.B) {
	for _, c := range []struct{ n, k int }{{8, 2}, {64, 4}, {100, 2}} {
		b.Run(fmt.Sprintf("N%d_k%d", c.n, c.k), func(b *testing.B) {
			p := mustPool(b, c.n, c.k)
			tenants := benchTenants()
			b.ReportAllocs()
			i := 0
			var sink Shard
			for b.Loop() {
				sink = p.Shard(tenants[i&1023])
				i++
			}
			_ = sink
		})
	}
}

func benchTenants() []string {
	tenants := make([]string, 1024)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%04d", i)
	}
	return tenants
}

// benchTracker returns a tracker of n queues with a fresh reading of
// distinct depths, so that picks compare rather than tie.
func benchTracker(b *testing.B, n, k int) *Tracker {
	b.Helper()
	depths := make(depthMap, n)
	names := queue.PoolNames("bench", n).Live
	for i, q := range names {
		depths[q] = queue.Depth{Visible: (i * 37) % 101}
	}
	tr, err := NewTracker(Config{Reader: depths, Queues: names, ShardSize: k})
	if err != nil {
		b.Fatal(err)
	}
	if err := tr.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	return tr
}

// depthMap is a DepthReader of fixed depths.
type depthMap map[string]queue.Depth

func (m depthMap) Depth(_ context.Context, q string) (queue.Depth, error) {
	d, ok := m[q]
	if !ok {
		return queue.Depth{}, queue.ErrQueueNotFound
	}
	return d, nil
}
