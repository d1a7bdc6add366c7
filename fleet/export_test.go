package fleet

// Kill stops the heartbeat as a crash would: the registration is left to
// go stale. Stop must still be called to wait for it.
func (f *Fleet) Kill() { f.loops.Kill() }

// DepthsLockKey is the key of the lease of the worker reading the queues
// for the fleet's autoscaling.
func DepthsLockKey(prefix string, queues []string) string { return depthsLockKey(prefix, queues) }
