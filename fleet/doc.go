// Package fleet knows the fleet of workers: how many run, and the signals
// to scale them on.
//
// A Fleet registers its worker in Redis, a sorted set of worker id → time
// of its latest heartbeat on Redis's clock, and beats every Heartbeat (5 s
// by default); a worker silent for three heartbeats no longer counts, so a
// crashed worker leaves the count within 15 s, and a stopped one at once.
// Each heartbeat also returns the fleet's size, which Last gives without a
// call: the shared limits of package throttle divide by it when Redis
// cannot be reached, each worker then enforcing its share of a tenant's
// limits locally. While Redis is unreachable the size stays what it was
// last known to be (the workers have no other way to learn it), a line is
// logged and fairq_redis_degraded{component="fleet"} is 1. Without Redis
// the fleet is the one process: Last and Size are 1.
//
// Each heartbeat also returns the ids of the workers alive, and which of
// them are saturated (every slot held a message since their previous
// heartbeat, which the heartbeat reports): Workers gives them, and
// whether this worker is in the registry, to the worker's receive loops,
// which share the live queues by them (package consumer).
//
// A worker that stops leaves the registry as it stops receiving (Leave),
// before its last jobs finish, and publishes its id on a Pub/Sub channel;
// every Fleet listens there and beats at once on hearing it, and Changed
// tells the receive loops that the workers changed. With one watcher per
// queue, the queues of a stopping worker so pass to the others within a
// Redis round trip, not when its jobs have finished and the others' next
// heartbeat has come. A lost announcement costs only that wait: the
// heartbeats find the change as before.
//
// Autoscaling computes fairq_backlog_per_instance and
// fairq_backlog_target_per_instance as the EC2 Auto Scaling guidance for
// SQS describes them: visible messages ÷ workers running, and acceptable
// latency ÷ time per message. Choices where the guidance leaves room:
//
//   - The visible messages are those of the live queues, the overflow and
//     the backlog queue: all of them wait for a worker. Messages delayed
//     in overflow are not counted until their delay ends (they cannot be
//     worked before, whatever the fleet's size), nor is the dead-letter
//     queue (no worker drains it).
//   - The time per message is the mean processing time of the jobs that
//     ended in the last minute divided by the worker's slots
//     (worker.connections), since a worker runs that many at once; with
//     one slot it is the guidance's formula as written. Without a job in
//     the window the target keeps its last value; before the first job it
//     is not exported, rather than exported as a number that would scale
//     the fleet on nothing.
//   - The queues are read every 10 s by default, once for the whole fleet
//     with Redis: the reading is shared there, and whichever worker finds
//     it older than the interval takes a short lease and reads anew
//     (package sharedpoll), so the fleet makes about N + 2
//     GetQueueAttributes calls per interval whatever its size, where
//     each worker used to. The others adopt the shared reading, at most
//     about two intervals old. While Redis cannot be reached each worker
//     reads the queues itself, says so once in the log and in
//     fairq_redis_degraded{component="autoscaling"}, and
//     fairq_backlog_readings_total{source} counts the readings taken
//     (poll) and adopted (redis). Every worker exports the same values,
//     so a policy may use any one, or the average.
package fleet
