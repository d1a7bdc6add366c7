package backlog

import (
	"context"
	"slices"
	"sync"
	"time"
)

// memStore keeps the buckets in process: tenant → bucket → count.
type memStore struct {
	mu      sync.Mutex
	tenants map[string]map[int64]int64
}

var _ store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{tenants: make(map[string]map[int64]int64)} }

func (m *memStore) add(_ context.Context, tenant string, bucket, n int64, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.tenants[tenant]
	if b == nil {
		b = make(map[int64]int64)
		m.tenants[tenant] = b
	}
	b[bucket] += n
	return nil
}

func (m *memStore) take(_ context.Context, tenant string, cutoff, n int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.takeLocked(tenant, cutoff, n, false), nil
}

// takeLocked drops expired buckets and takes n (or, with capped, all above
// n) from the oldest; it returns what is left.
func (m *memStore) takeLocked(tenant string, cutoff, n int64, capped bool) int64 {
	b := m.tenants[tenant]
	var sum int64
	for k, v := range b {
		if k < cutoff || v <= 0 {
			delete(b, k)
			continue
		}
		sum += v
	}
	take := n
	if capped {
		take = sum - n
	}
	if take > 0 {
		keys := make([]int64, 0, len(b))
		for k := range b {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if take <= 0 {
				break
			}
			t := min(b[k], take)
			if b[k] -= t; b[k] == 0 {
				delete(b, k)
			}
			take -= t
			sum -= t
		}
	}
	if len(b) == 0 {
		delete(m.tenants, tenant)
	}
	return sum
}

func (m *memStore) capAt(_ context.Context, cutoff, limit int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tenant := range m.tenants {
		m.takeLocked(tenant, cutoff, limit, true)
	}
	return nil
}
