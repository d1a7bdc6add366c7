package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/tenant"
)

// Limits of the dead-letter routes.
const (
	maxRedriveIDs    = 100
	peekLimitDefault = 20
	peekLimitMax     = 100
	purgeMaxDefault  = 1000
)

// dlqUnavailable is the answer of the dead-letter routes without
// Config.DeadLetters. Configuration, not load: a retry an hour later fares
// no better, but 503 carries Retry-After by contract.
func dlqUnavailable() *Error {
	return &Error{Code: CodeUnavailable, RetryAfter: time.Hour, Detail: "the dead-letter tools are not configured on this gateway; run `fairq dlq redrive --config`"}
}

// handleRedrive moves dead letters back to the live queues: all of them, a
// tenant's, or those of the ids named, at most max (0: all).
func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DeadLetters == nil {
		s.writeError(w, r, dlqUnavailable())
		return
	}
	var req redriveRequest
	if r.ContentLength != 0 {
		if err := checkJSONContent(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		data, err := readSmallBody(w, r, maxAdminBody)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := decodeRedrive(data, &req); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
	}
	start := time.Now()
	res, err := s.cfg.DeadLetters.Redrive(r.Context(), deadletter.Selection{Tenant: req.Tenant, IDs: req.IDs, Max: req.Max})
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "redrive stopped after moving " + strconv.Itoa(res.Moved) + ": retry", RetryAfter: time.Second, Err: err})
		return
	}
	s.log.InfoContext(r.Context(), "dead letters redriven", "tenant", req.Tenant, "ids", len(req.IDs), "moved", res.Moved,
		"failed", res.Failed, "took", time.Since(start), "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, res)
}

// letterJSON is a dead letter as GET /admin/v1/dlq shows it.
type letterJSON struct {
	ID         string  `json:"id"`
	Tenant     string  `json:"tenant"`
	Error      string  `json:"error"`
	Attempts   int     `json:"attempts"`
	EnqueuedAt string  `json:"enqueued_at"`
	AgeSeconds float64 `json:"age_seconds"`
	Queue      string  `json:"queue"`
	Body       *string `json:"body,omitempty"`
}

type peekJSON struct {
	Messages   []letterJSON `json:"messages"`
	NextCursor *string      `json:"next_cursor"`
}

// handlePeek serves GET /admin/v1/dlq?tenant=&limit=&cursor=&bodies=: a
// page of dead letters, hidden for a minute so that the next page, asked
// for with next_cursor, shows others. Bodies only when asked for.
func (s *Server) handlePeek(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DeadLetters == nil {
		s.writeError(w, r, dlqUnavailable())
		return
	}
	q := r.URL.Query()
	who, err := tenantQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := intQuery(r, "limit", peekLimitDefault, 1, peekLimitMax)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	bodies, err := boolQuery(r, "bodies")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page := 1
	if c := q.Get("cursor"); c != "" {
		// The cursor numbers the pages: what it points past is hidden
		// already, so the next page is simply the next receive.
		n, err := strconv.Atoi(c)
		if err != nil || n < 2 {
			s.writeError(w, r, errorf(CodeInvalidRequest, "cursor %s is not one this API gave", quoteName(c)))
			return
		}
		page = n
	}
	got, err := s.cfg.DeadLetters.Peek(r.Context(), deadletter.Selection{Tenant: who, Max: limit}, bodies)
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "could not read the dead-letter queue: retry", RetryAfter: time.Second, Err: err})
		return
	}
	now := s.cfg.Now()
	out := peekJSON{Messages: make([]letterJSON, len(got.Letters))}
	for i, l := range got.Letters {
		out.Messages[i] = letterJSON{ID: l.ID, Tenant: l.Tenant, Error: l.Error, Attempts: l.Attempts,
			EnqueuedAt: formatTime(l.EnqueuedAt), AgeSeconds: max(0, now.Sub(l.EnqueuedAt).Seconds()), Queue: l.Queue, Body: l.Body}
	}
	if got.More {
		next := strconv.Itoa(page + 1)
		out.NextCursor = &next
	}
	if bodies {
		s.log.InfoContext(r.Context(), "dead letters read with their bodies", "tenant", who, "n", len(out.Messages), "request_id", requestID(r.Context()))
	}
	writeJSON(w, http.StatusOK, out)
}

// handlePurgeDLQ serves DELETE /admin/v1/dlq?tenant=&max=: deletes dead
// letters, a tenant's or all, at most max (default 1000), and says whether
// more remain.
func (s *Server) handlePurgeDLQ(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DeadLetters == nil {
		s.writeError(w, r, dlqUnavailable())
		return
	}
	who, err := tenantQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	maxN, err := intQuery(r, "max", purgeMaxDefault, 1, 100_000)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.DeadLetters.Purge(r.Context(), deadletter.Selection{Tenant: who, Max: maxN})
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "purge stopped after deleting " + strconv.Itoa(res.Deleted) + ": retry", RetryAfter: time.Second, Err: err})
		return
	}
	s.log.InfoContext(r.Context(), "dead letters purged", "tenant", who, "deleted", res.Deleted, "remaining", res.Remaining, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, res)
}

// tenantQuery reads the optional tenant query parameter.
func tenantQuery(r *http.Request) (string, error) {
	t := r.URL.Query().Get("tenant")
	if t != "" && !tenant.ValidID(t) {
		return "", errorf(CodeInvalidRequest, "tenant %s is not a tenant id", quoteName(t))
	}
	return t, nil
}

// intQuery reads an optional whole-number query parameter within [lo, hi].
func intQuery(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errorf(CodeInvalidRequest, "query parameter %s must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}
