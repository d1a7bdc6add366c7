package tenant

// redisKeys are the Redis keys of the registry, all under one prefix.
type redisKeys struct {
	records string // hash: tenant id → record JSON
	revs    string // hash: tenant id → revision
	version string // counter bumped by every change
}

func newRedisKeys(prefix string) redisKeys {
	return redisKeys{
		records: prefix + "tenants",
		revs:    prefix + "tenants:rev",
		version: prefix + "tenants:version",
	}
}
