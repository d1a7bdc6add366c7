package spillover

import "sync"

// otherLabel is the tenant label of every tenant beyond the bound.
const otherLabel = "other"

// labels bounds the tenant label of the metrics: a tenant the registry
// knows gets its own label while fewer than max tenants have one; every
// other tenant, and messages of tenants the registry does not know (their
// ids come from the queue, not from the configuration), count as "other".
type labels struct {
	max int

	mu   sync.RWMutex
	seen map[string]struct{}
}

func newLabels(max int) *labels { return &labels{max: max, seen: make(map[string]struct{})} }

// of returns the label of tenant id; known says whether the registry
// knows it.
func (l *labels) of(id string, known bool) string {
	if !known {
		return otherLabel
	}
	l.mu.RLock()
	_, ok := l.seen[id]
	l.mu.RUnlock()
	if ok {
		return id
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[id]; ok {
		return id
	}
	if len(l.seen) >= l.max {
		return otherLabel
	}
	l.seen[id] = struct{}{}
	return id
}
