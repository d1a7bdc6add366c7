package sharding

import (
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// keys are the Redis keys of a tracker; every key the package uses is built
// here. They contain a hash of the pool's queue names, so that deployments
// with different pools can share a Redis and a prefix without mixing their
// readings.
type keys struct {
	depths string // string: the shared reading, JSON (see reading)
	lock   string // string: the refresh lock, holding its owner's token
}

func newKeys(prefix string, queues []string) keys {
	pool := strconv.FormatUint(xxhash.Sum64String(strings.Join(queues, "\n")), 16)
	base := prefix + "shard:" + pool + ":"
	return keys{
		depths: base + "depths",
		lock:   base + "depths-lock",
	}
}
