package backlog

// redisKeys builds the Redis keys of the counters under one prefix. Every
// key carries one hash tag, {<prefix>backlog}, so that the scripts that
// change a tenant's hash and the set of tenants together run on a Redis
// Cluster. The structure is small (a hash of at most one field per bucket
// of the horizon per tenant) and its traffic is bounded by the trackers'
// rounds and the counters' cache, so one slot holds it; the set keeps
// reconciliation from scanning the keyspace.
type redisKeys struct{ prefix string }

func (k redisKeys) tag() string { return "{" + k.prefix + "backlog}" }

// tenant is the hash of a tenant's buckets.
func (k redisKeys) tenant(id string) string { return k.tag() + ":tenant:" + id }

// tenants is the set of tenants that have a hash.
func (k redisKeys) tenants() string { return k.tag() + ":tenants" }

// script are the keys of addScript and takeScript for a tenant, in their
// order.
func (k redisKeys) script(id string) []string { return []string{k.tenant(id), k.tenants()} }
