package gateway

import (
	"net/http"

	"github.com/fairq/fairq/tenant"
)

// tenantSelf is the answer of GET /v1/tenant.
type tenantSelf struct {
	ID       string        `json:"id"`
	Limits   tenant.Limits `json:"limits"`
	Backlog  *int64        `json:"backlog"` // null when unknown (no counter, or unreachable)
	Admitted int64         `json:"admitted"`
	Rejected int64         `json:"rejected"`
}

// handleTenant serves GET /v1/tenant: the caller's limits, backlog, and
// the messages admitted and refused (by the fleet when Redis is
// configured, else by this gateway since it started).
func (s *Server) handleTenant(w http.ResponseWriter, r *http.Request) {
	t, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := tenantSelf{ID: t.ID, Limits: t.Limits.Limits()}
	if n, known, err := s.cfg.Backlog.Get(r.Context(), t.ID); err == nil && known {
		out.Backlog = &n
	}
	out.Admitted, out.Rejected, _ = s.stats.get(r.Context(), t.ID)
	writeJSON(w, http.StatusOK, out)
}
