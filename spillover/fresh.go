package spillover

import (
	"sync"
	"time"
)

// freshWindow is how long after a tenant's last fresh message (one not
// from the backlog queue) its backlog messages still yield to fresh ones.
const freshWindow = 5 * time.Second

// fresh keeps when each tenant's latest fresh message came to this
// worker, so that a tenant with nothing but old work left has its whole
// limits for it.
type fresh struct {
	mu        sync.Mutex
	last      map[string]time.Time
	lastSweep time.Time
}

func newFresh(now time.Time) *fresh {
	return &fresh{last: make(map[string]time.Time), lastSweep: now}
}

// mark records a fresh message of tenant at now.
func (f *fresh) mark(tenant string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.lastSweep) >= time.Minute {
		f.lastSweep = now
		for k, t := range f.last {
			if now.Sub(t) > freshWindow {
				delete(f.last, k)
			}
		}
	}
	f.last[tenant] = now
}

// recent reports whether a fresh message of tenant came within
// freshWindow of now.
func (f *fresh) recent(tenant string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.last[tenant]
	return ok && now.Sub(t) <= freshWindow
}
