package gateway

import (
	"net/http"
	"time"

	"github.com/fairq/fairq/overview"
)

// handleOverview serves GET /admin/v1/overview[?history=false]: what the
// console shows, one document; without the queues' histories when asked,
// for pollers that fetch them less often.
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Overview == nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, RetryAfter: time.Hour, Detail: "the overview is not configured on this gateway"})
		return
	}
	history, err := boolQueryDefault(r, "history", true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.cfg.Overview.Document(r.Context())
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "the overview could not be built: retry", RetryAfter: time.Second, Err: err})
		return
	}
	if !history {
		light := *d
		light.Queues = make([]overview.QueueRow, len(d.Queues))
		for i, q := range d.Queues {
			q.History = nil
			light.Queues[i] = q
		}
		d = &light
	}
	writeJSON(w, http.StatusOK, d)
}
