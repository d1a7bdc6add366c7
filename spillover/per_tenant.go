package spillover

import (
	"sync"
	"time"
)

// perTenant keeps a value per tenant with the time it was last updated, and
// forgets a tenant forget after its last update (swept at most once a
// minute), so that tenants gone from the traffic do not pile up.
type perTenant[V any] struct {
	mu        sync.Mutex
	forget    time.Duration
	m         map[string]stamped[V]
	lastSweep time.Time
}

type stamped[V any] struct {
	v  V
	at time.Time
}

func newPerTenant[V any](forget time.Duration, now time.Time) *perTenant[V] {
	return &perTenant[V]{forget: forget, m: make(map[string]stamped[V]), lastSweep: now}
}

// update sets tenant's value to f of its current one (ok false when there
// is none), as of now.
func (p *perTenant[V]) update(tenant string, now time.Time, f func(v V, ok bool) V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.lastSweep) >= time.Minute {
		p.lastSweep = now
		for k, s := range p.m {
			if now.Sub(s.at) > p.forget {
				delete(p.m, k)
			}
		}
	}
	old, ok := p.m[tenant]
	p.m[tenant] = stamped[V]{f(old.v, ok), now}
}

// get returns tenant's value and when it was last updated; ok is false
// when there is none.
func (p *perTenant[V]) get(tenant string) (v V, at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[tenant]
	return s.v, s.at, ok
}
