package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// readiness caches the last look at the backend.
type readiness struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// handleHealth serves GET /healthz: the process is up.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady serves GET /readyz: the server is started and not stopping,
// and the backend answered a Depth of the first live queue within the
// last ReadyCache, and it is not known to be down (backendHealth: what
// readiness sees, enqueues see, and the reverse).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	up := s.phase == phaseOpen
	s.mu.RUnlock()
	if !up {
		s.writeError(w, r, ErrStopped)
		return
	}
	if s.backend.isDown() {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "the queue backend is unreachable", RetryAfter: probeEvery})
		return
	}
	if err := s.checkBackend(r.Context()); err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "the queue backend is unreachable", RetryAfter: s.cfg.ReadyCache, Err: err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) checkBackend(ctx context.Context) error {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	now := s.cfg.Now()
	if !s.ready.at.IsZero() && now.Sub(s.ready.at) < s.cfg.ReadyCache {
		return s.ready.err
	}
	// Not the request's own cancellation: the answer is shared.
	err := s.probeBackend(context.WithoutCancel(ctx))
	s.ready.at, s.ready.err = now, err
	return err
}
