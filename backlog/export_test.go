package backlog

// RedisKeyGroups are the groups of keys that one script of the counters
// uses together, by name, for a tenant.
func RedisKeyGroups(prefix, tenant string) map[string][]string {
	k := redisKeys{prefix: prefix}
	return map[string][]string{"add and take scripts": k.script(tenant)}
}
