package gateway

import (
	"context"
	"sync/atomic"
	"time"
)

// backendHealth is what the gateway knows of the queue backend: down once
// downAfter calls in a row failed for want of the service (a timeout, a
// refused connection, a fault of SQS) — sends and readiness checks alike
// — and up again after one succeeded. While it is down, an enqueue is
// answered 503 at once, before its body is read, rather than held for
// SendTimeout, and /readyz fails: one signal for both. The Server's probe
// loop asks the backend every probeEvery while it is down, so that the
// gateway sees it come back without sending a client's message into the
// outage.
type backendHealth struct {
	failures atomic.Int32
	down     atomic.Bool
	wake     chan struct{} // size 1: the probe loop has something to watch
}

// downAfter is the number of failures in a row that mark the backend
// down: one transient fault, which the SDK's retries did not hide, does
// not turn every client away.
const downAfter = 3

// probeEvery is how often the backend is asked while it is down.
const probeEvery = time.Second

func newBackendHealth() *backendHealth { return &backendHealth{wake: make(chan struct{}, 1)} }

// failed records a failure for want of the service.
func (h *backendHealth) failed() {
	if h.failures.Add(1) >= downAfter && !h.down.Swap(true) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// ok records a success.
func (h *backendHealth) ok() {
	if h.failures.Load() != 0 {
		h.failures.Store(0)
	}
	if h.down.Load() {
		h.down.Store(false)
	}
}

// isDown reports whether the backend is known to be down.
func (h *backendHealth) isDown() bool { return h.down.Load() }

// probeLoop asks the backend, every probeEvery while it is down, whether
// it answers again. It runs until ctx ends.
func (s *Server) probeLoop(ctx context.Context) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		if !s.backend.isDown() {
			select {
			case <-s.backend.wake:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if s.backend.isDown() {
			_ = s.probeBackend(ctx) // it records the outcome; the next tick tries again
		}
	}
}

// probeBackend asks the backend for the depth of the first live queue and
// records the answer.
func (s *Server) probeBackend(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.cfg.Backend.Depth(ctx, s.cfg.Names.Live[0])
	switch {
	case err == nil:
		s.backend.ok()
	case retryable(err):
		s.backend.failed()
	}
	return err
}
