// Package tenant is the registry of fairq's tenants: who they are, their
// limits and the API keys that authenticate them at the front door.
//
// Tenants come from the configuration file and from the admin API. The file
// seeds the registry; a tenant created, changed or deleted through the admin
// API is stored as a record that wins over the file for that tenant, across
// restarts: the first change to a tenant of the file copies its keys and
// limits into the record, and a deletion leaves a tombstone so that a
// deleted tenant of the file stays deleted (create it again with Put). Every
// process should be given the same file; records are shared.
//
// Records live in Redis when a client is configured, so that every process
// sees a change within a second: each polls a version counter every
// Config.Refresh (500 ms by default) and reloads all records when it moved,
// and the process that made a change reloads at once. Without Redis they
// live in memory and last as long as the process. Writes are optimistic:
// each record has a revision and a Lua script stores a record only over the
// revision it was read at, retrying on conflict.
//
// API keys are never stored: a key is kept as "sha256:<hex>" of its text,
// as `fairq keys hash` prints it. Authenticate hashes the key it is given,
// finds the hash in a map and compares the two hashes in constant time; a
// new key (IssueKey) is 32 random bytes, shown once to its caller. A key's
// id is the first 16 hex digits of its hash, enough to revoke it and
// harmless to show. Nothing here logs a key or a hash.
//
// If Redis becomes unreachable, the registry keeps answering from the last
// records it loaded (changes made elsewhere meanwhile arrive when Redis is
// back), says so once in the log and sets fairq_redis_degraded; changes
// through the admin API fail with ErrUnavailable. A process that starts
// while Redis is down starts from the file alone.
package tenant
