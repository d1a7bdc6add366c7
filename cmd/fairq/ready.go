package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// readyCache is how long a readiness answer is reused: probes of several
// kinds (Kubernetes, a load balancer) cost the backend one call a second
// at most.
const readyCache = time.Second

// readiness answers GET /readyz from checks it runs at most once a
// readyCache: 200 {"status":"ready"} when all pass, else 503 naming the
// first that failed.
type readiness struct {
	checks []readyCheck

	mu  sync.Mutex
	at  time.Time
	err error
}

type readyCheck struct {
	name string
	run  func(ctx context.Context) error
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	err := r.check(req.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "not ready", "reason": err.Error()}) // to a prober that may have gone
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "ready"})
}

func (r *readiness) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyCache {
		return r.err
	}
	// Shared by the probes of the next second: not cut short by this one's
	// client leaving.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.err = nil
	for _, c := range r.checks {
		if err := c.run(ctx); err != nil {
			r.err = fmt.Errorf("%s: %w", c.name, err)
			break
		}
	}
	r.at = time.Now()
	return r.err
}

// workerReady is the worker's readiness: the queue backend answers (the
// depth of the first live queue) and the application accepts connections
// at the push URL. A worker that is not ready keeps running; its probe
// tells the orchestrator not to count on it (aws-sqsd has no probe).
func (s *system) workerReady() *readiness {
	r := &readiness{checks: []readyCheck{{"queue backend", func(ctx context.Context) error {
		_, err := s.backend.Depth(ctx, s.names.Live[0])
		return err
	}}}}
	if s.push != nil {
		r.checks = append(r.checks, readyCheck{"application", s.push.Ping})
	}
	return r
}
