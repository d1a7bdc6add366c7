// Package sharedpoll lets the processes of a fleet that all need the same
// periodic reading (the depths of the queues) take it once an interval
// between them instead of once each.
//
// A Poller keeps the latest reading in Redis with the time it was taken.
// Each Poll adopts that reading while it is younger than the interval;
// once it is older, the first process to take a short lease polls and
// shares the result, and the others adopt the reading they find, older
// but the newest there is, until the new one lands. No leader is elected
// or replaced: whichever process asks first after the reading ages polls,
// so a fleet makes about one poll an interval whatever its size, and a
// process that stops or dies leaves the polls to the others at once.
//
// If Redis fails, each process polls on its own until it is back, and
// says so through its degrade.Dependency: once in the log for each
// transition, and in fairq_redis_degraded{component}. The gateway's depth
// tracker (package sharding) and the worker's autoscaling gauges
// (package fleet) each hold one, under keys of their own.
package sharedpoll
