package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/idempotency"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// Code is a stable error code of the HTTP API: a contract clients match on
// (the README and openapi.json list them).
type Code string

// The error codes.
const (
	CodeInvalidRequest       Code = "invalid_request"
	CodeUnauthorized         Code = "unauthorized"
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeTooLarge             Code = "too_large"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeRateLimited          Code = "rate_limited"
	CodeBacklogFull          Code = "backlog_full"
	CodeUnavailable          Code = "unavailable"
	CodeInternal             Code = "internal"
	// CodeIdempotencyKeyReused: the Idempotency-Key was used before for
	// a different message (422).
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	// CodeIdempotencyKeyInProgress: a request with the same
	// Idempotency-Key is still being processed (409).
	CodeIdempotencyKeyInProgress Code = "idempotency_key_in_progress"
	// CodeTenantPaused: an operator paused the tenant with its ingest
	// (423).
	CodeTenantPaused Code = "tenant_paused"
)

// ErrStopped is returned once the server is stopping.
var ErrStopped = errors.New("gateway is stopping")

// Error is an answer other than success, with what the client is told.
type Error struct {
	Code   Code
	Detail string // shown to the client: never a secret, a body or a cause
	// RetryAfter, for 429 and 503, is when trying again makes sense.
	RetryAfter time.Duration
	// status overrides the status of Code (405 only).
	status int
	// Err is the cause, for logs; never shown.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// errorf returns an Error with a formatted detail.
func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// problem is an RFC 9457 problem detail with fairq's two extensions.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      Code   `json:"code"`
	RequestID string `json:"request_id"`
}

// problemOf maps any error to the answer the client gets. It is the one
// place where errors become HTTP statuses and codes.
func problemOf(err error) (status int, e *Error) {
	var ae *Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		e = ae
	case errors.As(err, &mbe):
		e = &Error{Code: CodeTooLarge, Detail: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit), Err: err}
	case errors.Is(err, tenant.ErrUnauthorized):
		e = &Error{Code: CodeUnauthorized, Detail: "missing or unknown API key", Err: err}
	case errors.Is(err, tenant.ErrNotFound), errors.Is(err, tenant.ErrKeyNotFound):
		e = &Error{Code: CodeNotFound, Detail: detailOf(err), Err: err}
	case errors.Is(err, tenant.ErrInvalid), errors.Is(err, tenant.ErrTooManyKeys):
		e = &Error{Code: CodeInvalidRequest, Detail: detailOf(err), Err: err}
	case errors.Is(err, queue.ErrTooLarge):
		e = &Error{Code: CodeTooLarge, Detail: "message is larger than the queue accepts", Err: err}
	case errors.Is(err, queue.ErrInvalidEntry):
		e = &Error{Code: CodeInvalidRequest, Detail: "the queue refused the message as invalid", Err: err}
	case errors.Is(err, ErrStopped):
		e = &Error{Code: CodeUnavailable, Detail: "the gateway is shutting down; retry", RetryAfter: time.Second, Err: err}
	case errors.Is(err, tenant.ErrUnavailable), errors.Is(err, throttle.ErrUnavailable), errors.Is(err, idempotency.ErrUnavailable),
		errors.Is(err, backlog.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, errUnavailable):
		e = &Error{Code: CodeUnavailable, Detail: "a service the gateway depends on is unavailable; retry", RetryAfter: time.Second, Err: err}
	default:
		e = &Error{Code: CodeInternal, Detail: "internal error", Err: err}
	}
	if e.status != 0 {
		return e.status, e
	}
	if status, ok := codeStatus[e.Code]; ok {
		return status, e
	}
	return http.StatusInternalServerError, e
}

// codeStatus is the HTTP status of each code; any other is a 500.
var codeStatus = map[Code]int{
	CodeInvalidRequest:           http.StatusBadRequest,
	CodeUnauthorized:             http.StatusUnauthorized,
	CodeForbidden:                http.StatusForbidden,
	CodeNotFound:                 http.StatusNotFound,
	CodeTooLarge:                 http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:     http.StatusUnsupportedMediaType,
	CodeRateLimited:              http.StatusTooManyRequests,
	CodeBacklogFull:              http.StatusTooManyRequests,
	CodeUnavailable:              http.StatusServiceUnavailable,
	CodeIdempotencyKeyReused:     http.StatusUnprocessableEntity,
	CodeIdempotencyKeyInProgress: http.StatusConflict,
	CodeTenantPaused:             http.StatusLocked,
}

// errUnavailable marks failures of a dependency (SQS, Redis) worth a retry.
var errUnavailable = errors.New("dependency unavailable")

// detailOf returns the text of an error of the tenant package, which holds
// no secret.
func detailOf(err error) string { return err.Error() }

// writeError answers with the problem for err.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, e := problemOf(err)
	if status >= 500 {
		level := slog.LevelError
		if status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(r.Context(), level, "request failed",
			slog.String("request_id", requestID(r.Context())), slog.String("route", routeOf(r)),
			slog.Int("status", status), slog.String("code", string(e.Code)), slog.Any("err", err))
	}
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(e.RetryAfter), 10))
	}
	if e.Code == CodeUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="fairq"`)
	}
	writeProblem(w, r, status, e)
}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, e *Error) {
	p := problem{
		Type:      "urn:fairq:problem:" + string(e.Code),
		Title:     http.StatusText(status),
		Status:    status,
		Detail:    e.Detail,
		Code:      e.Code,
		RequestID: requestID(r.Context()),
	}
	b, _ := json.Marshal(p) // cannot fail: strings and an int
	h := w.Header()
	h[headerContentType] = valueProblemJSON
	h[headerCacheControl] = valueNoStore
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// ceilSeconds rounds d up to whole seconds, at least 1: the unit of
// Retry-After and RateLimit-Reset, rounded so that waiting that long is
// never too short.
func ceilSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
