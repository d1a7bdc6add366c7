// Package consumer is the worker daemon of fairq (DESIGN.md §6): it takes
// messages off the queues and hands each to the application, the way
// Elastic Beanstalk's aws-sqsd does, only fair, throttled and heartbeated.
//
// A Worker receives from the live queues of the pool, from the overflow
// queue when it has spare capacity (or, once overflow has waited 2 s for
// it, in turn with the live queues until overflow is drained, so that it
// is not starved by a steady live load), and from the backlog queue with
// the capacity the live work leaves (none while fresh messages wait, half
// of it while the live queues keep up, all of it once they are empty), and
// only while it has free slots (Config.Connections): it never holds more
// messages than it can run. For each message it asks the Limiter, the
// per-tenant policy (package spillover: older than its drop age, dropped;
// older than the backlog age, moved to the backlog queue; a tenant over
// its rate or concurrency, moved to the overflow queue with a delay), then
// runs the Handler under a heartbeat and applies the outcome:
//
//   - success (nil, or 2xx from the application): deleted, in
//     DeleteMessageBatch calls of up to ten; the tenant's backlog counter
//     goes down;
//   - a *RetryAfterError (429 or 503 with Retry-After): back after that
//     delay, not counted as a failure nor as a delivery. The message is
//     sent again to its queue with that delay and the delivered copy
//     deleted, so that the receive is not counted (the copy has a new
//     message id; a visibility change would be counted). Beyond SQS's
//     900 s delay limit it is sent with 900 s and the time it may run
//     again in fairq-meta (NotBefore); a worker that receives it earlier
//     sends it back with the rest of the wait (at most 900 s), without
//     running it;
//   - any other error, a timeout (InactivityTimeout) or a connection error:
//     back after an exponential backoff with full jitter (uniform between
//     0 and BackoffBase·2^(n-1), capped by ErrorVisibilityTimeout);
//   - after MaxRetries attempts, counted across queue moves through
//     fairq-meta (its attempts plus the queue's receive count): moved to the
//     dead-letter queue (sent, then deleted) with the last error in
//     fairq-meta. A message already delivered more than MaxRetries times
//     without an outcome (its worker crashed each time) goes there without
//     being run again.
//
// Moves between queues keep the body and attributes and carry the attempts
// in fairq-meta; a move that is not an attempt (spill to overflow or
// backlog, Retry-After, a message put off until its NotBefore) does not
// count the current delivery. A message received before its NotBefore is
// put off before the Limiter is asked (a message from elsewhere
// that already has SQS's ten attributes has no room for fairq-meta: it
// comes back after 900 s and runs early, and the application answers
// Retry-After again). Such a move
// with nowhere else to go (a spill without an overflow queue, a ToBacklog
// of a message already in the backlog queue) sends the message to its own
// queue again with its delay, never changes its visibility: SQS would
// count that receive, and a message held back by its limits more often
// than MaxRetries would be dead-lettered without ever running.
//
// Receiving costs money (SQS bills every receive, empty or not), so each
// queue has a receive loop that long-polls for one message while it is
// idle and receives in batches of ten while it is busy, pausing
// ReceiveWindow after a partial batch so that messages gather; deep queues
// get extra loops while slots are free. See poller.go for the rules.
// Deletes, visibility changes and moves are batched per queue
// (BatchWindow). At a steady load that costs about a third of an SQS
// request per message, sends included (BenchmarkWorkerSQS).
//
// Redrive moves dead letters back to their tenant's shard (`fairq dlq
// redrive`, POST /admin/v1/dlq/redrive). Periodic tasks are enqueued by
// package schedule; this package pushes them.
//
// # The application contract
//
// Push POSTs each message to the push URL with the aws-sqsd headers
// (DESIGN.md §7, see Header): Content-Type, User-Agent
// "aws-sqsd/1.11 (fairq/<version>)", X-Aws-Sqsd-Msgid, X-Aws-Sqsd-Queue
// (the queue's name), X-Aws-Sqsd-First-Received-At (ISO 8601 UTC to the
// second, as aws-sqsd: 2006-01-02T15:04:05Z), X-Aws-Sqsd-Receive-Count
// (deliveries across queue moves), X-Aws-Sqsd-Attr-<name> for each user
// attribute, X-Fairq-Tenant, X-Fairq-Enqueued-At (ISO 8601 UTC with
// milliseconds) and traceparent; a periodic task goes to its own path with
// X-Aws-Sqsd-Taskname and X-Aws-Sqsd-Scheduled-At and no body. Attribute
// values come from whoever put the message on the queue, so no value is
// sent that could inject a header: see Header. The built-in LogHandler
// logs each message without its body and succeeds (`fairq dev` without a
// push URL). Library users pass their own Handler or HandlerFunc.
//
// # Heartbeat
//
// While a job runs, the worker extends its message's visibility (every
// VisibilityTimeout/3, in ChangeMessageVisibilityBatch calls) so that a
// long job is not delivered twice, never past SQS's limit of 12 hours from
// the receive; the extension stops when the job ends, at the latest at
// InactivityTimeout. Each extension call gives up after the heartbeat
// interval (at most 10 s), and a job that ends waits only for the call
// extending its own message, so a queue that stops answering holds up
// neither the outcomes nor Stop. If an extension fails, the running job is
// not cancelled: the failure is logged and counted, and retried at the
// next beat while the message is still invisible. Cancelling would not help —
// once its visibility has run out the message is delivered again whatever
// this worker does — and it would throw away work that may be nearly done.
// The price is a possible duplicate, which standard queues demand that
// handlers tolerate anyway; if the handler then succeeds, its delete may
// fail (stale receipt handle) and the other delivery runs it again.
//
// # Shutdown
//
// Stop(ctx) stops receiving, lets running jobs finish until ctx ends (the
// grace period), then cancels those left and gives their messages back at
// visibility 0, flushes pending deletes and returns. The context given to
// Start only carries values: a signal context ending on SIGTERM does not
// cut jobs short. A worker that dies (its process killed) leaves the
// messages it held to come back after their visibility timeout.
//
// # Choices where the design is silent
//
//   - A message without fairq-meta (put on a queue by something else) is
//     treated as enqueued when it was sent, with no earlier attempts.
//   - A message of the backlog queue that the Limiter spills is sent to
//     the backlog queue again with the delay, not to overflow: from
//     overflow the Limiter's age check would move it straight back, two
//     moves (and two "aged" spills counted) for each spill.
//   - A Limiter error dispatches the message (the Limiter applies its own
//     fail-open or fail-closed policy); periodic tasks bypass the Limiter
//     and the backlog counter.
//   - The backlog counts (Config.Backlog, a backlog.Tracker) are told of
//     the messages that ended without waiting: the tracker makes the calls
//     to the counter apart, one per tenant for all that ended since its
//     last round, so that a counter that does not answer (Redis
//     partitioned) cannot hold up a delete until the message's visibility
//     runs out and it is run again. A call that fails is dropped and
//     counted (fairq_worker_backlog_decrements_dropped_total): the counter
//     is an estimate, reconciled with the queues' depths (package
//     backlog).
//   - Without an overflow (or backlog) queue, a spill is sent to its own
//     queue again with its delay, and counted in fairq_worker_spilled_total
//     like any spill; without a dead-letter queue a dead letter is
//     deleted.
package consumer
