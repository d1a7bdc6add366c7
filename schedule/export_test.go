package schedule

// Kill stops the scheduler as a crash would: it stops firing and leaves
// its lease to run out. Stop must still be called to wait for it.
func (s *Scheduler) Kill() {
	s.killed.Store(true)
	s.loops.Kill()
}

// FiredKey is the Redis key that claims one firing.
var FiredKey = firedKey
