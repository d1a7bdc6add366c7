package throttle

import (
	"sync"
	"time"
)

// PacerConfig configures a Pacer.
type PacerConfig struct {
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// SweepEvery is how often, at most, keys whose turns are all past are
	// dropped; zero uses SweepEveryDefault.
	SweepEvery time.Duration
}

// Pacer hands out turns of a key at a rate: each Reserve takes the next
// free turn and says how long to wait for it. Where a RateLimiter refuses
// what is over the rate, a Pacer spaces the refused work out, so that work
// put off until its turn comes back at the rate rather than all at once.
// Turns live in this process. It is safe for concurrent use and starts no
// goroutines.
type Pacer struct {
	now        func() time.Time
	sweepEvery time.Duration

	mu        sync.Mutex
	next      map[string]time.Time // the next free turn of each key
	lastSweep time.Time
}

// NewPacer returns a Pacer whose keys have every turn free.
func NewPacer(cfg PacerConfig) *Pacer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = SweepEveryDefault
	}
	return &Pacer{now: cfg.Now, sweepEvery: cfg.SweepEvery, next: make(map[string]time.Time), lastSweep: cfg.Now()}
}

// Reserve takes the next turn of key, turns coming rate a second and none
// sooner than earliest from now, and returns the wait until it. A turn
// further than horizon away is not handed out: the wait is then horizon,
// and the key's later turns are not pushed back by it, so that work that
// keeps being put off does not push the turns of the key ever further. A
// rate of zero or less, or +Inf, has every turn free: the wait is earliest.
func (p *Pacer) Reserve(key string, rate float64, earliest, horizon time.Duration) time.Duration {
	if (Limit{Rate: rate}).Unlimited() {
		return min(max(earliest, 0), horizon)
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) >= p.sweepEvery {
		p.lastSweep = now
		for k, t := range p.next {
			if !t.After(now) {
				delete(p.next, k)
			}
		}
	}
	turn := now.Add(max(earliest, 0))
	if t := p.next[key]; t.After(turn) {
		turn = t
	}
	wait := turn.Sub(now)
	if wait > horizon {
		return horizon
	}
	p.next[key] = turn.Add(seconds(1 / rate))
	return wait
}
