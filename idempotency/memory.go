package idempotency

import (
	"cmp"
	"container/list"
	"context"
	"sync"
	"time"
)

// MemoryConfig configures a Memory store.
type MemoryConfig struct {
	// Window is how long a completed key is remembered; zero uses
	// WindowDefault.
	Window time.Duration
	// Lease is how long an owner holds a key before it counts as
	// abandoned; zero uses LeaseDefault.
	Lease time.Duration
	// Max bounds the keys kept; past it the oldest claims are forgotten
	// first. Zero uses MaxLocalDefault.
	Max int
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Memory keeps the keys of one process. A key dropped (released, or
// expired) leaves the order at once, so that released claims, which cost
// a client nothing, cannot pile up behind live keys.
type Memory struct {
	window, lease time.Duration
	max           int
	now           func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
	order   list.List // of *entry, oldest claim first
}

type entry struct {
	key         string
	fingerprint string
	id          string
	token       string    // the owner's, while owned
	leaseUntil  time.Time // while owned
	answer      []byte    // once done
	expires     time.Time
	elem        *list.Element
}

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		window:  cmp.Or(cfg.Window, WindowDefault),
		lease:   cmp.Or(cfg.Lease, LeaseDefault),
		max:     cmp.Or(cfg.Max, MaxLocalDefault),
		now:     cfg.Now,
		entries: make(map[string]*entry),
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Claim claims a key (see the package documentation).
func (m *Memory) Claim(_ context.Context, r Request) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.trim(now)
	e := m.entries[r.Key]
	if e != nil && !now.Before(e.expires) {
		m.drop(e)
		e = nil
	}
	switch {
	case e == nil:
		e = &entry{key: r.Key, fingerprint: r.Fingerprint, id: r.ID, expires: now.Add(m.window)}
		m.entries[r.Key] = e
		e.elem = m.order.PushBack(e)
	case e.fingerprint != r.Fingerprint:
		return Claim{Outcome: Reused}, nil
	case e.answer != nil:
		return Claim{Outcome: Done, Answer: e.answer}, nil
	case e.token != "" && now.Before(e.leaseUntil):
		return Claim{Outcome: InProgress, RetryAfter: e.leaseUntil.Sub(now)}, nil
	}
	// New, abandoned, or owned by a request whose lease ran out.
	e.token, e.leaseUntil = newToken(), now.Add(m.lease)
	return Claim{Outcome: Owned, Token: e.token, ID: e.id}, nil
}

// Complete stores the answer of an owned key for the window.
func (m *Memory) Complete(_ context.Context, key, token string, answer []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.owned(key, token); e != nil {
		e.answer, e.token = answer, ""
		e.expires = m.now().Add(m.window)
	}
	return nil
}

// Release forgets an owned key: nothing was sent.
func (m *Memory) Release(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.owned(key, token); e != nil {
		m.drop(e)
	}
	return nil
}

// Abandon frees an owned key and keeps its id for the next claim.
func (m *Memory) Abandon(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.owned(key, token); e != nil {
		e.token = ""
	}
	return nil
}

// Len returns the number of keys kept.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func (m *Memory) owned(key, token string) *entry {
	if e := m.entries[key]; e != nil && e.token == token && e.answer == nil {
		return e
	}
	return nil
}

func (m *Memory) drop(e *entry) {
	delete(m.entries, e.key)
	m.order.Remove(e.elem)
}

// trim forgets expired keys at the front of the order, and the oldest
// beyond max.
func (m *Memory) trim(now time.Time) {
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		e := el.Value.(*entry)
		if len(m.entries) <= m.max && now.Before(e.expires) {
			return
		}
		m.drop(e)
	}
}
