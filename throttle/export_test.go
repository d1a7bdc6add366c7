package throttle

// Kill abandons the semaphore as a crash would (see run): renewals stop
// and nothing is released, so its leases run out. Stop must still be
// called to wait for it.
func (s *RedisSemaphore) Kill() { s.loops.Kill() }

// ParseFreed is parseFreed, for the test of the payloads of every version.
var ParseFreed = parseFreed
