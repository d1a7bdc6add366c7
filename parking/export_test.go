package parking

// RedisKeyGroups are the groups of keys that one script of the Redis lot
// uses together, by name, for a tenant.
func RedisKeyGroups(prefix, tenant string) map[string][]string {
	r := &Redis{prefix: prefix}
	return map[string][]string{"park and take scripts": r.keys(tenant)}
}
