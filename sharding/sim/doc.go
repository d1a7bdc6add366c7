// Package sim is a discrete-event simulator of fairq's queue pool that
// shows, in numbers and a chart, the isolation shuffle sharding buys
// (`fairq-sim`).
//
// Tenants send messages as Poisson processes into a pool of N queues; a
// fleet of consumers serves them. One tenant is noisy (by default 100× a
// quiet tenant's rate, with consumers at 2× the total quiet rate, so the
// system is overloaded and every queue the noisy tenant writes to grows
// without bound), or several are (Config.Noisy). Each run is made twice,
// with and without the noisy tenants, under four strategies of queue
// choice:
//
//   - shared: every tenant on one queue;
//   - hash: each tenant on one queue, by hash of its id;
//   - shard-random: each tenant on a shuffle shard of k queues (the same
//     shards as sharding.Pool), a random queue of it per message;
//   - shard-shallowest: the same shards, the shallowest queue per message,
//     estimated as fairq's gateway does: a reading of every queue's depth
//     each poll interval plus the messages sent since.
//
// The consumers model the worker: a fixed number of slots, each taking the
// next message as soon as it is free, from the live queues in turn
// (round-robin, skipping empty queues), so the fleet is work-conserving and
// gives every non-empty queue an equal share of its capacity. Service
// times are exponential (or fixed) with a configured mean.
//
// A message's latency runs from its send to the end of its service. The
// tenants send for Config.Duration; then the consumers drain the queues, so
// that every message's latency is known. Under the shared queue, which is
// FIFO, draining changes nothing; a message stuck behind the noisy tenant
// in a queue of a pool may be served somewhat sooner than it would be if
// the noisy tenant kept sending (its queue gets the whole fleet once the
// others run dry), so harm is if anything understated. A quiet tenant is
// hurt when its p99 latency exceeds Config.Hurt times its p99 in the same
// run without the noisy tenants. With several noisy tenants, a quiet
// tenant's queues in common are those it shares with any of them. Every
// random draw comes from PCG streams seeded by Config.Seed, one per tenant
// and purpose, so the same seed gives the same result, and the runs with
// and without the noisy tenant, and the strategies, see the same quiet
// arrivals and service times (common random numbers): differences between
// them are the noisy tenant's doing, not noise.
//
// Sweep sizes a pool (`fairq-sim sweep`): for tenant counts, shares of
// them noisy, and pools of N queues with shards of k, the share of quiet
// tenants the combinatorics expects to be hurt (sharding.Covered) beside
// the share a shard-shallowest simulation hurts, and the pool with the
// fewest queues that keeps the expected share within a tolerance.
package sim
