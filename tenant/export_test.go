package tenant

// RedisKeyGroups are the groups of keys that one script or transaction of
// the registry uses together, by name.
func RedisKeyGroups(prefix string) map[string][]string {
	k := newRedisKeys(prefix)
	return map[string][]string{"put script": k.put(), "load transaction": k.load(), "get transaction": k.get()}
}
