// Package overview is what an operator sees of a running fleet: the
// document behind GET /admin/v1/overview and the console.
//
// Every process keeps a Recorder: the gateway counts each tenant's
// messages accepted and refused (by reason), the worker those spilled (by
// reason), started and ended, and the age of each at its first attempt.
// A Report is the counts over the last minute. With Redis, each process
// publishes its Report every two seconds on a Board (one hash, a field
// per process); without Redis, the overview is the one process's.
//
// A gateway's Collector builds the Document: the depth of every queue,
// sampled every 10 s, with the last 15 minutes of them; for each tenant of
// the registry its state, its rates summed over the fleet's Reports, its
// backlog, its messages in flight against its concurrency, its process
// rate against its limit, the p95 age at first attempt (merged from the
// workers' buckets, exact to within a bucket of AgeBounds) and its shard;
// the workers of the fleet registry with their slots in use and
// messages/s. A Document answers for a second, so that consoles polling
// once a second cost one build per gateway.
//
// # Noisy tenants
//
// A tenant is noisy while its share of the fleet's messages in flight, or
// of the processing time of the last minute, is above NoisyShare (10%)
// and the fleet has at least NoisyMinInFlight (30) in flight: the rule
// SQS fair queues apply to their message groups. It is shown in the
// Document and exported as fairq_tenant_noisy{tenant}. It does not act on
// its own: a tenant's limits (concurrency, process_rate) already cap what
// it can take, and shuffle sharding keeps it off most of the others'
// queues. Noisy says who is using the room the limits leave, which is
// the question an operator asks when the fleet is slow: whether to lower
// the tenant's limits, pause it, or add workers.
package overview
