// Package throttle holds the limits fairq puts on each tenant's traffic.
//
// Rate limits are token buckets keyed by a string (a tenant's ingest or
// processing key): a Limit of Rate tokens a second and a bucket of Burst,
// asked through RateLimiter.Allow for up to n tokens at once. Three
// implementations share that interface:
//
//   - LocalLimiter keeps the buckets in process with golang.org/x/time/rate:
//     one machine, no shared state.
//   - RedisLimiter keeps them in Redis as GCRA state through
//     github.com/go-redis/redis_rate/v10, so one limit holds across every
//     process of a fleet; Redis's clock is the only clock, so gateways whose
//     clocks disagree still agree on the limit.
//   - FailoverLimiter asks a RedisLimiter and, while Redis is unreachable,
//     either falls back to a LocalLimiter (fail open: each process then
//     enforces the whole limit on its own, so a fleet of n admits up to n
//     times the limit until Redis is back) or refuses with ErrUnavailable
//     (fail closed). It says so once in the log and in the metrics
//     fairq_redis_degraded and fairq_redis_fallback_total, labelled with
//     its Component. Given a ScaledLimiter as Fallback whose FactorFunc is
//     Share(fleet size), each process enforces its share of the limit
//     instead, rate and burst divided by the number of processes last
//     known to share it, which keeps a fleet near the limit (the workers
//     do this, with the fleet size of package fleet).
//
// Concurrency limits are semaphores keyed the same way: at most limit
// holders of a key at once, asked through Semaphore.TryAcquire, which never
// waits, with the limit passed on every call. A Permit is released once,
// when its holder is done.
//
//   - LocalSemaphore counts holders in process.
//   - RedisSemaphore holds them fleet-wide in Redis as leases with an
//     expiry, a sorted set per key, taken by one Lua script. Between Start
//     and Stop it renews every lease of the process in one round trip
//     every RenewEvery (Lease/3, Lease 30 s by default) and removes
//     released leases in batches; a crashed process stops renewing, so its
//     slots come back within one Lease.
//   - FailoverSemaphore asks a RedisSemaphore and, while Redis is
//     unreachable, counts slots in process (fail open), each process
//     allowing itself ⌈limit/n⌉ for a fleet of n, or refuses with
//     ErrUnavailable (fail closed), with the same log line and metrics as
//     FailoverLimiter.
//
// Work that needs a slot and a token both, as a message a worker starts
// does, asks an Admitter for a Need: every slot and token of it, or none.
// Separately asks a Semaphore and a RateLimiter one by one; a
// RedisAdmitter takes a RedisSemaphore's slots and the tokens of the
// buckets a RedisLimiter of the same prefix keeps in one round trip, one
// Lua script, so that a refused token leaves no slot to give back (on a
// Redis Cluster the keys of a Need must share a hash tag); a
// FailoverAdmitter asks a RedisAdmitter and, while Redis is unreachable,
// a FailoverSemaphore and a FailoverLimiter one by one, which answer as
// they do without Redis.
//
// A Pacer hands out turns of a key at a rate, so that work refused by a
// rate limit can be put off until its own turn rather than all until the
// next token. A Pacer's line is its process's; a RedisPacer keeps one
// line per key in Redis for every process that shares it, and a
// FailoverPacer asks a RedisPacer and, while Redis is unreachable, hands
// out turns of its own at its share of the rate (rate ÷ fleet size).
//
// The limit is passed on every call rather than configured per key, so a
// caller can shrink it as a tenant's backlog grows (Limit.Scale) and a
// changed tenant limit applies at its next request. A Rate of zero, or
// less, means no limit. A Decision says how many tokens were granted and
// carries what the HTTP answer needs: the tokens remaining, the time until
// one more token (RetryAfter, truthful: a caller that waits that long finds
// a token unless others of the same key took it first) and the time until
// the bucket is full again (ResetAfter).
package throttle
