package spillover

import (
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// The keys of a tenant's limits in the throttle limiters and semaphores;
// the Redis implementations put their own prefixes in front. Each carries
// the tenant's hash tag, so that one Redis script can take a message's
// slots and tokens together on a Redis Cluster (throttle.RedisAdmitter).

// tagged returns kind followed by the hash tag of a tenant's keys: its id
// in braces, in one string built at once (Admit builds several at every
// message). An id that cannot name a tenant (a message sent to a queue by
// hand may carry any tenant, or none) could hold a brace: it is tagged by
// its hash instead.
func tagged(kind, id string) string {
	if tenant.ValidID(id) {
		return kind + "{" + id + "}"
	}
	return kind + "{#" + strconv.FormatUint(xxhash.Sum64String(id), 36) + "}"
}

// RedisKeys returns the Redis keys of tenant id's limits in the workers,
// under the prefix the workers give their throttle semaphore and buckets:
// the keys one script takes a message's slots and tokens in
// (throttle.RedisAdmitter), all in one hash slot of a Redis Cluster.
func RedisKeys(prefix, id string) []string {
	return throttle.RedisAdmitKeys(prefix, prefix, throttle.Need{
		Slots:  []throttle.Slot{{Key: concurrencyKey(id)}, {Key: backlogConcurrencyKey(id)}},
		Tokens: []throttle.Token{{Key: processKey(id)}, {Key: backlogKey(id)}},
	})
}

// processKey is the key of a tenant's process_rate bucket (the gateway's
// ingest_rate bucket is "ingest:" + id).
func processKey(id string) string { return tagged("process:", id) }

// concurrencyKey is the key of a tenant's concurrency semaphore.
func concurrencyKey(id string) string { return tagged("concurrency:", id) }

// backlogKey is the key of the bucket that holds a tenant's messages from
// the backlog queue to what its fresh messages leave of its process_rate,
// on top of processKey.
func backlogKey(id string) string { return tagged("process-backlog:", id) }

// backlogConcurrencyKey is the key of the semaphore that holds a tenant's
// messages from the backlog queue to what its fresh messages leave of its
// concurrency, on top of concurrencyKey.
func backlogConcurrencyKey(id string) string { return tagged("concurrency-backlog:", id) }

// backlogLineOf returns the backlogConcurrencyKey of the tenant whose
// concurrencyKey key is, and false for any other key.
func backlogLineOf(key string) (string, bool) {
	t, ok := strings.CutPrefix(key, "concurrency:")
	if !ok {
		return "", false
	}
	return "concurrency-backlog:" + t, true
}

// lineKey is the key of the line of turns a tenant's spilled messages
// take, whatever the reason: its processKey, or for old work while fresh
// work comes (old), its backlogKey (see Limiter.concurrencyWait).
func lineKey(id string, old bool) string {
	if old {
		return backlogKey(id)
	}
	return processKey(id)
}

// freshKey is the key of the Meter of a tenant's fresh messages.
func freshKey(id string) string { return "fresh:" + id }
