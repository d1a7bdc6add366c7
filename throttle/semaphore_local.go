package throttle

import (
	"context"
	"math"
	"sync"
)

// LocalSemaphore is a Semaphore whose counts live in this process: one
// machine, no shared state. It is safe for concurrent use and starts no
// goroutines; a key whose count falls back to zero is forgotten.
type LocalSemaphore struct {
	mu   sync.Mutex
	used map[string]int
}

var _ Semaphore = (*LocalSemaphore)(nil)

// NewLocalSemaphore returns a LocalSemaphore with every slot free.
func NewLocalSemaphore() *LocalSemaphore {
	return &LocalSemaphore{used: make(map[string]int)}
}

// TryAcquire implements Semaphore.
func (s *LocalSemaphore) TryAcquire(ctx context.Context, key string, limit int) (Permit, bool, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, false, err
	}
	if !s.take(key, limit) {
		return Permit{}, false, nil
	}
	return newPermit(func() { s.give(key) }), true, nil
}

// InUse returns the number of slots of key taken and not yet released.
func (s *LocalSemaphore) InUse(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[key]
}

// take counts one more holder of key if fewer than limit hold it.
func (s *LocalSemaphore) take(key string, limit int) bool {
	if limit <= 0 {
		limit = math.MaxInt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[key] >= limit {
		return false
	}
	s.used[key]++
	return true
}

// give counts one holder of key fewer.
func (s *LocalSemaphore) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.used[key]; n > 1 {
		s.used[key] = n - 1
	} else {
		delete(s.used, key)
	}
}
