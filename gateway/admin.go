package gateway

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fairq/fairq/tenant"
)

// maxAdminBody caps the body of an admin request.
const maxAdminBody = 64 << 10

// parseAdminToken decodes the configured sha256 of the admin token: 64 hex
// digits, optionally after "sha256:".
func parseAdminToken(s string) ([32]byte, error) {
	var h [32]byte
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) != 64 {
		return h, errors.New("gateway: AdminTokenSHA256 must be 64 hex digits")
	}
	if _, err := hex.Decode(h[:], []byte(strings.ToLower(s))); err != nil {
		return h, errors.New("gateway: AdminTokenSHA256 must be 64 hex digits")
	}
	return h, nil
}

// adminOnly lets through requests bearing the admin token: no token is
// 401 unauthorized, any other token (a tenant's key included) 403
// forbidden. The token's hash is compared in constant time. A request
// without a token may instead carry a console session (consoleSession).
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			if e := s.consoleSession(r); e != nil {
				s.writeError(w, r, e)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		sum := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(sum[:], s.adminHash[:]) != 1 {
			s.writeError(w, r, &Error{Code: CodeForbidden, Detail: "this token does not give access to the admin API"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

var limitFields = []string{"ingest_rate", "ingest_burst", "process_rate", "process_burst", "concurrency", "soft_backlog", "max_backlog", "drop_age"}

type keyJSON struct {
	KeyID     string `json:"key_id"`
	CreatedAt string `json:"created_at,omitempty"`
}

// tenantJSON is a tenant as the admin API shows it.
type tenantJSON struct {
	ID        string        `json:"id"`
	Limits    tenant.Limits `json:"limits"`    // resolved over the defaults
	Overrides tenant.Limits `json:"overrides"` // set by the tenant itself
	Keys      []keyJSON     `json:"keys"`
	Source    string        `json:"source"` // "config" or "admin"
	// State is "active" or "paused".
	State        string  `json:"state"`
	PauseIngest  bool    `json:"pause_ingest"`
	PurgedBefore *string `json:"purged_before"` // null: never purged
}

// Tenant states as the admin API shows them.
const (
	stateActive = "active"
	statePaused = "paused"
)

func tenantOf(t tenant.Tenant) tenantJSON {
	out := tenantJSON{
		ID:        t.ID,
		Limits:    t.Limits.Limits(),
		Overrides: t.Overrides,
		Keys:      make([]keyJSON, 0, len(t.Keys)),
		Source:    "admin",
		State:     stateActive,
	}
	if t.FromConfig {
		out.Source = "config"
	}
	if t.Paused {
		out.State, out.PauseIngest = statePaused, t.PauseIngest
	}
	if !t.PurgedBefore.IsZero() {
		v := formatTime(t.PurgedBefore)
		out.PurgedBefore = &v
	}
	for _, k := range t.Keys {
		kj := keyJSON{KeyID: k.ID}
		if !k.CreatedAt.IsZero() {
			kj.CreatedAt = formatTime(k.CreatedAt)
		}
		out.Keys = append(out.Keys, kj)
	}
	return out
}

// adminRoutes mounts the admin API.
func (s *Server) adminRoutes(r chi.Router) {
	r.Use(s.adminOnly)
	r.Get("/tenants", s.handleListTenants)
	r.Get("/tenants/{id}", s.handleGetTenant)
	r.Put("/tenants/{id}", s.handlePutTenant)
	r.Delete("/tenants/{id}", s.handleDeleteTenant)
	r.Post("/tenants/{id}/pause", s.handlePause)
	r.Post("/tenants/{id}/resume", s.handleResume)
	r.Post("/tenants/{id}/purge", s.handlePurge)
	r.Post("/tenants/{id}/keys", s.handleIssueKey)
	r.Delete("/tenants/{id}/keys/{key_id}", s.handleRevokeKey)
	r.Get("/queues", s.handleQueues)
	r.Get("/overview", s.handleOverview)
	r.Get("/dlq", s.handlePeek)
	r.Delete("/dlq", s.handlePurgeDLQ)
	r.Post("/dlq/redrive", s.handleRedrive)
}

func (s *Server) handleListTenants(w http.ResponseWriter, r *http.Request) {
	list := s.cfg.Tenants.List()
	out := make([]tenantJSON, len(list))
	for i, t := range list {
		out[i] = tenantOf(t)
	}
	writeJSON(w, http.StatusOK, map[string][]tenantJSON{"tenants": out})
}

func (s *Server) handleGetTenant(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	t, ok := s.cfg.Tenants.Get(id)
	if !ok {
		s.writeError(w, r, errorf(CodeNotFound, "no tenant %s", quoteName(id)))
		return
	}
	writeJSON(w, http.StatusOK, tenantOf(t))
}

// handlePutTenant sets a tenant's own limits, creating it if need be: the
// body holds the limits of the configuration file's keys; a limit left out
// (or null) follows the defaults.
func (s *Server) handlePutTenant(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	l, err := decodeLimits(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, created, err := s.cfg.Tenants.Put(r.Context(), id, l)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.log.InfoContext(r.Context(), "tenant set through the admin API", "tenant", id, "created", created, "request_id", requestID(r.Context()))
	writeJSON(w, status, tenantOf(t))
}

func decodeLimits(w http.ResponseWriter, r *http.Request) (tenant.Limits, error) {
	var l tenant.Limits
	if err := checkJSONContent(r); err != nil {
		return l, err
	}
	data, err := readSmallBody(w, r, maxAdminBody)
	if err != nil {
		return l, err
	}
	fields, err := decodeObject(data, "request body")
	if err != nil {
		return l, err
	}
	for name := range fields {
		if !slices.Contains(limitFields, name) {
			return l, errorf(CodeInvalidRequest, "unknown field %s (limits are %s)", quoteName(name), strings.Join(limitFields, ", "))
		}
	}
	if err := json.Unmarshal(data, &l); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			want := "number"
			if strings.Contains(typ.Type.String(), "int") {
				want = "whole number"
			}
			return l, errorf(CodeInvalidRequest, "%s must be a %s or null", typ.Field, want)
		}
		return l, jsonError(err, "request body")
	}
	return l, nil
}

// handleDeleteTenant deletes a tenant; with ?purge=true its messages
// still on the queues are deleted unseen too (a purge instant, now).
func (s *Server) handleDeleteTenant(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	purge, err := boolQuery(r, "purge")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	at, err := s.cfg.Tenants.Delete(r.Context(), id, purge)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "tenant deleted through the admin API", "tenant", id, "purge", purge, "request_id", requestID(r.Context()))
	if !purge {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, purgeJSON{Tenant: id, PurgedBefore: formatTime(at)})
}

type purgeJSON struct {
	Tenant       string `json:"tenant"`
	PurgedBefore string `json:"purged_before"`
}

// handlePause serves POST /admin/v1/tenants/{id}/pause: body
// {"pause_ingest"?: bool}, or none.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var body struct {
		PauseIngest bool `json:"pause_ingest"`
	}
	if err := decodeOptionalBody(w, r, &body, "pause_ingest"); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.cfg.Tenants.Pause(r.Context(), id, body.PauseIngest)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "tenant paused through the admin API", "tenant", id, "pause_ingest", body.PauseIngest, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, tenantOf(t))
}

// handleResume serves POST /admin/v1/tenants/{id}/resume.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := decodeOptionalBody(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.cfg.Tenants.Resume(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "tenant resumed through the admin API", "tenant", id, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, tenantOf(t))
}

// handlePurge serves POST /admin/v1/tenants/{id}/purge.
func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := decodeOptionalBody(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	at, err := s.cfg.Tenants.Purge(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "tenant purged through the admin API", "tenant", id, "purged_before", at, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusOK, purgeJSON{Tenant: id, PurgedBefore: formatTime(at)})
}

// decodeOptionalBody decodes a JSON object body, if the request has one,
// into v, refusing fields other than those named.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, v any, fields ...string) error {
	if r.ContentLength == 0 {
		return nil
	}
	data, err := readSmallBody(w, r, maxAdminBody)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return err
	}
	if err := checkJSONContent(r); err != nil {
		return err
	}
	obj, err := decodeObject(data, "request body")
	if err != nil {
		return err
	}
	for name := range obj {
		if !slices.Contains(fields, name) {
			return errorf(CodeInvalidRequest, "unknown field %s", quoteName(name))
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err, "request body")
	}
	return nil
}

// boolQuery reads an optional boolean query parameter.
func boolQuery(r *http.Request, name string) (bool, error) {
	return boolQueryDefault(r, name, false)
}

// boolQueryDefault reads an optional true/false query parameter, def when
// it is absent.
func boolQueryDefault(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(CodeInvalidRequest, "query parameter %s must be true or false, not %s", name, quoteName(v))
	}
	return b, nil
}

// handleIssueKey makes a new API key for a tenant and shows it this once.
func (s *Server) handleIssueKey(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	kid, key, err := s.cfg.Tenants.IssueKey(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "API key issued", "tenant", id, "key_id", kid, "request_id", requestID(r.Context()))
	writeJSON(w, http.StatusCreated, map[string]string{"key_id": kid, "key": key})
}

func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id, kid := chi.URLParam(r, "id"), chi.URLParam(r, "key_id")
	if err := s.cfg.Tenants.RevokeKey(r.Context(), id, kid); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "API key revoked", "tenant", id, "key_id", kid, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
}

type queueJSON struct {
	Name       string `json:"name"`
	Role       string `json:"role"` // live, overflow, backlog, dlq
	Visible    int    `json:"visible"`
	NotVisible int    `json:"not_visible"`
	Delayed    int    `json:"delayed"`
}

// handleQueues shows the depth of every queue; when a queue's depth cannot
// be read the answer is 503 unavailable, naming the queues.
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	n := s.cfg.Names
	var qs []queueJSON
	for _, name := range n.Live {
		qs = append(qs, queueJSON{Name: name, Role: "live"})
	}
	for _, q := range []queueJSON{{Name: n.Overflow, Role: "overflow"}, {Name: n.Backlog, Role: "backlog"}, {Name: n.DLQ, Role: "dlq"}} {
		if q.Name != "" {
			qs = append(qs, q)
		}
	}
	var unread []string
	for i := range qs {
		d, err := s.cfg.Backend.Depth(r.Context(), qs[i].Name)
		if err != nil {
			unread = append(unread, qs[i].Name)
			s.log.WarnContext(r.Context(), "queue depth unreadable", "queue", qs[i].Name, "err", err)
			continue
		}
		qs[i].Visible, qs[i].NotVisible, qs[i].Delayed = d.Visible, d.NotVisible, d.Delayed
	}
	if len(unread) > 0 {
		s.writeError(w, r, &Error{Code: CodeUnavailable, RetryAfter: time.Second,
			Detail: "the depth of these queues cannot be read: " + strings.Join(unread, ", ")})
		return
	}
	writeJSON(w, http.StatusOK, map[string][]queueJSON{"queues": qs})
}

type redriveRequest struct {
	Tenant string   `json:"tenant"`
	Max    int      `json:"max"`
	IDs    []string `json:"ids"`
}

func decodeRedrive(data []byte, req *redriveRequest) error {
	fields, err := decodeObject(data, "request body")
	if err != nil {
		return err
	}
	for name, raw := range fields {
		switch name {
		case "tenant":
			if !isJSONNull(raw) && (!isJSONString(raw) || json.Unmarshal(raw, &req.Tenant) != nil) {
				return errorf(CodeInvalidRequest, "tenant must be a string")
			}
			if req.Tenant != "" && !tenant.ValidID(req.Tenant) {
				return errorf(CodeInvalidRequest, "tenant %s is not a tenant id", quoteName(req.Tenant))
			}
		case "max":
			if !isJSONNull(raw) && (json.Unmarshal(raw, &req.Max) != nil || req.Max < 0) {
				return errorf(CodeInvalidRequest, "max must be a whole number, 0 or more (0: all)")
			}
		case "ids":
			if !isJSONNull(raw) && (raw[0] != '[' || json.Unmarshal(raw, &req.IDs) != nil || len(req.IDs) > maxRedriveIDs) {
				return errorf(CodeInvalidRequest, "ids must be an array of at most %d message ids", maxRedriveIDs)
			}
		default:
			return errorf(CodeInvalidRequest, "unknown field %s", quoteName(name))
		}
	}
	return nil
}
