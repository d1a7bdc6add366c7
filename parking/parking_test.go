package parking_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/parking"
	"github.com/fairq/fairq/queue"
)

// lots runs test against a Memory lot and a Redis lot, on one node and on
// a cluster.
func lots(t *testing.T, test func(t *testing.T, lot parking.Lot)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		test(t, parking.NewMemory(nil))
	})
	for _, topo := range testenv.RedisTopologies() {
		t.Run("redis "+topo.Name, func(t *testing.T) {
			t.Parallel()
			lot, err := parking.NewRedis(topo.Client(t), testenv.Prefix(t)+":", time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			test(t, lot)
		})
	}
}

func TestLot(t *testing.T) {
	t.Parallel()
	lots(t, func(t *testing.T, lot parking.Lot) {
		ctx := context.Background()
		later := time.Now().Add(time.Hour).UnixMilli()
		a1 := parking.Spot{Queue: "q-overflow", Handle: "h1", Until: later}
		a2 := parking.Spot{Queue: "q-overflow", Handle: "h2", Until: later}
		gone := parking.Spot{Queue: "q-overflow", Handle: "h3", Until: time.Now().Add(-time.Second).UnixMilli()}
		b1 := parking.Spot{Queue: "q-overflow", Handle: "h4", Until: later}
		for _, p := range []struct {
			tenant string
			s      parking.Spot
		}{{"a", a1}, {"a", a2}, {"a", gone}, {"b", b1}} {
			if err := lot.Park(ctx, p.tenant, p.s); err != nil {
				t.Fatal(err)
			}
		}
		tenants, err := lot.Tenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(tenants)
		if diff := cmp.Diff([]string{"a", "b"}, tenants); diff != "" {
			t.Errorf("tenants (-want +got):\n%s", diff)
		}
		spots, err := lot.Take(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// A spot whose invisibility ended on its own is not woken.
		sortSpots := cmpopts.SortSlices(func(x, y parking.Spot) bool { return x.Handle < y.Handle })
		if diff := cmp.Diff([]parking.Spot{a1, a2}, spots, sortSpots); diff != "" {
			t.Errorf("Take(a) (-want +got):\n%s", diff)
		}
		if again, _ := lot.Take(ctx, "a"); len(again) != 0 {
			t.Errorf("a second Take got %v; spots are taken once", again)
		}
		if tenants, _ := lot.Tenants(ctx); !slices.Equal(tenants, []string{"b"}) {
			t.Errorf("tenants after taking a's: %v, want [b]", tenants)
		}
	})
}

// TestTakeOnce: of workers that take a tenant's spots at once, one gets
// each spot.
func TestTakeOnce(t *testing.T) {
	t.Parallel()
	lots(t, func(t *testing.T, lot parking.Lot) {
		ctx := context.Background()
		for i := range 20 {
			_ = lot.Park(ctx, "a", parking.Spot{Queue: "q", Handle: string(rune('a' + i)), Until: time.Now().Add(time.Hour).UnixMilli()})
		}
		var mu sync.Mutex
		taken := 0
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				spots, err := lot.Take(ctx, "a")
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				taken += len(spots)
				mu.Unlock()
			})
		}
		wg.Wait()
		if taken != 20 {
			t.Errorf("%d spots taken in all, want each of the 20 once", taken)
		}
	})
}

// TestWaker: the Waker makes the parked messages of a resumed tenant
// visible again, and leaves those of a tenant still paused.
func TestWaker(t *testing.T) {
	t.Parallel()
	lots(t, func(t *testing.T, lot parking.Lot) {
		ctx := context.Background()
		mem := queue.NewMemory(queue.MemoryConfig{})
		if _, err := mem.Create(ctx, queue.Spec{Name: "ov"}); err != nil {
			t.Fatal(err)
		}
		for _, tenant := range []string{"resumed", "paused"} {
			if _, err := mem.Send(ctx, "ov", []queue.Entry{{ID: "0", Body: tenant}}); err != nil {
				t.Fatal(err)
			}
		}
		// Receive both, parked for an hour.
		msgs, err := mem.Receive(ctx, "ov", queue.ReceiveOptions{Max: 10, Visibility: time.Hour})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("receive: %d messages, %v", len(msgs), err)
		}
		for _, m := range msgs {
			_ = lot.Park(ctx, m.Body, parking.Spot{Queue: "ov", Handle: m.ReceiptHandle, Until: time.Now().Add(time.Hour).UnixMilli()})
		}
		w, err := parking.NewWaker(parking.WakerConfig{Lot: lot, Backend: mem, PausedFunc: func(t string) bool { return t == "paused" }})
		if err != nil {
			t.Fatal(err)
		}
		n, err := w.Wake(ctx)
		if err != nil || n != 1 {
			t.Fatalf("Wake = %d, %v; want 1", n, err)
		}
		got, err := mem.Receive(ctx, "ov", queue.ReceiveOptions{Max: 10})
		if err != nil || len(got) != 1 || got[0].Body != "resumed" {
			t.Fatalf("visible after the wake: %v, %v; want the resumed tenant's message alone", got, err)
		}
		if tenants, _ := lot.Tenants(ctx); !slices.Equal(tenants, []string{"paused"}) {
			t.Errorf("still parked: %v, want [paused]", tenants)
		}
	})
}
