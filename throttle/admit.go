package throttle

import (
	"context"
	"time"
)

// Need is what one piece of work takes to start: a slot of each of Slots
// and a token of each of Tokens, all of them or none.
type Need struct {
	Slots  []Slot
	Tokens []Token
}

// Slot is a slot of the semaphore Key, of at most Limit holders (zero or
// less: no limit).
type Slot struct {
	Key   string
	Limit int
}

// Token is a token of the bucket Key, of Limit.
type Token struct {
	Key   string
	Limit Limit
}

// Admission is the answer to a Need.
type Admission struct {
	// Admitted reports whether every slot and token was taken.
	Admitted bool
	// Permits holds, when Admitted, one Permit for each of Need.Slots, in
	// their order.
	Permits []Permit
	// Slot is, when not Admitted for want of a slot, the index in
	// Need.Slots of a semaphore with none free; otherwise -1.
	Slot int
	// Token is, when not Admitted for want of a token, the index in
	// Need.Tokens of a bucket with none; otherwise -1. RetryAfter is then
	// the time until that bucket holds one more.
	Token      int
	RetryAfter time.Duration
}

// Admitter takes the slots and tokens of a Need together.
type Admitter interface {
	// TryAdmit takes every slot and token of n, or, when one of them is
	// not to be had, none, and says which was missing. It never waits.
	TryAdmit(ctx context.Context, n Need) (Admission, error)
}

var (
	_ Admitter = Separately{}
	_ Admitter = (*RedisAdmitter)(nil)
	_ Admitter = (*FailoverAdmitter)(nil)
)

// Separately is the Admitter that asks a Semaphore for each slot, in
// order, then a RateLimiter for each token, in order, one call each: what
// an Admitter over state in one process costs nothing more for. Slots are
// asked for first, since a slot taken and given back costs nothing where a
// token taken for work that then cannot start would be lost; the slots
// taken are given back when a later slot or a token is refused, and a
// token taken is lost when a later one is refused.
type Separately struct {
	Semaphore Semaphore
	Rate      RateLimiter
}

// TryAdmit implements Admitter.
func (s Separately) TryAdmit(ctx context.Context, n Need) (Admission, error) {
	a := Admission{Slot: -1, Token: -1, Permits: make([]Permit, 0, len(n.Slots))}
	giveBack := func() {
		for _, p := range a.Permits {
			p.Release()
		}
		a.Permits = nil
	}
	for i, sl := range n.Slots {
		p, ok, err := s.Semaphore.TryAcquire(ctx, sl.Key, sl.Limit)
		if err != nil {
			giveBack()
			return a, err
		}
		if !ok {
			giveBack()
			a.Slot = i
			return a, nil
		}
		a.Permits = append(a.Permits, p)
	}
	for i, t := range n.Tokens {
		d, err := s.Rate.Allow(ctx, t.Key, t.Limit, 1)
		if err != nil {
			giveBack()
			return a, err
		}
		if d.Allowed < 1 {
			giveBack()
			a.Token, a.RetryAfter = i, d.RetryAfter
			return a, nil
		}
	}
	a.Admitted = true
	return a, nil
}
