package sim

import (
	"context"
	"math/rand/v2"

	"github.com/fairq/fairq/sharding"
)

// Random stream purposes: each tenant has one stream per purpose.
const (
	streamArrivals = 1 // interarrival and service times
	streamPicks    = 2 // queue choices and tie-breaks
)

// engine is one simulated run: one strategy, with or without the noisy
// tenants.
type engine struct {
	cfg      Config
	strategy Strategy
	end      float64 // cfg.Duration in seconds
	window   float64 // length of a latency window, seconds

	rates  []float64        // by tenant; 0 for absent noisy tenants
	shards []sharding.Shard // by tenant: the queues it may use
	arrive []*rand.Rand     // by tenant
	pick   []*rand.Rand     // by tenant

	queues  []fifo
	busy    []int   // messages in service, by queue
	reading []int64 // depth at the last poll, by queue
	sent    []int64 // messages sent since the last poll, by queue
	rr      int     // next queue the consumers look at

	slot  []message // message in service, by consumer slot
	slotQ []int     // its queue
	idle  []int32   // free consumer slots

	h eventHeap

	lat       [][][]float32 // latencies in seconds, by tenant and window of sending
	messages  []int         // sent, by tenant
	completed []int         // served, by tenant
	served    []int         // messages taken from each queue while tenants send
	events    int
}

// newEngine prepares a run; shards[i] are the queues tenant i may use
// under the strategy (a single queue for shared and hash), rates[i] its
// messages/s. The noisy tenants, from cfg.Quiet on, send only withNoisy.
func newEngine(cfg Config, strategy Strategy, shards []sharding.Shard, rates []float64, withNoisy bool) *engine {
	nt := len(shards)
	nq := cfg.Queues
	if strategy == Shared {
		nq = 1
	}
	e := &engine{
		cfg:       cfg,
		strategy:  strategy,
		end:       cfg.Duration.Seconds(),
		window:    cfg.Duration.Seconds() / float64(cfg.Windows),
		rates:     make([]float64, nt),
		shards:    shards,
		arrive:    make([]*rand.Rand, nt),
		pick:      make([]*rand.Rand, nt),
		queues:    make([]fifo, nq),
		busy:      make([]int, nq),
		reading:   make([]int64, nq),
		sent:      make([]int64, nq),
		slot:      make([]message, cfg.workers()),
		slotQ:     make([]int, cfg.workers()),
		lat:       make([][][]float32, nt),
		messages:  make([]int, nt),
		completed: make([]int, nt),
		served:    make([]int, nq),
	}
	for i := range nt {
		e.rates[i] = rates[i]
		if i >= cfg.Quiet && !withNoisy {
			e.rates[i] = 0
		}
		e.arrive[i] = rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|streamArrivals))
		e.pick[i] = rand.New(rand.NewPCG(cfg.Seed, uint64(i)<<8|streamPicks))
		e.lat[i] = make([][]float32, cfg.Windows)
	}
	for w := range e.slot {
		e.idle = append(e.idle, int32(len(e.slot)-1-w))
	}
	return e
}

// run simulates until the configured duration, checking ctx now and then.
func (e *engine) run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, r := range e.rates {
		if r > 0 {
			e.h.push(event{t: e.arrive[i].ExpFloat64() / r, kind: evArrival, id: int32(i)})
		}
	}
	if e.strategy == ShardShallowest {
		e.h.push(event{t: e.cfg.Poll.Seconds(), kind: evPoll})
	}
	// Tenants send until the end; then the consumers drain the queues, so
	// every message sent is served and its latency known.
	for len(e.h) > 0 {
		ev := e.h.pop()
		e.events++
		if e.events&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch ev.kind {
		case evArrival:
			e.arrival(ev.t, ev.id)
		case evDone:
			e.done(ev.t, ev.id)
		case evPoll:
			for q := range e.queues {
				e.reading[q] = int64(e.queues[q].len() + e.busy[q])
				e.sent[q] = 0
			}
			if next := ev.t + e.cfg.Poll.Seconds(); next < e.end {
				e.h.push(event{t: next, kind: evPoll})
			}
		}
	}
	// The queues are empty; let go of their grown buffers before the
	// other runs need the memory.
	for q := range e.queues {
		e.queues[q] = fifo{}
	}
	e.h = nil
	return nil
}

func (e *engine) arrival(now float64, tenant int32) {
	r := e.arrive[tenant]
	svc := r.ExpFloat64() * e.cfg.Service.Seconds()
	if e.cfg.ServiceDist == ServiceFixed {
		svc = e.cfg.Service.Seconds()
	}
	m := message{enq: now, svc: float32(svc), tenant: tenant}
	q := e.choose(tenant)
	e.sent[q]++
	e.messages[tenant]++
	if n := len(e.idle); n > 0 {
		// A free slot means every queue is empty: it takes the message at
		// once.
		w := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.start(now, w, m, q)
	} else {
		e.queues[q].push(m)
	}
	if next := now + r.ExpFloat64()/e.rates[tenant]; next < e.end {
		e.h.push(event{t: next, kind: evArrival, id: tenant})
	}
}

func (e *engine) done(now float64, w int32) {
	m := e.slot[w]
	e.busy[e.slotQ[w]]--
	e.completed[m.tenant]++
	e.record(m, now)
	// The slot looks at the queues in turn from where the last one left
	// off and takes the head of the first that is not empty.
	n := len(e.queues)
	for i := range n {
		q := (e.rr + i) % n
		if e.queues[q].len() > 0 {
			e.rr = (q + 1) % n
			e.start(now, w, e.queues[q].pop(), q)
			return
		}
	}
	e.idle = append(e.idle, w)
}

func (e *engine) start(now float64, w int32, m message, q int) {
	if now < e.end {
		e.served[q]++
	}
	e.slot[w] = m
	e.slotQ[w] = q
	e.busy[q]++
	e.h.push(event{t: now + float64(m.svc), kind: evDone, id: w})
}

func (e *engine) record(m message, now float64) {
	w := min(int(m.enq/e.window), e.cfg.Windows-1)
	e.lat[m.tenant][w] = append(e.lat[m.tenant][w], float32(now-m.enq))
}

// choose returns the queue of a tenant's next message.
func (e *engine) choose(tenant int32) int {
	s := e.shards[tenant]
	switch e.strategy {
	case Shared:
		return 0
	case Hash:
		return s.Queue(0)
	case ShardRandom:
		return s.Queue(e.pick[tenant].IntN(s.Len()))
	}
	// Shallowest by the gateway's estimate, ties at random.
	best, ties := -1, 0
	var bestDepth int64
	for i := range s.Len() {
		q := s.Queue(i)
		d := e.reading[q] + e.sent[q]
		switch {
		case best < 0 || d < bestDepth:
			best, bestDepth, ties = q, d, 1
		case d == bestDepth:
			ties++
			if e.pick[tenant].IntN(ties) == 0 {
				best = q
			}
		}
	}
	return best
}
