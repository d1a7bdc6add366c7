package harness

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSink(t *testing.T) {
	s, err := newSink([]Tenant{{ID: "acme", Work: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(t.Context())
	enq := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	push := func(seq, kind string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url(), strings.NewReader(`{"x":1}`))
		req.Header.Set(headerTenant, "acme")
		req.Header.Set(headerEnqueuedAt, enq.Format(enqueuedAtFormat))
		req.Header.Set(headerMsgid, "m-"+seq)
		req.Header.Set(headerReceiveCount, "2")
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
			s.fix()
		}
		if got := push(st.seq, st.kind); got != st.wantStatus {
			t.Errorf("%s: status %d, want %d", st.name, got, st.wantStatus)
		}
	}
	want := []Delivery{
		{Seq: 1, Tenant: "acme", MsgID: "m-1", EnqueuedAt: enq, ReceiveCount: 2, Status: 200},
		{Seq: 2, Tenant: "acme", MsgID: "m-2", EnqueuedAt: enq, ReceiveCount: 2, Status: 500},
		{Seq: -1, Tenant: "acme", MsgID: "m-x", EnqueuedAt: enq, ReceiveCount: 2, Status: 200},
		{Seq: 2, Tenant: "acme", MsgID: "m-2", EnqueuedAt: enq, ReceiveCount: 2, Status: 200, Redriven: true},
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
