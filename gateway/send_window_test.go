package gateway_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
)

// firstQueue is a Picker that sends every message to live queue 0.
type firstQueue struct{ *gatewaytest.RoundRobin }

func (firstQueue) Pick(string) int { return 0 }

// TestSendWindow sends single messages to one queue, in synctest's bubble
// so that the batcher's window runs on the fake clock: first a steady
// stream that gives the queue a rate (a message every millisecond for 20
// ms), then n messages at one instant. It counts the SendMessageBatch
// calls the n messages took and when each was answered.
func TestSendWindow(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		window time.Duration
		n      int
		// wantCalls is the calls of the n messages, or, when 0, any
		// number from 1 to n.
		wantCalls int
		// wantAtOnce of the n messages are answered at once, the rest
		// later but within the window.
		wantAtOnce int
	}{
		{
			name:   "25 sends within the window share ⌈25/10⌉ calls",
			window: 10 * ms, n: 25, wantCalls: 3,
			// Two full calls go at once; the last five wait, until the
			// queue has been quiet for three of its gaps.
			wantAtOnce: 20,
		},
		{
			name:   "10 sends fill one call, which does not wait",
			window: 10 * ms, n: 10, wantCalls: 1, wantAtOnce: 10,
		},
		{
			name:   "send_window 0: every message goes at once",
			window: 0, n: 25, wantAtOnce: 25,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := setup(t, func(c *gateway.Config) {
					c.SendWindow = tt.window
					c.Picker = firstQueue{gatewaytest.NewRoundRobin(1)}
				})
				send := func() {
					if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
						t.Errorf("status %d: %s", w.Code, w.Body)
					}
				}
				var wg sync.WaitGroup
				for range 20 {
					wg.Go(send)
					time.Sleep(ms)
				}
				wg.Wait()
				calls0, entries0 := f.flaky.Sends()

				start := time.Now()
				var mu sync.Mutex
				answered := map[time.Duration]int{}
				for range tt.n {
					wg.Go(func() {
						send()
						mu.Lock()
						answered[time.Since(start)]++
						mu.Unlock()
					})
				}
				wg.Wait()
				calls, entries := f.flaky.Sends()
				calls, entries = calls-calls0, entries-entries0
				if entries != tt.n {
					t.Errorf("%d entries sent, want %d", entries, tt.n)
				}
				if tt.wantCalls > 0 && calls != tt.wantCalls || calls < 1 || calls > tt.n {
					t.Errorf("%d calls for %d messages, want %d", calls, tt.n, tt.wantCalls)
				}
				if answered[0] != tt.wantAtOnce {
					t.Errorf("%d messages answered at once, want %d (all: %v)", answered[0], tt.wantAtOnce, answered)
				}
				for d := range answered {
					if d > tt.window {
						t.Errorf("answered after %v, past the window (all: %v)", d, answered)
					}
				}
				if n := f.depth(t); n != 20+tt.n {
					t.Errorf("%d messages on the queue, want %d", n, 20+tt.n)
				}
			})
		})
	}
}

// TestSendWindowQuietQueue: a message to a queue that has seen none lately
// goes at once, however long the window.
func TestSendWindowQuietQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := setup(t, func(c *gateway.Config) { c.SendWindow = time.Second })
		for range 3 {
			start := time.Now()
			if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("answered after %v, want at once", d)
			}
			time.Sleep(time.Second)
		}
		if calls, _ := f.flaky.Sends(); calls != 3 {
			t.Errorf("%d calls, want 3", calls)
		}
	})
}

// alternating is a Picker over two queues that deals them in turn and,
// once prefer is set, takes the other when only it has a batch waiting,
// as sharding.Tracker does between two queues of about equal depth.
type alternating struct {
	*gatewaytest.RoundRobin
	prefer *atomic.Bool
}

func (a alternating) PickPreferring(tenant string, waiting func(int) bool) int {
	q := a.Pick(tenant)
	if a.prefer.Load() && !waiting(q) && waiting(1-q) {
		q = 1 - q
	}
	return q
}

// TestSendWindowJoinsAWaitingBatch: after a stream that gives both queues
// of a shard a rate, ten messages sent one after the other within the
// window, the picker dealing the two queues in turn. Where the picker can
// prefer the queue with a batch waiting, the ten join one batch, which is
// full and goes at once; where it cannot, they wait out the window in two
// batches of five.
func TestSendWindowJoinsAWaitingBatch(t *testing.T) {
	const window = 10 * time.Millisecond
	tests := []struct {
		name      string
		preferred bool
		wantCalls int
		wantWait  time.Duration
	}{
		{"the picker prefers a waiting batch", true, 1, 0},
		{"the picker cannot", false, 2, window},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var prefer atomic.Bool
				rr := gatewaytest.NewRoundRobin(2)
				var picker gateway.Picker = rr
				if tt.preferred {
					picker = alternating{rr, &prefer}
				}
				f := setup(t, func(c *gateway.Config) { c.SendWindow = window; c.Picker = picker })
				send := func() {
					if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
						t.Errorf("status %d: %s", w.Code, w.Body)
					}
				}
				var wg sync.WaitGroup
				for range 20 {
					wg.Go(send)
					time.Sleep(time.Millisecond)
				}
				wg.Wait()
				calls0, _ := f.flaky.Sends()

				prefer.Store(true)
				start := time.Now()
				var last time.Duration
				var mu sync.Mutex
				for range 10 {
					wg.Go(func() {
						send()
						mu.Lock()
						last = max(last, time.Since(start))
						mu.Unlock()
					})
					synctest.Wait() // picked and waiting before the next
				}
				wg.Wait()
				if calls, _ := f.flaky.Sends(); calls-calls0 != tt.wantCalls {
					t.Errorf("%d calls for 10 messages, want %d", calls-calls0, tt.wantCalls)
				}
				if last != tt.wantWait {
					t.Errorf("the last answer came after %v, want %v", last, tt.wantWait)
				}
			})
		})
	}
}
