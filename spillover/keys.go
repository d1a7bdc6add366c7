package spillover

import "strings"

// The keys of a tenant's limits in the throttle limiters and semaphores;
// the Redis implementations put their own prefixes in front.

// processKey is the key of a tenant's process_rate bucket (the gateway's
// ingest_rate bucket is "ingest:" + id).
func processKey(tenant string) string { return "process:" + tenant }

// concurrencyKey is the key of a tenant's concurrency semaphore.
func concurrencyKey(tenant string) string { return "concurrency:" + tenant }

// backlogKey is the key of the bucket that holds a tenant's messages from
// the backlog queue to what its fresh messages leave of its process_rate,
// on top of processKey.
func backlogKey(tenant string) string { return "process-backlog:" + tenant }

// tenantOfConcurrencyKey returns the tenant whose concurrencyKey key is,
// and false for any other key.
func tenantOfConcurrencyKey(key string) (string, bool) {
	return strings.CutPrefix(key, concurrencyKey(""))
}

// backlogConcurrencyKey is the key of the semaphore that holds a tenant's
// messages from the backlog queue to what its fresh messages leave of its
// concurrency, on top of concurrencyKey.
func backlogConcurrencyKey(tenant string) string { return "concurrency-backlog:" + tenant }

// lineKey is the key of the line of turns a tenant's spilled messages
// take, whatever the reason: its processKey, or for old work while fresh
// work comes (old), its backlogKey (see Limiter.concurrencyWait).
func lineKey(tenant string, old bool) string {
	if old {
		return backlogKey(tenant)
	}
	return processKey(tenant)
}

// freshKey is the key of the Meter of a tenant's fresh messages.
func freshKey(tenant string) string { return "fresh:" + tenant }
