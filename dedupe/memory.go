package dedupe

import (
	"cmp"
	"context"
	"sync"
	"time"
)

// MemoryConfig configures a Memory store.
type MemoryConfig struct {
	// Window is how long a completed id is remembered; zero uses
	// WindowDefault.
	Window time.Duration
	// Lease is how long a claim holds without renewal; zero uses
	// LeaseDefault.
	Lease time.Duration
	// Max bounds the ids kept; past it the oldest are forgotten first.
	// Zero uses MaxLocalDefault.
	Max int
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Memory keeps the ids of one worker.
type Memory struct {
	window, lease time.Duration
	max           int
	now           func() time.Time

	mu  sync.Mutex
	ids map[string]*record
	// oldest and newest end the list of the records by age, in which
	// each links to the next newer one and the one before.
	oldest, newest *record
	// claims numbers the claims: a claim's token is its number, which no
	// other claim of this store has. (Redis's tokens are random: there
	// they tell the claims of many workers apart.) tokens holds the
	// tokens of the next claims, written out together: each claim's is a
	// piece of it, which costs no allocation of its own.
	claims uint64
	tokens string
	// spare is the last record forgotten, for the next new id: past the
	// bound, each claim forgets one id and remembers another.
	spare *record
}

type record struct {
	id         string
	token      string // while running
	done       bool
	expires    time.Time // of the lease while running; of the window once done
	prev, next *record   // older, newer
}

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		window: cmp.Or(cfg.Window, WindowDefault),
		lease:  cmp.Or(cfg.Lease, LeaseDefault),
		max:    cmp.Or(cfg.Max, MaxLocalDefault),
		now:    cfg.Now,
		ids:    make(map[string]*record),
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Claim claims a message id (see the package documentation).
func (m *Memory) Claim(_ context.Context, id string) (Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.trim(now)
	r := m.ids[id]
	if r != nil && !now.Before(r.expires) {
		m.drop(r)
		r = nil
	}
	switch {
	case r == nil:
		r = m.spare
		if r != nil {
			m.spare = nil
			*r = record{id: id}
		} else {
			r = &record{id: id}
		}
		m.ids[id] = r
		m.pushNewest(r)
	case r.done:
		return Claim{Outcome: Duplicate}, nil
	default:
		return Claim{Outcome: Running, RetryAfter: r.expires.Sub(now)}, nil
	}
	r.token, r.expires = m.nextToken(), now.Add(m.lease)
	return Claim{Outcome: Run, Token: r.token}, nil
}

// tokenWidth is the width of a token: claim numbers in hexadecimal, zero
// padded, unique for 16^12 claims.
const (
	tokenWidth = 12
	tokensMade = 256 // at a time
)

// nextToken returns the token of a new claim.
func (m *Memory) nextToken() string {
	if m.tokens == "" {
		b := make([]byte, 0, tokenWidth*tokensMade)
		for i := range uint64(tokensMade) {
			n := m.claims + i
			for shift := 4 * (tokenWidth - 1); shift >= 0; shift -= 4 {
				b = append(b, "0123456789abcdef"[n>>shift&0xf])
			}
		}
		m.tokens = string(b)
	}
	t := m.tokens[:tokenWidth]
	m.tokens = m.tokens[tokenWidth:]
	m.claims++
	return t
}

// Complete remembers a claimed id as done for the window.
func (m *Memory) Complete(_ context.Context, id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.owned(id, token); r != nil {
		r.done, r.token, r.expires = true, "", m.now().Add(m.window)
		m.unlink(r)
		m.pushNewest(r)
	}
	return nil
}

// Release forgets a claimed id: the message may run again.
func (m *Memory) Release(_ context.Context, id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.owned(id, token); r != nil {
		m.drop(r)
	}
	return nil
}

// Renew extends the leases of claims still held.
func (m *Memory) Renew(_ context.Context, leases []Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	until := m.now().Add(m.lease)
	for _, l := range leases {
		if r := m.owned(l.ID, l.Token); r != nil {
			r.expires = until
		}
	}
	return nil
}

// Len returns the number of ids kept.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids)
}

func (m *Memory) owned(id, token string) *record {
	if r := m.ids[id]; r != nil && !r.done && r.token == token {
		return r
	}
	return nil
}

func (m *Memory) drop(r *record) {
	delete(m.ids, r.id)
	m.unlink(r)
	m.spare = r
}

// pushNewest puts r, unlinked, at the newest end of the list.
func (m *Memory) pushNewest(r *record) {
	r.prev = m.newest
	if m.newest != nil {
		m.newest.next = r
	} else {
		m.oldest = r
	}
	m.newest = r
}

// unlink takes r out of the list.
func (m *Memory) unlink(r *record) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		m.oldest = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		m.newest = r.prev
	}
	r.prev, r.next = nil, nil
}

// trim forgets the oldest ids beyond max, and expired ones at the front.
func (m *Memory) trim(now time.Time) {
	for r := m.oldest; r != nil; r = m.oldest {
		if len(m.ids) <= m.max && now.Before(r.expires) {
			return
		}
		m.drop(r)
	}
}
