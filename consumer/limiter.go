package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/parking"
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
	// an old message, which must not hold up fresh work, or one spilled
	// for so long that it will be old when it comes back (Reason says
	// why it was spilled). A message
	// already there, or without a backlog queue, is sent to its own queue
	// again, delayed. Not counted as a delivery either.
	ToBacklog
	// Drop deletes it unprocessed, counted as dropped
	// (fairq_worker_processed_total{outcome="dropped"}): a message past
	// its drop age; with Reason ReasonPurged, counted as purged: a message
	// enqueued before its tenant's purge instant. The tenant's backlog
	// goes down.
	Drop
	// Park holds it unstarted while its tenant is paused (package
	// parking), without counting a delivery: it waits in flight on the
	// overflow queue until the tenant is resumed.
	Park
	// Hold keeps the message in its slot, unstarted, until Verdict.Wake
	// is closed or Verdict.Delay has passed, then asks the Limiter again:
	// its tenant's next token or slot comes within a moment, sooner than
	// a spill could bring it back (SQS delays are whole seconds). Done,
	// if not nil, is called when the hold ends, before the Limiter is
	// asked again. A Limiter answers Hold only while Message.Spare says
	// the worker has other slots free, and bounds Message.Held: the
	// message keeps its slot and, through the heartbeat, its visibility.
	Hold
)

// ReasonPurged is the Reason of a Drop for a purged message.
const ReasonPurged = "purged"

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
	case Park:
		return "park"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Verdict is a Limiter's decision about one message.
type Verdict struct {
	Action Action
	// Delay is the DelaySeconds of a Spill or ToBacklog move, 0–900 s;
	// for a Hold, the longest it lasts.
	Delay time.Duration
	// Wake, for a Hold, ends it early when closed: the tenant's slot may
	// be free. Nil waits out Delay.
	Wake <-chan struct{}
	// Lag, for a Hold ended by Wake, is how long the message then waits,
	// still in its slot and still held, before the Limiter is asked
	// again: others woken by the same slot given back, on this worker or
	// another, ask first (a tenant's fresh work before its old).
	Lag time.Duration
	// Reason labels a move in fairq_worker_spilled_total, e.g. "rate",
	// "concurrency" or "aged".
	Reason string
	// Done, if not nil, is called once when a dispatched message's job
	// ends, whatever its outcome: the place to release a concurrency
	// permit. For a Hold, it is called when the hold ends (after its
	// Lag). It is not called for other actions.
	Done func()
	// Exact, for a Spill or ToBacklog move, makes the message visible
	// again when Delay is up rather than at the whole second after it
	// (SQS delays are whole seconds): the worker sends the move once the
	// part of Delay below a second has passed, its slot given back
	// meanwhile.
	Exact bool
}

// Limiter decides, for each received message that is not a periodic task,
// whether it runs now: the seam of the per-tenant worker policy (package
// spillover: drop and backlog ages, then the rate and concurrency limits
// of package throttle). Nil runs everything.
//
// Admit must not block for long: it holds a worker slot. A Limiter that
// wants to wait a moment for a token or a slot answers Hold, and the
// worker waits and asks again. An error is logged and the message is
// dispatched (the Limiter applies its own fail-open or fail-closed policy
// and returns a Spill when it wants one).
type Limiter interface {
	Admit(ctx context.Context, m *Message) (Verdict, error)
}

// Backlog is told of the messages that end (deleted after success,
// dead-lettered or dropped; moves between queues do not end a message),
// one Done per message, from the batch callbacks of the deletes: Done
// must not block. backlog.Tracker gathers them per tenant and makes the
// calls to the counter apart, so that a counter that does not answer
// never holds up a delete batch, whose messages would run out of
// visibility and be delivered again; backlog.Off keeps no counts.
type Backlog interface {
	Done(tenant string, n int64)
}

var (
	_ Backlog = (*backlog.Tracker)(nil)
	_ Backlog = backlog.Off{}
)

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

// Parker records parked messages (parking.Memory, parking.Redis), so that
// a worker can wake them when their tenant is resumed.
type Parker interface {
	Park(ctx context.Context, tenant string, s parking.Spot) error
}

var (
	_ Parker = (*parking.Memory)(nil)
	_ Parker = (*parking.Redis)(nil)
)
