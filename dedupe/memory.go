package dedupe

import (
	"cmp"
	"context"
	"crypto/sha256"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/fairq/fairq/internal/lowerhex"
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
//
// A full store holds Max ids, a hundred thousand by default, and a worker
// claims and completes one for every message it runs. So the store holds
// no pointer for the garbage collector to follow: an id is kept as 16
// bytes (key), and its record in a ring of records in the order of their
// claims, which the map of ids points into by a record's sequence number.
// A completion updates its claim's record where it is. A record whose id
// was released, or claimed again after its lease lapsed, is left in the
// ring and skipped when the ring's oldest end reaches it.
//
// The oldest ids are forgotten first, by the order of their claims. An
// expired id is forgotten once the ring's oldest end reaches it, and
// until then counts as forgotten (Claim looks at its expiry).
type Memory struct {
	window, lease time.Duration
	max           int
	now           func() time.Time

	mu  sync.Mutex
	ids map[key]uint64 // id → the sequence number of its record
	// ring holds the records from tail (the oldest) to head (the next),
	// record s at ring[s&(len(ring)-1)]; its length is a power of two
	// that grows, up to ringMost, as the records need.
	ring       []record
	tail, head uint64
	ringMost   int
	// claims numbers the claims: a claim's token is its number, which no
	// other claim of this store has. (Redis's tokens are random: there
	// they tell the claims of many workers apart.) tokens holds the
	// tokens of the next claims, written out together: each claim's is a
	// piece of it, which costs no allocation of its own.
	claims uint64
	tokens string
}

// key is an id as the store keeps it: the 16 bytes of an id in the
// lower-case UUID form of fairq's and SQS's ids, else the first 16 bytes
// of the SHA-256 of the id.
type key [16]byte

// record is an id's state: running under a claim (token is the claim's
// number) until expires, or done (token 0) and remembered until expires;
// expires is gone once the id is released or claimed anew.
type record struct {
	id      key
	token   uint64
	expires int64 // Unix nanoseconds
}

// ringLeast is the ring's first length. The ring grows to hold, besides
// the Max records of the ids kept, the released and lapsed ones between
// them: up to twice Max in all before it forgets ids early.
const ringLeast = 1024

// NewMemory returns an empty Memory store.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{
		window: cmp.Or(cfg.Window, WindowDefault),
		lease:  cmp.Or(cfg.Lease, LeaseDefault),
		max:    cmp.Or(cfg.Max, MaxLocalDefault),
		now:    cfg.Now,
		ids:    make(map[key]uint64),
	}
	m.ringMost = ringLeast
	for m.ringMost < 2*m.max {
		m.ringMost *= 2
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m
}

// Claim claims a message id (see the package documentation).
func (m *Memory) Claim(_ context.Context, id string) (Claim, error) {
	k := keyOf(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	m.trim(now)
	if seq, ok := m.ids[k]; ok {
		r := m.at(seq)
		switch {
		case now >= r.expires:
			delete(m.ids, k) // lapsed: claimed anew below
			r.expires = gone
		case r.token == 0:
			return Claim{Outcome: Duplicate}, nil
		default:
			return Claim{Outcome: Running, RetryAfter: time.Duration(r.expires - now)}, nil
		}
	}
	token := m.nextToken()
	m.ids[k] = m.push(record{id: k, token: m.claims, expires: now + int64(m.lease)})
	return Claim{Outcome: Run, Token: token}, nil
}

// keyOf returns the key of an id.
func keyOf(id string) key {
	var k key
	if len(id) == 36 && id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-' &&
		lowerhex.Decode(k[0:4], id[0:8]) && lowerhex.Decode(k[4:6], id[9:13]) && lowerhex.Decode(k[6:8], id[14:18]) &&
		lowerhex.Decode(k[8:10], id[19:23]) && lowerhex.Decode(k[10:16], id[24:36]) {
		return k // lower case only: "A" and "a" are two ids, as strings are
	}
	sum := sha256.Sum256([]byte(id))
	copy(k[:], sum[:])
	return k
}

// tokenWidth is the width of a token: claim numbers in hexadecimal, zero
// padded, unique for 16^12 claims.
const (
	tokenWidth = 12
	tokensMade = 256 // at a time
)

// nextToken numbers a new claim (m.claims, from 1) and returns its token.
func (m *Memory) nextToken() string {
	if m.tokens == "" {
		// A Builder, not a byte slice of constant size: that would be
		// kept on the stack, and a frame of 3 KiB makes the stack of
		// every goroutine that claims grow.
		var b strings.Builder
		b.Grow(tokenWidth * tokensMade)
		for i := range uint64(tokensMade) {
			n := m.claims + 1 + i
			for shift := 4 * (tokenWidth - 1); shift >= 0; shift -= 4 {
				b.WriteByte("0123456789abcdef"[n>>shift&0xf])
			}
		}
		m.tokens = b.String()
	}
	t := m.tokens[:tokenWidth]
	m.tokens = m.tokens[tokenWidth:]
	m.claims++
	return t
}

// claimOf returns the claim number a token stands for, or 0.
func claimOf(token string) uint64 {
	var b [tokenWidth / 2]byte
	if !lowerhex.Decode(b[:], token) {
		return 0
	}
	var n uint64
	for _, x := range b {
		n = n<<8 | uint64(x)
	}
	return n
}

// Complete remembers a claimed id as done for the window.
func (m *Memory) Complete(_ context.Context, id, token string) error {
	k := keyOf(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.owned(k, token); ok {
		r.token, r.expires = 0, m.now().Add(m.window).UnixNano()
	}
	return nil
}

// Release forgets a claimed id: the message may run again.
func (m *Memory) Release(_ context.Context, id, token string) error {
	k := keyOf(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.owned(k, token); ok {
		delete(m.ids, k)
		r.expires = gone
	}
	return nil
}

// Renew extends the leases of claims still held.
func (m *Memory) Renew(_ context.Context, leases []Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	until := m.now().Add(m.lease).UnixNano()
	for _, l := range leases {
		if r, ok := m.owned(keyOf(l.ID), l.Token); ok {
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

// owned returns the record of a claim still held under token.
func (m *Memory) owned(k key, token string) (*record, bool) {
	seq, ok := m.ids[k]
	if !ok {
		return nil, false
	}
	r := m.at(seq)
	if c := claimOf(token); c == 0 || r.token != c {
		return nil, false
	}
	return r, true
}

// at returns record seq, which is in the ring.
func (m *Memory) at(seq uint64) *record { return &m.ring[seq&uint64(len(m.ring)-1)] }

// push appends r at the head of the ring and returns its sequence number.
// A full ring grows, or past ringMost forgets its oldest record's id.
func (m *Memory) push(r record) uint64 {
	if m.head-m.tail == uint64(len(m.ring)) {
		if len(m.ring) < m.ringMost {
			m.grow()
		} else {
			m.forgetOldest()
		}
	}
	seq := m.head
	*m.at(seq) = r
	m.head++
	return seq
}

// grow doubles the ring, keeping each record's sequence number.
func (m *Memory) grow() {
	ring := make([]record, max(ringLeast, 2*len(m.ring)))
	mask := uint64(len(ring) - 1)
	for s := m.tail; s < m.head; s++ {
		ring[s&mask] = *m.at(s)
	}
	m.ring = ring
}

// gone is the expiry of a record whose id was released or claimed anew:
// the id's current record, if any, is another. Every other record in the
// ring is its id's current one, so trim need not look its id up.
const gone = math.MinInt64

// forgetOldest takes the oldest record out of the ring, and its id out of
// the store if the record is the id's current one.
func (m *Memory) forgetOldest() {
	r := m.at(m.tail)
	if r.expires != gone {
		if seq, ok := m.ids[r.id]; ok && seq == m.tail {
			delete(m.ids, r.id)
		}
	}
	m.tail++
}

// trim forgets the oldest ids beyond max, and expired ones at the oldest
// end, with the gone records before them. A claim calls it, so it reads
// only the oldest record while there is nothing to forget: a look-up of
// its id would be a cache miss in a map of up to Max ids.
func (m *Memory) trim(now int64) {
	for m.tail < m.head {
		if r := m.at(m.tail); len(m.ids) <= m.max && now < r.expires {
			return // gone is before any now
		}
		m.forgetOldest()
	}
}
