// Package sharding spreads tenants over the pool of live queues with shuffle
// sharding and picks, for each message, the shallowest queue
// of its tenant's shard.
//
// A Pool of N queues gives every tenant a Shard: k distinct queue indices
// derived from the xxhash of the tenant id, the same in every process and
// every release, and spread uniformly over all C(N,k) combinations. Two
// tenants then share their whole shard with probability 1/C(N,k) (1/28 for
// the default N=8, k=2; 1/4950 for N=100, k=2; see Overlap), so a noisy
// tenant can fill the queues of its own shard without taking all of any
// other tenant's queues.
//
// A Tracker keeps an estimate of the depth of each queue of the pool and
// implements the pick the gateway makes on every enqueue:
//
//	q := tracker.Pick(tenant) // index into queue.PoolNames(prefix, n).Live
//	// send to that queue; if the send fails:
//	tracker.Sent(q, -1)
//
// Pick counts the message towards the chosen queue's estimate itself, at
// once, so that concurrent picks see it before the send is even batched;
// Sent corrects that count (a negative n takes back a message that was not
// sent) or adds messages sent to a live queue by other paths.
//
// The estimate of a queue is its last reading (ApproximateNumberOfMessages +
// ApproximateNumberOfMessagesNotVisible, read about once a second) plus what
// this process sent to it since that reading was taken, so that a burst
// between two readings spreads over the shard instead of piling onto one
// queue. With Redis, the readings are shared by the fleet: a reading is
// cached in Redis with the time it was taken, and a tracker that finds it
// older than the interval takes a short refresh lock and polls the queues
// itself, so the fleet makes about one poll per interval whatever its size
// and no leader has to be elected or replaced. If Redis fails, each tracker
// polls on its own until it is back, and says so once in the log and in
// fairq_redis_degraded{component="queue_depths"}.
//
// When the readings are older than Config.StaleAfter (polls failing, or none
// yet), Pick chooses at random within the shard, never always the same
// queue, and the gauge fairq_shard_depth_stale says so.
package sharding
