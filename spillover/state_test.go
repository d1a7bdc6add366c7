package spillover_test

import (
	"context"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

// TestTenantState: a paused tenant's messages are parked; a message
// enqueued before its tenant's purge instant is purged, one after is
// admitted; a deleted tenant's purge instant still purges; other tenants
// are not touched.
func TestTenantState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClock()
	reg := registry(t, map[string]tenant.Limits{"acme": limits(1000, 1000, 10), "globex": limits(1000, 1000, 10), "gone": limits(1000, 1000, 10)})
	l, err := spillover.New(spillover.Config{Tenants: reg, NowFunc: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	at := func(tenantID string, enqueued time.Time) verdict {
		v, done := admitMessage(t, l, &consumer.Message{ID: "m", Tenant: tenantID, EnqueuedAt: enqueued})
		if done != nil {
			done()
		}
		return v
	}
	old := c.Now().Add(-time.Minute)
	if _, err := reg.Pause(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	if v := at("acme", old); v.Action != consumer.Park || v.Reason != spillover.ReasonPaused {
		t.Errorf("paused tenant: %+v, want park", v)
	}
	if v := at("globex", old); v.Action != consumer.Dispatch {
		t.Errorf("another tenant: %+v, want dispatch", v)
	}
	if _, err := reg.Resume(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	purged, err := reg.Purge(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if v := at("acme", purged.Add(-time.Millisecond)); v.Action != consumer.Drop || v.Reason != consumer.ReasonPurged {
		t.Errorf("enqueued before the purge: %+v, want drop purged", v)
	}
	if v := at("acme", purged.Add(time.Millisecond)); v.Action != consumer.Dispatch {
		t.Errorf("enqueued after the purge: %+v, want dispatch", v)
	}
	deleted, err := reg.Delete(ctx, "gone", true)
	if err != nil {
		t.Fatal(err)
	}
	if v := at("gone", deleted.Add(-time.Second)); v.Action != consumer.Drop || v.Reason != consumer.ReasonPurged {
		t.Errorf("a deleted and purged tenant's message: %+v, want drop purged", v)
	}
}
