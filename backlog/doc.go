// Package backlog counts, per tenant, the messages fairq has accepted and
// not yet finished: the backlog the gateway's backpressure acts on. The
// gateway adds messages once SQS acknowledged them; the worker takes away
// a message when it ends (deleted after success, dead-lettered or
// dropped; a move between queues does not end it). With Redis the counts
// are shared by the fleet; without, they live in the process.
//
// A Counter holds the counts. A process holds a Tracker over it, a
// component with Start and Stop: its Add and Done never block (with
// Redis a goroutine applies them, gathered per tenant, so that a Redis
// that does not answer holds up no 202 and no delete), its Get answers
// admission with the process's own pending counts included, its outage
// is said once (package degrade), and between Start and Stop it
// reconciles the counts. A gateway and a worker that run apart without
// Redis keep no counts: Off.
//
// # Reconciliation
//
// The counter is an estimate, and a crash between a message's end and its
// Done, or between a send and its Add, leaves it wrong. Three rules keep
// an error from lasting:
//
//   - Order. The gateway adds only after SQS acknowledged the messages, so
//     a crash before the Add undercounts (admits a little more), never the
//     reverse. A Done that finds nothing to take takes nothing: the count
//     never goes below zero, so duplicate deliveries cannot push it
//     negative.
//   - Expiry. A tenant's count is kept in buckets by the time of the Add
//     (Config.Bucket, an hour by default). Done takes from the oldest
//     bucket first, and a bucket older than Config.Horizon (four days by
//     default, SQS's default retention; set it to the worker's drop_age
//     or the queues' retention) is dropped: a count no Done ever came for
//     is forgotten after Horizon at the latest.
//   - The queues' own count. Reconcile(total) caps every tenant's count at
//     total, the number of messages on all the queues (live, overflow and
//     backlog: visible, in flight and delayed), taking the excess from the
//     oldest buckets. No tenant can hold more messages than the queues do,
//     so a count above that is drift; when the queues drain, every count
//     returns to zero. The gateway's Tracker calls Reconcile about once a
//     minute with the larger of its last two readings of the depths,
//     since SQS's approximate counts lag behind sends.
//
// So a tenant can never be left blocked by a lost Done for longer than it
// takes the queues to hold fewer than its max_backlog messages, and never
// longer than Horizon.
//
// # Redis
//
// Each tenant has a hash of buckets (field: the bucket's start in unix
// seconds, value: a count) that expires Horizon after its last Add, and a
// set names the tenants with counts. Every multi-step update is one Lua
// script. Get is served from a cache of Config.MaxStale (100 ms), to which
// this process's own Adds are applied at once; Tracker.Fresh, for a
// refusal at max_backlog, from one at most FreshStale (10 ms) old. A
// Tracker keeps that cache fresh for the tenants asked for within its
// KeepFresh (2 s): every half of MaxStale it reads all their counts in
// one call (the keys share a slot), so that admission answers them from
// the cache instead of waiting on Redis for each message. Its cost is one
// call per 256 such tenants every 50 ms per gateway, against, before,
// one call per tenant every message or 100 ms, whichever was rarer.
package backlog
