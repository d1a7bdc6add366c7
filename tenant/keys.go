package tenant

// redisKeys are the Redis keys of the registry, all under one prefix and
// in one hash slot, so that the script and the transactions that use them
// together run on a Redis Cluster. The records hash keeps the name it had
// in releases before the registry ran on a cluster, so that the records
// stored then are read as they are; a key without a hash tag hashes to the
// slot of its whole name, and the revisions and the version carry that
// name as their tag.
type redisKeys struct {
	records string // hash: tenant id → record JSON
	revs    string // hash: tenant id → revision
	version string // counter bumped by every change
}

func newRedisKeys(prefix string) redisKeys {
	records := prefix + "tenants"
	tag := "{" + records + "}"
	return redisKeys{
		records: records,
		revs:    tag + ":rev",
		version: tag + ":version",
	}
}

// put are the keys of putScript, in its order.
func (k redisKeys) put() []string { return []string{k.records, k.revs, k.version} }

// load are the keys of load's transaction, in its order.
func (k redisKeys) load() []string { return []string{k.version, k.records} }

// get are the keys of get's transaction, in its order.
func (k redisKeys) get() []string { return []string{k.records, k.revs} }
