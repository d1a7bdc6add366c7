package backlog

// redisKeys builds the Redis keys of the counters under one prefix.
type redisKeys struct{ prefix string }

// tenant is the hash of a tenant's buckets.
func (k redisKeys) tenant(id string) string { return k.prefix + "backlog:" + id }

// tenants is the set of tenants that have a hash.
func (k redisKeys) tenants() string { return k.prefix + "backlog:tenants" }
