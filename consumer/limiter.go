package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/fairq/fairq/dedupe"
)

// Action is what the worker does with a received message.
type Action int

const (
	// Dispatch hands the message to the Handler.
	Dispatch Action = iota
	// Spill moves it to the overflow queue, delayed by Verdict.Delay
	// (at most 900 s): the tenant is over its rate or concurrency. A
	// message of the backlog queue is sent to the backlog queue again
	// instead, delayed the same, so that it stays among the old
	// messages; without an overflow queue, a message is sent to its own
	// queue again. A spill does not count as a delivery toward
	// Config.MaxRetries.
	Spill
	// ToBacklog moves it to the backlog queue, delayed by Verdict.Delay:
	// an old message, which must not hold up fresh work. A message
	// already there, or without a backlog queue, is sent to its own queue
	// again, delayed. Not counted as a delivery either.
	ToBacklog
	// Drop deletes it unprocessed, counted as dropped
	// (fairq_worker_processed_total{outcome="dropped"}): a message past
	// its drop age. The tenant's backlog goes down.
	Drop
)

func (a Action) String() string {
	switch a {
	case Dispatch:
		return "dispatch"
	case Spill:
		return "spill"
	case ToBacklog:
		return "backlog"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Verdict is a Limiter's decision about one message.
type Verdict struct {
	Action Action
	// Delay is the DelaySeconds of a Spill or ToBacklog move, 0–900 s.
	Delay time.Duration
	// Reason labels a move in fairq_worker_spilled_total, e.g. "rate",
	// "concurrency" or "aged".
	Reason string
	// Done, if not nil, is called once when a dispatched message's job
	// ends, whatever its outcome: the place to release a concurrency
	// permit. It is not called for other actions.
	Done func()
}

// Limiter decides, for each received message that is not a periodic task,
// whether it runs now: the seam of the per-tenant worker policy (package
// spillover: drop and backlog ages, then the rate and concurrency limits
// of package throttle). Nil runs everything.
//
// Admit must not block for long: it holds a worker slot. An error is
// logged and the message is dispatched (the Limiter applies its own
// fail-open or fail-closed policy and returns a Spill when it wants one).
type Limiter interface {
	Admit(ctx context.Context, m *Message) (Verdict, error)
}

// BacklogCounter keeps the per-tenant backlog counters the gateway's
// admission reads (DESIGN.md §5). The worker calls Done when messages
// end: deleted after success, dead-lettered or dropped. Moves between
// queues do not end a message. Nil means no counters.
//
// The calls are made by a goroutine of the worker's own, apart from the
// deletes, with n the tenant's messages that ended since its last call,
// each call bounded by a short timeout (2 s). A failed call is logged and
// its count dropped, not retried: the counter is an estimate that its
// owner reconciles. Stop makes the calls for what is pending before it
// returns.
type BacklogCounter interface {
	Done(ctx context.Context, tenant string, n int64) error
}

// Deduper remembers which messages ran, by id (dedupe.Memory,
// dedupe.Redis).
type Deduper interface {
	Claim(ctx context.Context, id string) (dedupe.Claim, error)
	Complete(ctx context.Context, id, token string) error
	Release(ctx context.Context, id, token string) error
	Renew(ctx context.Context, leases []dedupe.Lease) error
}

var (
	_ Deduper = (*dedupe.Memory)(nil)
	_ Deduper = (*dedupe.Redis)(nil)
)
