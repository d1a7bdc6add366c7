package consumer

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/queue"
)

// testTuning is the tuning of a worker with the default settings and 50
// slots.
var testTuning = newPollers(Config{
	Connections:   50,
	ReceiveWait:   ReceiveWaitDefault,
	ReceiveWindow: ReceiveWindowDefault,
	Names:         queue.Names{Live: []string{"a", "b"}},
}).tuning

func TestTuning(t *testing.T) {
	tests := []struct {
		name        string
		connections int
		want        tuning
	}{
		{"default", 50, tuning{wait: 20 * time.Second, window: 50 * time.Millisecond, batchNeed: 5, maxWatchSlots: 12}},
		{"many slots", 500, tuning{wait: 20 * time.Second, window: 50 * time.Millisecond, batchNeed: 10, maxWatchSlots: 125}},
		{"one slot", 1, tuning{wait: 20 * time.Second, window: 50 * time.Millisecond, batchNeed: 1, maxWatchSlots: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newPollers(Config{Connections: tt.connections, ReceiveWait: ReceiveWaitDefault, ReceiveWindow: ReceiveWindowDefault}).tuning
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(tuning{})); diff != "" {
				t.Errorf("tuning (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	fresh := seen{first: true, got: queue.MaxBatch}
	tests := []struct {
		name   string
		tuning tuning
		class  class // classLive unless set
		seen   seen
		want   receivePlan
	}{
		{
			name: "first receive: one slot, a short long poll so that the live queues are known soon",
			seen: fresh,
			want: receivePlan{need: 1, most: 1, wait: batchWait},
		},
		{
			name: "watch mode: one slot, the whole long poll",
			seen: seen{got: 4},
			want: receivePlan{need: 1, most: 1, wait: 20 * time.Second},
		},
		{
			name: "batch mode: twice what came, waiting for a batch of slots, a short wait",
			seen: seen{batch: true, got: 3},
			want: receivePlan{need: 5, most: 6, wait: batchWait},
		},
		{
			name: "batch mode after a lone message: at least two",
			seen: seen{batch: true, got: 1},
			want: receivePlan{need: 2, most: 2, wait: batchWait},
		},
		{
			name: "batch mode after a full receive: at most ten",
			seen: seen{batch: true, got: 8},
			want: receivePlan{need: 5, most: 10, wait: batchWait},
		},
		{
			name: "batch mode on a fast queue: what the window gathers at its rate",
			seen: seen{batch: true, got: 1, recent: 40 * rateHorizon.Seconds()},
			want: receivePlan{need: 4, most: 4, wait: batchWait},
		},
		{
			name:  "an overflow queue: what the window gathers at the latest receive's rate",
			class: classOverflow,
			seen:  seen{batch: true, got: 1, rate: 40},
			want:  receivePlan{need: 4, most: 4, wait: batchWait},
		},
		{
			name: "a partial receive on a queue that fills the window: pause for it",
			seen: seen{batch: true, got: 2, recent: 60 * rateHorizon.Seconds(), gather: true},
			want: receivePlan{pause: 50 * time.Millisecond, need: 5, most: 6, wait: batchWait},
		},
		{
			name: "an extra loop's first receive: a full batch",
			seen: seen{first: true, batch: true, got: queue.MaxBatch},
			want: receivePlan{need: 5, most: 10, wait: batchWait},
		},
		{
			name:   "a small worker waits for one slot",
			tuning: tuning{wait: 5 * time.Second, window: 50 * time.Millisecond, batchNeed: 1, maxWatchSlots: 1},
			seen:   seen{batch: true, got: 5},
			want:   receivePlan{need: 1, most: 10, wait: batchWait},
		},
		{
			name:   "a wait shorter than batchWait is kept",
			tuning: tuning{wait: 200 * time.Millisecond, window: -1, batchNeed: 5, maxWatchSlots: 12},
			seen:   seen{batch: true, got: 5, recent: 1000 * rateHorizon.Seconds()},
			want:   receivePlan{need: 5, most: 10, wait: 200 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &poller{tuning: testTuning, class: tt.class, seen: tt.seen}
			if tt.tuning != (tuning{}) {
				p.tuning = tt.tuning
			}
			got := p.plan()
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(receivePlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p.seen != tt.seen {
				t.Errorf("plan changed what the loop has seen: %+v, was %+v", p.seen, tt.seen)
			}
		})
	}
}

func TestContended(t *testing.T) {
	watch := receivePlan{need: 1, most: 1, wait: 20 * time.Second}
	tests := []struct {
		name string
		c    contention
		want receivePlan
	}{
		{
			name: "slots to spare: the whole long poll",
			c:    contention{spare: 40, contenders: 3, watchSlots: 2, batching: 1},
			want: watch,
		},
		{
			name: "fewer free slots than loops, a queue has work: a short long poll",
			c:    contention{spare: 8, contenders: 9, watchSlots: 2, batching: 1},
			want: receivePlan{need: 1, most: 1, wait: batchWait},
		},
		{
			name: "fewer free slots than loops, a loop waits for a slot: a short long poll",
			c:    contention{spare: 8, contenders: 9, watchSlots: 2, waiting: 1},
			want: receivePlan{need: 1, most: 1, wait: batchWait},
		},
		{
			name: "fewer free slots than loops, fewer than a batch: a short long poll",
			c:    contention{spare: 4, contenders: 46, watchSlots: 46},
			want: receivePlan{need: 1, most: 1, wait: batchWait},
		},
		{
			name: "fewer free slots than loops, all idle, a batch of slots free: the whole long poll",
			c:    contention{spare: 5, contenders: 45, watchSlots: 45},
			want: watch,
		},
		{
			name: "a quarter of the slots watch already while a queue has work: a short poll",
			c:    contention{spare: 40, contenders: 20, watchSlots: 13, batching: 1},
			want: receivePlan{need: 1, most: 1, wait: 0, short: true},
		},
		{
			name: "as many watchers, but no queue has work: the long poll",
			c:    contention{spare: 40, contenders: 20, watchSlots: 13, batching: 0},
			want: watch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := watch.contended(testTuning, tt.c)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(receivePlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// decayed returns what a rate of perSecond counts as in seen.recent, d
// later.
func decayed(perSecond float64, d time.Duration) float64 {
	return perSecond * rateHorizon.Seconds() * math.Exp(-d.Seconds()/rateHorizon.Seconds())
}

func TestRecord(t *testing.T) {
	msgs := func(n int) []queue.Message { return make([]queue.Message, n) }
	boom := errors.New("boom")
	tests := []struct {
		name     string
		extra    bool
		live     bool // a live queue's loop; otherwise the overflow queue's
		seen     seen
		r        receipt
		want     seen
		wantNext next
	}{
		{
			name:     "a first receive that brought messages: batch mode, the rate since it was made",
			seen:     seen{first: true, got: queue.MaxBatch},
			r:        receipt{msgs: msgs(1), slots: 1, since: 100 * time.Millisecond},
			want:     seen{batch: true, got: 1, rate: 10, recent: 1, fulls: 1},
			wantNext: next{},
		},
		{
			name:     "a partial receive in batch mode on a queue that fills the window: gather",
			seen:     seen{batch: true, got: 4, fulls: 3},
			r:        receipt{msgs: msgs(3), slots: 8, since: 50 * time.Millisecond},
			want:     seen{batch: true, got: 3, rate: 60, recent: 3, gather: true, partials: 1},
			wantNext: next{},
		},
		{
			name:     "a live queue that fills the window: gather",
			live:     true,
			seen:     seen{batch: true, got: 4, fulls: 3, recent: 60 * rateHorizon.Seconds()},
			r:        receipt{msgs: msgs(3), slots: 8, since: 50 * time.Millisecond},
			want:     seen{batch: true, got: 3, rate: 60, recent: decayed(60, 50*time.Millisecond) + 3, gather: true, partials: 1},
			wantNext: next{},
		},
		{
			// Seven in 50 ms is 140 a second, but the queue has brought 5
			// a second: one sender's clump is no rate to pause for, which
			// every tenant on the queue would wait out.
			name:     "a clump of messages on a slow live queue: no pause",
			live:     true,
			seen:     seen{batch: true, got: 1, recent: 5 * rateHorizon.Seconds()},
			r:        receipt{msgs: msgs(7), slots: 10, since: 50 * time.Millisecond},
			want:     seen{batch: true, got: 7, rate: 140, recent: decayed(5, 50*time.Millisecond) + 7, partials: 1},
			wantNext: next{},
		},
		{
			name:     "a partial receive on a slow queue: no pause",
			seen:     seen{batch: true, got: 4},
			r:        receipt{msgs: msgs(3), slots: 8, since: time.Second},
			want:     seen{batch: true, got: 3, rate: 3, recent: 3, partials: 1},
			wantNext: next{},
		},
		{
			name:     "watch mode's first messages: no pause, however fast",
			seen:     seen{got: 4},
			r:        receipt{msgs: msgs(1), slots: 2, since: time.Millisecond},
			want:     seen{batch: true, got: 1, rate: 1000, recent: 1, partials: 1},
			wantNext: next{},
		},
		{
			name:     "growAfter full receives in a row: the queue may get an extra loop",
			seen:     seen{batch: true, got: 10, fulls: growAfter - 1},
			r:        receipt{msgs: msgs(10), slots: 10, since: time.Second},
			want:     seen{batch: true, got: 10, rate: 10, recent: 10, fulls: growAfter},
			wantNext: next{grow: true},
		},
		{
			name:     "an empty receive: watch mode, streaks reset",
			seen:     seen{batch: true, got: 6, fulls: 2, gather: true, failures: 0},
			r:        receipt{slots: 6, since: time.Second},
			want:     seen{got: 6},
			wantNext: next{},
		},
		{
			name:     "an empty short poll: pause out of contention",
			seen:     seen{got: 6},
			r:        receipt{slots: 1, short: true},
			want:     seen{got: 6},
			wantNext: next{idleFor: shortPollPause},
		},
		{
			name:     "an extra loop's empty receive ends it",
			extra:    true,
			seen:     seen{batch: true, got: 10},
			r:        receipt{slots: 10, since: time.Second},
			want:     seen{batch: true, got: 10},
			wantNext: next{end: true},
		},
		{
			name:     "an extra loop's shrinkAfter partial receives in a row end it",
			extra:    true,
			seen:     seen{batch: true, got: 5, partials: shrinkAfter - 1},
			r:        receipt{msgs: msgs(5), slots: 10, since: time.Second},
			want:     seen{batch: true, got: 5, rate: 5, recent: 5, partials: shrinkAfter},
			wantNext: next{end: true},
		},
		{
			name:     "a failure: retry after a second, mode kept, no gathering",
			seen:     seen{batch: true, got: 4, gather: true},
			r:        receipt{err: boom, slots: 8, since: time.Second},
			want:     seen{batch: true, got: 4, failures: 1},
			wantNext: next{retryIn: time.Second},
		},
		{
			name:     "failures in a row double the pause",
			seen:     seen{got: 4, failures: 2},
			r:        receipt{err: boom, slots: 1},
			want:     seen{got: 4, failures: 3},
			wantNext: next{retryIn: 4 * time.Second},
		},
		{
			name:     "up to receiveRetryMax",
			seen:     seen{got: 4, failures: 9},
			r:        receipt{err: boom, slots: 1},
			want:     seen{got: 4, failures: 10},
			wantNext: next{retryIn: receiveRetryMax},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := classOverflow
			if tt.live {
				c = classLive
			}
			p := &poller{tuning: testTuning, extra: tt.extra, seen: tt.seen, class: c, overflowWait: time.Millisecond}
			got := p.record(tt.r)
			if diff := cmp.Diff(tt.wantNext, got, cmp.AllowUnexported(next{})); diff != "" {
				t.Errorf("next (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, p.seen, cmp.AllowUnexported(seen{})); diff != "" {
				t.Errorf("seen (-want +got):\n%s", diff)
			}
			drained := tt.r.err == nil && len(tt.r.msgs) == 0 && !tt.extra
			if wantWait := map[bool]time.Duration{true: overflowWaitMax, false: time.Millisecond}[drained]; p.overflowWait != wantWait {
				t.Errorf("overflowWait %v, want %v", p.overflowWait, wantWait)
			}
		})
	}
}
