package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
)

func TestSendFaults(t *testing.T) {
	t.Parallel()
	fault := errors.New("api error InternalError: We encountered an internal error")
	tests := []struct {
		name        string
		fails       int
		wantStatus  int
		wantDepth   int
		wantCalls   int
		wantCorrect map[int]int
	}{
		// The backend retries a call (the SDK's retryer for SQS); a call
		// that failed after that is not tried again here.
		{"a failed call is a 503", 1, http.StatusServiceUnavailable, 0, 1, map[int]int{0: -1}},
		{"an outage is a 503", -1, http.StatusServiceUnavailable, 0, 1, map[int]int{0: -1}},
		{"no fault", 0, http.StatusAccepted, 1, 1, map[int]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.flaky.FailSends(tt.fails, fault)
			w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantStatus == http.StatusServiceUnavailable {
				if p := decode[problem](t, w); p.Code != "unavailable" || w.Header().Get("Retry-After") == "" {
					t.Errorf("problem %+v, Retry-After %q", p, w.Header().Get("Retry-After"))
				}
			}
			if n := f.depth(t); n != tt.wantDepth {
				t.Errorf("%d messages on the queues, want %d", n, tt.wantDepth)
			}
			if calls, _ := f.flaky.Sends(); calls != tt.wantCalls {
				t.Errorf("%d send calls, want %d", calls, tt.wantCalls)
			}
			if diff := cmp.Diff(tt.wantCorrect, f.picker.Corrections()); diff != "" {
				t.Errorf("picker corrections (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSendTimeout: a send that does not answer is cut at SendTimeout, all
// attempts together, and answered 503 with a Retry-After.
func TestSendTimeout(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendTimeout = 20 * time.Millisecond })
	f.flaky.FailSends(1, nil)
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("stalled service: %d %s", w.Code, w.Body)
	}
	if p := decode[problem](t, w); !strings.Contains(p.Detail, "send timeout") {
		t.Errorf("detail %q does not say the send timed out", p.Detail)
	}
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
		t.Fatalf("after the stall: %d %s", w.Code, w.Body)
	}
	if n := f.depth(t); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

// signalPicker tells when a message was picked for a queue.
type signalPicker struct {
	*gatewaytest.RoundRobin
	picked chan struct{}
}

func (p signalPicker) Pick(tenant string) int {
	defer func() { p.picked <- struct{}{} }()
	return p.RoundRobin.Pick(tenant)
}

// TestStopFlushesPending: a message in the batcher when the gateway stops
// is sent, and its client answered 202. (internal/batch's
// TestBatcherStopFlushesPending holds items in a window of an hour.)
func TestStopFlushesPending(t *testing.T) {
	t.Parallel()
	picker := signalPicker{gatewaytest.NewRoundRobin(4), make(chan struct{}, 1)}
	f := setup(t, func(c *gateway.Config) { c.SendWindow = time.Hour; c.Picker = picker })
	answer := make(chan int)
	go func() { answer <- f.do(t, request{key: acmeKey, body: `{"body":"x"}`}).Code }()
	<-picker.picked
	if err := f.srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := <-answer; code != http.StatusAccepted {
		t.Fatalf("pending message at Stop: %d", code)
	}
	if n := f.depth(t); n != 1 {
		t.Errorf("%d messages after Stop, want 1", n)
	}
}

// TestOutageOnFauxqs: clients sending while SQS fails get 503s, and every
// message answered 202 is on the queues afterwards, none other.
func TestOutageOnFauxqs(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, testTenants())
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ids     = map[string]bool{}
		refused int
	)
	send := func(phase string, n int) {
		for i := range n {
			wg.Go(func() {
				w := fl.post(i%2, acmeKey, `{"body":"`+phase+`"}`, nil)
				for phase == "after" && w.Code == http.StatusServiceUnavailable {
					// The gateway may still count SQS down: a client
					// retries after Retry-After (here at once), and is
					// let in once the gateway's probe saw SQS answer.
					time.Sleep(10 * time.Millisecond)
					w = fl.post(i%2, acmeKey, `{"body":"`+phase+`"}`, nil)
				}
				mu.Lock()
				defer mu.Unlock()
				switch w.Code {
				case http.StatusAccepted:
					ids[decode[accepted](t, w).ID] = true
				case http.StatusServiceUnavailable:
					if w.Header().Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
					refused++
				default:
					t.Errorf("%s: %d %s", phase, w.Code, w.Body)
				}
			})
		}
		wg.Wait()
	}
	send("before", 20)
	fl.flaky.FailSends(-1, errors.New("api error ServiceUnavailable: Service Unavailable"))
	send("during", 20)
	fl.flaky.FailSends(0, nil)
	send("after", 20)
	if len(ids) != 40 || refused != 20 {
		t.Errorf("%d accepted and %d refused, want 40 and 20", len(ids), refused)
	}
	got := fl.drain(t, ids)
	for _, m := range got {
		if m.Body == "during" {
			t.Errorf("a message sent during the outage is on a queue")
		}
	}
	if missing := missingFrom(ids, got); len(missing) > 0 {
		t.Errorf("accepted messages not on the queues: %v", missing)
	}
	// SQS may hold a message twice (at least once); nothing else.
	if extra := len(got) - len(ids); extra > 0 {
		t.Logf("%d messages on the queues were not answered 202: resends of the SDK", extra)
	}
}
