package parking

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Spot is a parked message: its queue, the receipt handle that makes it
// visible again, and when its invisibility ends on its own.
type Spot struct {
	Queue  string `json:"q"`
	Handle string `json:"h"`
	Until  int64  `json:"u"` // unix ms
}

// ErrUnavailable wraps the errors of a Lot that could not be reached.
var ErrUnavailable = errors.New("parking lot unavailable")

// Memory is the Lot of one process.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	spots map[string][]Spot // by tenant
}

// NewMemory returns an empty Memory lot; now nil uses time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, spots: make(map[string][]Spot)}
}

// Park records a parked message of a tenant.
func (m *Memory) Park(_ context.Context, tenant string, s Spot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spots[tenant] = append(m.spots[tenant], s)
	return nil
}

// Tenants returns the tenants with parked messages.
func (m *Memory) Tenants(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.spots))
	for t := range m.spots {
		out = append(out, t)
	}
	return out, nil
}

// Take removes and returns a tenant's spots whose invisibility has not
// ended on its own.
func (m *Memory) Take(_ context.Context, tenant string) ([]Spot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	spots := m.spots[tenant]
	delete(m.spots, tenant)
	return live(spots, m.now()), nil
}

// live returns the spots still invisible at now.
func live(spots []Spot, now time.Time) []Spot {
	out := spots[:0]
	for _, s := range spots {
		if s.Until > now.UnixMilli() {
			out = append(out, s)
		}
	}
	return out
}
