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
