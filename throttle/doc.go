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
//     fairq_redis_degraded and fairq_redis_fallback_total.
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
