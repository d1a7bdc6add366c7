package gatewaytest

import (
	"sync"
	"sync/atomic"
)

// RoundRobin is a Picker that deals queues 0..N-1 in turn and records
// Sent corrections.
type RoundRobin struct {
	n    int
	next atomic.Uint64

	mu   sync.Mutex
	sent map[int]int
}

// NewRoundRobin returns a RoundRobin over n queues.
func NewRoundRobin(n int) *RoundRobin { return &RoundRobin{n: n, sent: make(map[int]int)} }

// Pick returns the next queue.
func (p *RoundRobin) Pick(string) int { return int((p.next.Add(1) - 1) % uint64(p.n)) }

// Sent records a correction.
func (p *RoundRobin) Sent(i, n int) {
	p.mu.Lock()
	p.sent[i] += n
	p.mu.Unlock()
}

// Corrections returns the sum of Sent corrections by queue.
func (p *RoundRobin) Corrections() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]int, len(p.sent))
	for k, v := range p.sent {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
