package harness

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// eachApplication runs test on each kind of application behind the
// workers, started for the tenants: the harness's own sink, and the sink
// in an application process of its own.
func eachApplication(t *testing.T, tenants []Tenant, test func(t *testing.T, a application)) {
	t.Run("sink", func(t *testing.T) {
		s, err := newSink(tenants)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer s.Stop(context.WithoutCancel(t.Context()))
		test(t, s)
	})
	t.Run("process", func(t *testing.T) {
		root, err := ModuleRoot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		bin, err := BuildApp(t.Context(), root, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		a, err := startApp(t.Context(), bin, t.TempDir(), tenants)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Stop(context.WithoutCancel(t.Context()))
		test(t, a)
	})
}

func TestSink(t *testing.T) {
	eachApplication(t, []Tenant{{ID: "acme", Work: time.Millisecond}}, testSink)
}

func testSink(t *testing.T, s application) {
	enq := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	push := func(seq, kind string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url(), strings.NewReader(`{"x":1}`))
		req.Header.Set(headerTenant, "acme")
		req.Header.Set(headerEnqueuedAt, enq.Format(enqueuedAtFormat))
		req.Header.Set(headerMsgid, "m-"+seq)
		req.Header.Set(headerReceiveCount, "2")
		req.Header.Set(headerFirstRecv, "2026-01-02T03:04:06Z")
		req.Header.Set(headerAttr+AttrSeq, seq)
		if kind != "" {
			req.Header.Set(headerAttr+AttrKind, kind)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		name       string
		seq, kind  string
		fix        bool
		wantStatus int
	}{
		{"good", "1", "", false, 200},
		{"poison", "2", kindPoison, false, 500},
		{"no number", "x", "", false, 200},
		{"poison after the fix", "2", kindPoison, true, 200},
	}
	for _, st := range steps {
		if st.fix {
			if err := s.fix(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if got := push(st.seq, st.kind); got != st.wantStatus {
			t.Errorf("%s: status %d, want %d", st.name, got, st.wantStatus)
		}
	}
	// Stopped, an application has told of every push.
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	const first = "2026-01-02T03:04:06Z"
	want := []Delivery{
		{Seq: 1, Tenant: "acme", MsgID: "m-1", FirstReceivedAt: first, EnqueuedAt: enq, ReceiveCount: 2, Status: 200},
		{Seq: 2, Tenant: "acme", MsgID: "m-2", FirstReceivedAt: first, EnqueuedAt: enq, ReceiveCount: 2, Status: 500},
		{Seq: -1, Tenant: "acme", MsgID: "m-x", FirstReceivedAt: first, EnqueuedAt: enq, ReceiveCount: 2, Status: 200},
		{Seq: 2, Tenant: "acme", MsgID: "m-2", FirstReceivedAt: first, EnqueuedAt: enq, ReceiveCount: 2, Status: 200, Redriven: true},
	}
	got := s.snapshot()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Delivery{}, "Start", "End")); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	for _, d := range got {
		if d.End.Sub(d.Start) < time.Millisecond {
			t.Errorf("delivery %d answered after %v, before the tenant's work of 1 ms", d.Seq, d.End.Sub(d.Start))
		}
	}
	if s.busy() != 0 {
		t.Errorf("busy = %d after every answer", s.busy())
	}
}

func TestSinkBehaviour(t *testing.T) {
	s, err := newSink([]Tenant{{ID: "acme", Work: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context())
	push := func(ctx context.Context, seq string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url(), strings.NewReader(`{}`))
		req.Header.Set(headerTenant, "acme")
		req.Header.Set(headerAttr+AttrSeq, seq)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	s.behave(sinkFailing)
	if got, err := push(t.Context(), "1"); got != 500 || err != nil {
		t.Errorf("failing: %d, %v; want 500", got, err)
	}
	s.behave(sinkHanging)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if got, err := push(ctx, "2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hanging: %d, %v; want no answer until the client gives up", got, err)
	}
	s.behave(sinkNormal)
	if got, err := push(t.Context(), "3"); got != 200 || err != nil {
		t.Errorf("normal again: %d, %v; want 200", got, err)
	}

	// waitDelivery finds a recorded delivery, waits for a later one, and
	// gives up on one that never comes.
	if d, ok, err := s.waitDelivery(t.Context(), 1, time.Second); !ok || err != nil || d.Status != 500 {
		t.Errorf("waitDelivery(1) = %+v, %t, %v", d, ok, err)
	}
	// The hung push is recorded once the sink sees the client gone.
	if d, ok, err := s.waitDelivery(t.Context(), 2, 5*time.Second); !ok || err != nil || d.Status != 0 {
		t.Errorf("waitDelivery(2) = %+v, %t, %v; want the hung push, unanswered", d, ok, err)
	}
	later := make(chan error, 1)
	go func() {
		_, err := push(t.Context(), "4")
		later <- err
	}()
	if d, ok, err := s.waitDelivery(t.Context(), 4, 5*time.Second); !ok || err != nil || d.Status != 200 {
		t.Errorf("waitDelivery(4) = %+v, %t, %v; want the push made while waiting", d, ok, err)
	}
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.waitDelivery(t.Context(), 99, 50*time.Millisecond); ok || err != nil {
		t.Errorf("waitDelivery(99) = %t, %v; want nothing", ok, err)
	}
}
