package fleet

import (
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Every Redis key of the package is built here.

// workersKey is the sorted set of the fleet's workers: worker id → time of
// its latest heartbeat (unix ms, Redis's clock), plus half a millisecond
// while the worker reports itself saturated: the flag rides on the
// heartbeat in the one key, which readers of the time round down.
func workersKey(prefix string) string { return prefix + "fleet:workers" }

// departuresChannel is the Pub/Sub channel on which a worker that leaves
// the fleet publishes its id, so that the others look at the registry at
// once.
func departuresChannel(prefix string) string { return prefix + "fleet:departures" }

// depthsKey holds the fleet's latest reading of the queues' visible
// messages for autoscaling (JSON, see visibleReading), and depthsLockKey
// the lease of the worker taking the next one. They contain a hash of the
// queue names, so that fleets of different pools can share a Redis and a
// prefix without mixing their readings.
func depthsKey(prefix string, queues []string) string { return depthsBase(prefix, queues) + "depths" }

func depthsLockKey(prefix string, queues []string) string {
	return depthsBase(prefix, queues) + "depths-lock"
}

func depthsBase(prefix string, queues []string) string {
	return prefix + "fleet:" + strconv.FormatUint(xxhash.Sum64String(strings.Join(queues, "\n")), 16) + ":"
}
