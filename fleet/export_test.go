package fleet

// Kill stops the heartbeat as a crash would: the registration is left to
// go stale. Stop must still be called to wait for it.
func (f *Fleet) Kill() { f.loops.Kill() }
