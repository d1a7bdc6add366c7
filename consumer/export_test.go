package consumer

// Kill abandons the worker as a crash would (see Start); tests use it to
// play a worker dying mid-job.
func (w *Worker) Kill() {
	w.mu.Lock()
	kill := w.kill
	w.mu.Unlock()
	if kill != nil {
		kill()
	}
}

// Assign is assign, for the tests of a fleet sharing the queues.
var Assign = assign

// Watched returns the live queues the worker receives from, in pool order.
func (w *Worker) Watched() []string {
	if p := w.sharing.current.Load(); p != nil {
		return *p
	}
	return nil
}
