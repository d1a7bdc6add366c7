package deadletter_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// seed puts one dead letter per tenant named on the dead-letter queue, as
// the worker leaves them, and returns their fairq ids.
func seed(t *testing.T, b queue.Backend, dlq string, tenants ...string) []string {
	t.Helper()
	var ids []string
	for i, tenant := range tenants {
		id := fmt.Sprintf("0190b3c4-7a1e-7c3d-9f00-%012d", i)
		meta := envelope.Meta{EnqueuedAt: time.Now().Add(-time.Hour).UnixMilli(), ID: id, Attempts: 10, LastError: "status 500", Origin: "t-live-00"}
		send(t, b, dlq, msg{body: "job of " + tenant, tenant: tenant, meta: &meta})
		ids = append(ids, id)
	}
	return ids
}

func TestPeek(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			ids := seed(t, b, names.DLQ, "a", "a", "a", "b")
			dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			first, err := dq.Peek(ctx, deadletter.Selection{Tenant: "a", Max: 2}, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.Letters) != 2 || !first.More {
				t.Fatalf("first page: %d letters, more %v; want 2 and more", len(first.Letters), first.More)
			}
			for _, l := range first.Letters {
				if l.Tenant != "a" || l.Error != "status 500" || l.Attempts != 10 || l.Queue != "t-live-00" || l.Body != nil ||
					time.Since(l.EnqueuedAt) < 59*time.Minute || !slices.Contains(ids[:3], l.ID) {
					t.Errorf("peeked %+v, want one of a's dead letters, an hour old, without its body", l)
				}
			}
			// The next page shows the others: the first are hidden.
			next, err := dq.Peek(ctx, deadletter.Selection{Tenant: "a", Max: 2}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(next.Letters) != 1 || next.More || next.Letters[0].Body == nil || *next.Letters[0].Body != "job of a" {
				t.Fatalf("second page: %+v; want a's third, with its body, and no more", next)
			}
			seen := []string{first.Letters[0].ID, first.Letters[1].ID, next.Letters[0].ID}
			slices.Sort(seen)
			if diff := cmp.Diff(ids[:3], seen); diff != "" {
				t.Errorf("a's dead letters over two pages (-want +got):\n%s", diff)
			}
			// Another tenant's was passed over and is visible again.
			if got, err := dq.Peek(ctx, deadletter.Selection{Tenant: "b", Max: 10}, false); err != nil || len(got.Letters) != 1 {
				t.Errorf("b's page: %+v, %v; want b's one dead letter", got, err)
			}
			if n := depth(t, b, names.DLQ); n != 4 {
				t.Errorf("%d dead letters after peeking, want all 4 still there", n)
			}
		})
	}
}

func TestPurge(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			ids := seed(t, b, names.DLQ, "a", "a", "a", "a", "b", "b")
			dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			res, err := dq.Purge(ctx, deadletter.Selection{Tenant: "a", Max: 3})
			if err != nil || res != (deadletter.PurgeResult{Deleted: 3, Remaining: true}) {
				t.Fatalf("Purge(a, max 3) = %+v, %v; want 3 deleted, one remaining", res, err)
			}
			if res, err := dq.Purge(ctx, deadletter.Selection{IDs: []string{ids[4]}}); err != nil || res.Deleted != 1 || res.Remaining {
				t.Errorf("Purge(one of b's by id) = %+v, %v", res, err)
			}
			if res, err := dq.Purge(ctx, deadletter.Selection{}); err != nil || res.Deleted != 2 || res.Remaining {
				t.Errorf("Purge(all) = %+v, %v; want the last 2", res, err)
			}
			if n := depth(t, b, names.DLQ); n != 0 {
				t.Errorf("%d dead letters left, want 0", n)
			}
		})
	}
}

func TestRedriveByID(t *testing.T) {
	b, names := setup(t, "memory")
	ids := seed(t, b, names.DLQ, "a", "b", "a")
	dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	res, err := dq.Redrive(context.Background(), deadletter.Selection{IDs: []string{ids[0], ids[1]}})
	if err != nil || res.Moved != 2 || !cmp.Equal(res.ByTenant, map[string]int{"a": 1, "b": 1}) {
		t.Errorf("Redrive(two ids) = %+v, %v", res, err)
	}
	if n := depth(t, b, names.DLQ); n != 1 {
		t.Errorf("%d dead letters left, want the one not named", n)
	}
}

// TestRedriveAfterPeek: the dead letters a peek just hid are redriven by
// id at once, without waiting for the peek's hiding to end, on each
// backend; one that was not peeked is still found by reading the queue.
func TestRedriveAfterPeek(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			ids := seed(t, b, names.DLQ, "a", "a", "b")
			dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			page, err := dq.Peek(ctx, deadletter.Selection{Tenant: "a", Max: 10}, false)
			if err != nil || len(page.Letters) != 2 {
				t.Fatalf("peek: %+v %v", page, err)
			}
			start := time.Now()
			res, err := dq.Redrive(ctx, deadletter.Selection{IDs: []string{ids[0]}})
			if err != nil || res.Moved != 1 || res.ByTenant["a"] != 1 {
				t.Errorf("redrive of a peeked id: %+v %v", res, err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("redrive of a peeked id took %v: it waited for the peek's hiding", took)
			}
			// Once taken, a peeked letter is not taken twice.
			if res, err := dq.Redrive(ctx, deadletter.Selection{IDs: []string{ids[0], ids[2]}}); err != nil || res.Moved != 1 || res.ByTenant["b"] != 1 {
				t.Errorf("redrive of the moved id and an unpeeked one: %+v %v", res, err)
			}
			if n := depth(t, b, names.DLQ); n != 1 {
				t.Errorf("%d dead letters left, want a's second (still hidden by the peek)", n)
			}
		})
	}
}
