package deadletter_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// picker sends tenant "a" to live queue 1 and everyone else to 0.
type picker struct{}

func (picker) Pick(tenant string) int {
	if tenant == "a" {
		return 1
	}
	return 0
}

// adder records BacklogAdder.Add calls.
type adder struct {
	mu  sync.Mutex
	got map[string]int64
}

func (a *adder) Add(tenant string, n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got == nil {
		a.got = map[string]int64{}
	}
	a.got[tenant] += n
}

// drain receives everything visible on q and returns tenant → metas.
func drain(t testing.TB, b queue.Backend, q string) map[string][]envelope.Meta {
	t.Helper()
	out := map[string][]envelope.Meta{}
	for {
		msgs, err := b.Receive(context.Background(), q, queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			meta, _ := envelope.Decode(m.Attributes[envelope.AttrMeta])
			out[m.Attributes[envelope.AttrTenant]] = append(out[m.Attributes[envelope.AttrTenant]], meta)
		}
	}
}

func TestRedrive(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			dead := envelope.Meta{EnqueuedAt: 1700000000000, Attempts: 10, LastError: "push: 500 Internal Server Error", RequestID: "r", NotBefore: 1700000900000}
			for _, tenant := range []string{"a", "b", "a", "", "b", "a"} {
				send(t, b, names.DLQ, msg{tenant: tenant, meta: &dead, attrs: map[string]string{"k": "v"}})
			}
			backlog := &adder{}
			r, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Backlog: backlog, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			res, err := r.Redrive(ctx, deadletter.Selection{Tenant: "a", Max: 2})
			if err != nil {
				t.Fatalf("Run(a, 2): %v", err)
			}
			if res.Moved != 2 || res.Failed != 0 || !cmp.Equal(res.ByTenant, map[string]int{"a": 2}) {
				t.Errorf("Run(a, 2) = %+v, want 2 of a moved", res)
			}
			moved := drain(t, b, names.Live[1])
			want := envelope.Meta{EnqueuedAt: dead.EnqueuedAt, RequestID: "r"}
			if diff := cmp.Diff(map[string][]envelope.Meta{"a": {want, want}}, moved, ignoreIdentity); diff != "" {
				t.Errorf("on the tenant's queue (-want +got):\n%s", diff)
			}

			all, err := r.Redrive(ctx, deadletter.Selection{})
			if n := all.Moved; err != nil || n != 4 {
				t.Errorf("Redrive(all) = %d, %v; want 4 (the skipped ones visible again)", n, err)
			}
			got := drain(t, b, names.Live[0])
			tenants := []string{}
			for tenant, metas := range got {
				for range metas {
					tenants = append(tenants, tenant)
				}
			}
			sort.Strings(tenants)
			if diff := cmp.Diff([]string{"", "b", "b"}, tenants); diff != "" {
				t.Errorf("tenants on live queue 0 (-want +got):\n%s", diff)
			}
			if left := drain(t, b, names.Live[1]); len(left["a"]) != 1 {
				t.Errorf("live queue 1 got %v, want the last message of a", left)
			}
			if n := depth(t, b, names.DLQ); n != 0 {
				t.Errorf("%d dead letters left, want 0", n)
			}
			backlog.mu.Lock()
			if diff := cmp.Diff(map[string]int64{"a": 3, "b": 2, "": 1}, backlog.got); diff != "" {
				t.Errorf("backlog increments (-want +got):\n%s", diff)
			}
			backlog.mu.Unlock()
		})
	}
}

func TestRedriveInvalid(t *testing.T) {
	b, names := setup(t, "memory")
	for _, cfg := range []deadletter.Config{
		{Names: names, Picker: picker{}},
		{Backend: b, Names: names},
		{Backend: b, Picker: picker{}},
	} {
		if _, err := deadletter.New(cfg); !errors.Is(err, deadletter.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dq.Redrive(context.Background(), deadletter.Selection{Max: -1}); !errors.Is(err, deadletter.ErrInvalidConfig) {
		t.Errorf("Redrive(max -1) = %v, want ErrInvalidConfig", err)
	}
}

// cancelOnSend is a backend that cancels a context once a send to a live
// queue has returned, as a client closing its request mid-redrive would.
type cancelOnSend struct {
	queue.Backend
	dlq    string
	cancel context.CancelFunc
}

func (c *cancelOnSend) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	res, err := c.Backend.Send(ctx, q, entries)
	if q != c.dlq {
		c.cancel()
	}
	return res, err
}

// TestRedriveCancelled: a redrive whose context ends once a batch is sent
// back still deletes that batch from the dead-letter queue and counts it,
// so that running it again moves no message twice.
func TestRedriveCancelled(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			for range 3 {
				send(t, b, names.DLQ, msg{tenant: "b", meta: &envelope.Meta{EnqueuedAt: 1700000000000, Attempts: 10}})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			backlog := &adder{}
			dq, err := deadletter.New(deadletter.Config{
				Backend: &cancelOnSend{Backend: b, dlq: names.DLQ, cancel: cancel},
				Names:   names, Picker: picker{}, Backlog: backlog, Logger: discard,
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := dq.Redrive(ctx, deadletter.Selection{})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Redrive = %v, want context.Canceled", err)
			}
			if res.Moved < 1 {
				t.Fatalf("Redrive moved %d, want the batch sent before the cancel", res.Moved)
			}
			if n := depth(t, b, names.DLQ); n != 3-res.Moved {
				t.Errorf("%d dead letters left after %d moved, want %d: the moved ones would be redriven again", n, res.Moved, 3-res.Moved)
			}
			if n := depth(t, b, names.Live[0]); n != res.Moved {
				t.Errorf("live queue holds %d, want %d", n, res.Moved)
			}
			backlog.mu.Lock()
			if diff := cmp.Diff(map[string]int64{"b": int64(res.Moved)}, backlog.got); diff != "" {
				t.Errorf("backlog increments (-want +got):\n%s", diff)
			}
			backlog.mu.Unlock()
		})
	}
}
