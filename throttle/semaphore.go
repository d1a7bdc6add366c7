package throttle

import (
	"context"
	"sync/atomic"
)

// Semaphore counts the slots of a key in use: at most limit holders at
// once. The limit is passed on every call, as a rate Limit is, so that a
// changed tenant limit applies at the next acquire; a limit of zero or less
// is no limit. Holders that are already in when the limit shrinks keep
// their slots.
type Semaphore interface {
	// TryAcquire takes one slot of key if fewer than limit are in use and
	// reports whether it did. It never waits for a slot.
	TryAcquire(ctx context.Context, key string, limit int) (Permit, bool, error)
}

// FreedNotifier is a Semaphore that tells of the slots given back
// (RedisSemaphore, and a FailoverSemaphore over one), by this process or
// another sharing it, once a TryAcquire can take them, so that work
// waiting for a slot need not poll for one, nor ask before the slot is
// free.
type FreedNotifier interface {
	// OnFreed has f told the key and number of the slots given back, and
	// reports whether it will be (false: this semaphore tells of none);
	// call it before the semaphore starts. f must not block.
	OnFreed(f func(key string, n int)) bool
}

var (
	_ FreedNotifier = (*RedisSemaphore)(nil)
	_ FreedNotifier = (*FailoverSemaphore)(nil)
)

// Permit is a slot taken from a Semaphore. Release gives it back; a second
// Release, or the Release of the zero Permit, does nothing.
type Permit struct {
	p *permit
}

type permit struct {
	released atomic.Bool
	release  func()
}

// newPermit returns a Permit whose first Release calls release.
func newPermit(release func()) Permit { return Permit{&permit{release: release}} }

// Release gives the slot back.
func (p Permit) Release() {
	if p.p != nil && p.p.released.CompareAndSwap(false, true) {
		p.p.release()
	}
}
