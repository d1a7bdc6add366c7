package fleet

// Every Redis key of the package is built here.

// workersKey is the sorted set of the fleet's workers: worker id → time of
// its latest heartbeat (unix ms, Redis's clock), plus half a millisecond
// while the worker reports itself saturated: the flag rides on the
// heartbeat in the one key, which readers of the time round down.
func workersKey(prefix string) string { return prefix + "fleet:workers" }
