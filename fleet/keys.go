package fleet

// Every Redis key of the package is built here.

// workersKey is the sorted set of the fleet's workers: worker id → time of
// its latest heartbeat (unix ms, Redis's clock).
func workersKey(prefix string) string { return prefix + "fleet:workers" }
