package spillover

// The keys of a tenant's limits in the throttle limiters and semaphores;
// the Redis implementations put their own prefixes in front.

// processKey is the key of a tenant's process_rate bucket (the gateway's
// ingest_rate bucket is "ingest:" + id).
func processKey(tenant string) string { return "process:" + tenant }

// concurrencyKey is the key of a tenant's concurrency semaphore.
func concurrencyKey(tenant string) string { return "concurrency:" + tenant }
