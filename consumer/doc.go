// Package consumer is fairq's worker daemon: it takes messages off the
// queues of the pool and hands each to the application over local HTTP,
// the way Elastic Beanstalk's aws-sqsd does, only fair, throttled and
// heartbeated.
//
// A Worker receives from the live, overflow and backlog queues while it
// has free slots (Config.Connections), so that it never holds more
// messages than it can run (poller.go). In a fleet it watches only its
// share of the live queues, by rendezvous hashing of queue and worker
// over the fleet's registry, and follows the fleet's changes (assign.go,
// share.go). For each message it asks the
// Limiter (the per-tenant policy of package spillover: drop and backlog
// ages, concurrency and rate), which may move it to another queue or have
// the worker hold it a moment for its tenant's next token or slot, claims
// its id (package dedupe), runs the Handler under a heartbeat that keeps
// the message invisible, and carries out the outcome: a delete on success, a later delivery with backoff on
// failure, a delay on Retry-After, the dead-letter queue after MaxRetries
// attempts (job.go). Deletes, visibility changes and moves go in batch
// calls (batcher.go). Push is the Handler that speaks aws-sqsd's contract
// to the application; Redrive moves dead letters back to their tenant's
// shard.
//
// docs/architecture.md tells how the parts fit: the receive loops and how
// they share the slots, the cost in SQS requests, the outcomes, the
// shutdown and the choices where aws-sqsd gives no lead.
package consumer
