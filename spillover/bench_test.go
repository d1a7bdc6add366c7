package spillover_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

// BenchmarkAdmitLocal is the whole per-message check of a worker without
// Redis: registry lookup, concurrency slot, rate token, and the slot given
// back when the job ends; over 100 tenants.
func BenchmarkAdmitLocal(b *testing.B) {
	tenants := make(map[string]tenant.Limits)
	msgs := make([]consumer.Message, 100)
	for i := range msgs {
		id := "tenant-" + strconv.Itoa(i)
		tenants[id] = limits(1e9, 1<<30, 1<<30)
		msgs[i] = consumer.Message{ID: "m", Tenant: id}
	}
	l, err := spillover.New(spillover.Config{Tenants: registry(b, tenants)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v, err := l.Admit(ctx, &msgs[i%len(msgs)])
		if err != nil || v.Action != consumer.Dispatch {
			b.Fatal(v.Action, err)
		}
		v.Done()
		i++
	}
}
