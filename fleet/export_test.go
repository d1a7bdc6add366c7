package fleet

// Kill stops the heartbeat as a crash would (see Start): the registration
// is left to go stale. Stop must still be called to wait for it.
func (f *Fleet) Kill() {
	f.life.Lock()
	kill := f.kill
	f.life.Unlock()
	if kill != nil {
		kill()
	}
}
