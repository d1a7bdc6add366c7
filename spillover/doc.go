// Package spillover is the worker's per-tenant policy: it decides, for
// each message a worker receives, whether it is too old to run (dropped,
// or moved to the backlog queue), whether its tenant may start it now, or
// whether it is spilled to the overflow queue, delayed. Its Limiter is the
// consumer.Limiter of the worker; the worker does the moves.
//
// For a message of tenant T, with T's limits read from the tenant registry
// at every message (so that a change made through the admin API applies
// at T's next message, without a restart):
//
//   - If it is older (since the gateway accepted it) than T's drop_age, or,
//     when T sets none, than Config.DropAge (worker.drop_age), it is
//     dropped, reason "aged": deleted unprocessed and counted.
//   - Otherwise, if it is older than Config.BacklogAge
//     (worker.backlog_age) and not from the backlog queue, it is moved
//     there, reason "aged": old work must not hold up fresh work (see the
//     worker's backlog loop). It is delayed to its turn in the line of
//     T's old work (below), turns coming at the pace T may run them (its
//     process_rate, or its concurrency ÷ its mean job time when lower),
//     to the turn exactly (consumer.Verdict.Exact: the worker sends the
//     move once the part of the delay below a second has passed). The
//     one backlog queue holds every tenant's old work in the order it
//     was moved; undelayed, after an outage the tenants whose messages
//     were moved first had theirs at hand and the others waited behind
//     them (the slowest drained at 32-36/s of the 40 allowed), while
//     paced each tenant's come back at its own rate. Delayed to the whole
//     second before the turn, a tenant's turns of a second came back at
//     one instant and the queue held its old work in clumps of a
//     second's turns, behind which another tenant's waited up to 2 s
//     (the slowest drained at 33.4-37.2/s); at the turn, the tenants'
//     old work comes back interleaved, as their turns fall. Neither
//     takes a slot or a token.
//   - Otherwise, if T has concurrency messages in progress fleet-wide, the
//     message is held (below) while the worker has slots to spare, one
//     message per slot of T's at this worker's share; otherwise it is
//     spilled with a short jittered delay, uniform between half and one
//     and a half Config.ConcurrencyDelay (1–3 s by default), reason
//     "concurrency": soon enough that a slot freed is used, spread so that
//     spilled messages do not all come back at once. When more of T's
//     messages wait than its slots free up in that time, each gets
//     instead its turn at the rate they free up (concurrency ÷ T's mean job
//     time on this worker) or T's process_rate, whichever is lower, in
//     the same line as the messages spilled for rate (below), so that a
//     deep backlog of a tenant held at its limits costs about one move per
//     message it may run rather than one per waiting message every few
//     seconds.
//   - Otherwise, if T is over its process_rate, the message is held when
//     its token comes within its HoldMax (below); otherwise it is spilled,
//     reason "rate", with the delay of its own turn: not before the rate
//     limiter's wait for the next token, and 1/rate after the turn of the
//     message spilled before it, capped at SQS's 900 s, so that spilled
//     messages come back at the tenant's rate instead of all at the next
//     token, and each costs about one move while its tenant is behind.
//     SQS delays are whole seconds, so they come back in clumps of about
//     a second's worth; those the bucket cannot take at once are held
//     for their token.
//   - Otherwise it runs, holding a concurrency slot until its job ends
//     (Verdict.Done).
//
// Turns are kept fleet-wide with a Config.Pacer (a throttle.RedisPacer):
// one line per tenant, and one for its old work while its fresh work
// comes, whatever the reason of the spill, so that spilled messages come
// back at the tenant's rate whichever workers spilled them. Without one,
// or while it fails, each worker keeps its own line at its share (the
// rate ÷ the fleet size), which comes back slower than the rate when the
// workers did not spill alike: once the worker that spilled less has given
// out its turns, the rest come back at the other's share alone.
//
// A spill costs whole seconds: SQS delays are whole seconds, and a slot
// freed a moment after a spill stays idle until the message is back. So a
// message whose token is due, or whose tenant's slot may free, within
// Config.HoldMax (1 s by default, in all) is held instead
// (consumer.Hold): it keeps its worker slot and its visibility, unstarted,
// and is admitted again at its token, or when a slot of its tenant is
// given back, and in any case every 100 ms. A slot given back wakes one
// message held for it, the longest held, not every one: on a busy tenant
// they all asked for the one slot at once. With Redis, the semaphore
// tells every worker of the slots given back, its own included, once
// they are free in Redis (a throttle.FreedNotifier); without, a job that
// ends wakes one of the messages held on its worker.
// The worker holds a message only while it has other slots free
// (consumer.Message.Spare), so that holding starves no other work; a
// message held for HoldMax in all is spilled as above. The exception is
// old work (below) with most of its tenant's slots, held in waves up to
// its whole concurrency on the slots its receives reserved (see
// Limiter.holdForSlot). Held messages are counted in
// fairq_worker_tenant_held_total{tenant,reason}.
//
// Old work yields to fresh work. While fresh messages of T (not from the
// backlog queue) keep coming (one within the last 5 s: to the fleet, as a
// Config.Meter measures them, otherwise to this worker), a
// message from the backlog queue (consumer.Message.Backlog) may use only
// what T's fresh messages leave of T's concurrency and process_rate (a
// semaphore and a bucket of its own, on top of T's, which it also takes a
// slot and a token of): fresh work keeps its measured need with headroom,
// up to half of each (Limiter.yieldTo), so that while T's backlog
// drains, T's fresh messages are not spilled behind it, and what they do
// not use goes to the backlog rather than idling. Over its part of the
// slots it is held like any other message, but for a slot of its own
// semaphore and in holds counted apart, so that a held old message never
// takes a fresh one's hold; woken, it asks for its slot 5 ms after the
// fresh work woken by the same slot given back (consumer.Verdict.Lag),
// so that fresh work held on any worker takes it first. Over its part
// of the rate it is held, apart too, only while it has most of T's
// slots (a wave, above). Spilled, it is sent back to the backlog queue,
// its turns in lines of their own. Once T has nothing but old work, its
// backlog has T's whole limits.
//
// Concurrency is checked first: a slot taken and given back costs little,
// while a rate token taken for a message that then could not run would be
// lost to the tenant. Little is not nothing: with Redis a slot given back
// is a script and a message to every worker. So each worker remembers,
// per bucket, until when its last refusal said the bucket has no token
// (no token comes sooner, whatever the other workers do), and a message
// that comes meanwhile goes straight to its rate hold or turn, without a
// slot. In the fleet's noisy-neighbour run that cut the semaphore's asks
// by 18% and its releases by 23%.
//
// The limits are the throttle package's: a rate limiter (GCRA through
// redis_rate with Redis, golang.org/x/time/rate without) and a semaphore
// (leases in Redis, renewed by the semaphore itself, so that a crashed
// worker's slots come back within one lease; a counter in process
// without). With Redis, wire them through throttle's failover components so
// that when Redis is unreachable each worker falls back to local limits,
// rate and concurrency divided by the number of workers last known (a
// fleet.Fleet's Last), logs it once and sets fairq_redis_degraded (the
// process's one set of those metrics, redisMetrics below, made by
// degrade.NewMetrics), and goes back to the shared limits when Redis
// answers:
//
//	rate, _ := throttle.NewFailoverLimiter(throttle.FailoverConfig{
//		Primary:   redisLimiter,
//		Fallback:  &throttle.ScaledLimiter{Limiter: throttle.NewLocalLimiter(throttle.LocalConfig{}), FactorFunc: func() float64 { return throttle.Share(f.Last()) }},
//		Component: "worker_ratelimit", FailClosed: !failOpen, Logger: log, RedisMetrics: redisMetrics,
//	})
//	sem, _ := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
//		Primary: redisSemaphore, FleetSizeFunc: f.Last,
//		Component: "worker_semaphore", FailClosed: !failOpen, Logger: log, RedisMetrics: redisMetrics,
//	})
//	lim, _ := spillover.New(spillover.Config{Tenants: registry, Defaults: cfg.Defaults,
//		Rate: rate, Semaphore: sem, FleetSizeFunc: f.Last, Registerer: reg})
//
// Failing closed (redis.fail_open: false), a message whose limits cannot be
// checked is spilled like a concurrency spill, reason "unavailable", rather
// than run unchecked. Any other error of the limits goes to the worker,
// which logs it and runs the message.
//
// The worker makes every move: a copy with the body, the attributes and
// fairq-meta (enqueue time, attempts) sent first, in batches of up to ten,
// and the delivered copy deleted only once the send succeeded, so that a
// failed move leaves the message where it was.
//
// Metrics, with the tenant label bounded (the first Config.MaxTenantLabels
// tenants of the registry seen, 100 by default; the others, and tenants
// the registry does not know, count as "other"):
// fairq_worker_tenant_in_flight{tenant} and
// fairq_worker_tenant_spilled_total{tenant,reason}. The worker's own
// fairq_worker_spilled_total{reason} counts every move by reason, "aged"
// included.
//
// Choices where the design is silent: a message of a tenant the registry
// does not know (deleted since it was sent, or sent without fairq-tenant)
// runs under the default limits, with limits of its own tenant id; a
// tenant whose id is "other" shares its label with the others.
package spillover
