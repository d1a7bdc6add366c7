package gateway

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"
)

// claimState is what a claim of an idempotency key found.
type claimState int

const (
	claimOwned   claimState = iota + 1 // the caller owns the key: send, then complete or release
	claimDone                          // an earlier request completed: result holds its answer
	claimPending                       // an earlier request is still sending: wait, then claim again
)

// claim is the answer of an idempotency store.
type claim struct {
	state  claimState
	token  string        // claimOwned: proves ownership to complete and release
	result []byte        // claimDone: the first answer
	wait   chan struct{} // claimPending, in memory: closed when the owner completes or releases
}

// idemStore remembers idempotency keys. A key is owned by one request at a
// time for a lease (so that a crashed owner does not hold it forever), then
// holds that request's answer for the idempotency window.
type idemStore interface {
	claim(ctx context.Context, key string, lease time.Duration) (claim, error)
	complete(ctx context.Context, key, token string, result []byte, window time.Duration) error
	release(ctx context.Context, key, token string) error
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// memIdem keeps idempotency keys in process, at most max of them: past
// that the oldest are forgotten first. A key dropped (released after a
// refusal, or expired) leaves the order at once, so that keys claimed and
// released, which cost a client nothing, cannot pile up behind a live one.
type memIdem struct {
	now func() time.Time
	max int

	mu      sync.Mutex
	entries map[string]*idemEntry
	order   list.List // of *idemEntry, oldest claim first
}

type idemEntry struct {
	key     string
	token   string
	result  []byte
	expires time.Time
	done    chan struct{}
	elem    *list.Element // its place in memIdem.order
}

var _ idemStore = (*memIdem)(nil)

func newMemIdem(now func() time.Time, max int) *memIdem {
	return &memIdem{now: now, max: max, entries: make(map[string]*idemEntry)}
}

func (m *memIdem) claim(_ context.Context, key string, lease time.Duration) (claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.trim(now)
	e := m.entries[key]
	if e != nil && !now.Before(e.expires) {
		m.drop(key, e)
		e = nil
	}
	switch {
	case e == nil:
		e = &idemEntry{key: key, token: newToken(), expires: now.Add(lease), done: make(chan struct{})}
		m.entries[key] = e
		e.elem = m.order.PushBack(e)
		return claim{state: claimOwned, token: e.token}, nil
	case e.result != nil:
		return claim{state: claimDone, result: e.result}, nil
	}
	return claim{state: claimPending, wait: e.done}, nil
}

func (m *memIdem) complete(_ context.Context, key, token string, result []byte, window time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[key]; e != nil && e.token == token && e.result == nil {
		e.result, e.expires = result, m.now().Add(window)
		close(e.done)
	}
	return nil
}

func (m *memIdem) release(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[key]; e != nil && e.token == token && e.result == nil {
		m.drop(key, e)
	}
	return nil
}

// drop forgets a key, waking its waiters.
func (m *memIdem) drop(key string, e *idemEntry) {
	delete(m.entries, key)
	m.order.Remove(e.elem)
	if e.result == nil {
		close(e.done)
	}
}

// trim forgets expired keys at the front of the order, and the oldest
// beyond max.
func (m *memIdem) trim(now time.Time) {
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		e := el.Value.(*idemEntry)
		if len(m.entries) <= m.max && now.Before(e.expires) {
			return
		}
		m.drop(e.key, e)
	}
}

// idempotency is the gateway's memory of Idempotency-Keys: in Redis when
// configured, with the in-process store as the fallback while Redis is
// unreachable (fail open), else in process.
type idempotency struct {
	redis  idemStore // nil without Redis
	local  *memIdem
	dep    *dependency
	prefix string
	window time.Duration
	lease  time.Duration
}

// held is an owned idempotency key.
type held struct {
	store      idemStore
	key, token string
}

// idemPoll bounds the wait between two looks at a key another gateway is
// sending for.
const (
	idemPollMin = 5 * time.Millisecond
	idemPollMax = 100 * time.Millisecond
)

// idemBegin claims a tenant's idempotency key. It returns the first
// request's answer when there was one, else the claim, which the caller
// ends with idemEnd. While another request holds the key, it waits for
// that request's answer.
func (s *Server) idemBegin(ctx context.Context, tenant, key string) ([]byte, *held, error) {
	full := idempotencyKey(s.idem.prefix, tenant, key)
	store := s.idem.redis
	switch {
	case store == nil:
		store = s.idem.local
	case s.idem.dep.resting():
		if err := s.idem.dep.without(errResting); err != nil {
			return nil, nil, err
		}
		store = s.idem.local
	}
	poll := idemPollMin
	for {
		c, err := store.claim(ctx, full, s.idem.lease)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			if err := s.idem.dep.failed(ctx, err); err != nil {
				return nil, nil, err
			}
			store = s.idem.local
			continue
		}
		if store == s.idem.redis {
			s.idem.dep.ok(ctx)
		}
		switch c.state {
		case claimOwned:
			return nil, &held{store: store, key: full, token: c.token}, nil
		case claimDone:
			return c.result, nil, nil
		}
		if c.wait != nil {
			select {
			case <-c.wait:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			continue
		}
		if !sleep(ctx, poll) {
			return nil, nil, ctx.Err()
		}
		poll = min(2*poll, idemPollMax)
	}
}

// idemEnd stores the answer of a held key, or, with a nil answer, lets the
// key go so that a retry can send.
func (s *Server) idemEnd(ctx context.Context, h *held, answer []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var err error
	if answer != nil {
		err = h.store.complete(ctx, h.key, h.token, answer, s.idem.window)
	} else {
		err = h.store.release(ctx, h.key, h.token)
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "idempotency key not updated; a repeat may send again", slog.Any("err", err))
	}
}
