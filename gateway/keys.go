package gateway

// Keys the gateway uses in Redis and in its rate limiter. The limiter and
// the idempotency store put their own prefixes in front.

// ingestKey is the rate limit bucket of a tenant's admission.
func ingestKey(tenant string) string { return "ingest:" + tenant }

// statsKey is the hash of a tenant's admitted and rejected counts.
func statsKey(prefix, tenant string) string { return prefix + "stats:" + tenant }
