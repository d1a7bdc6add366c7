package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Code is a stable problem code of the API.
type Code string

// The problem codes of the API.
const (
	CodeInvalidRequest           Code = "invalid_request"             // 400
	CodeUnauthorized             Code = "unauthorized"                // 401
	CodeForbidden                Code = "forbidden"                   // 403
	CodeNotFound                 Code = "not_found"                   // 404
	CodeIdempotencyKeyInProgress Code = "idempotency_key_in_progress" // 409
	CodeTooLarge                 Code = "too_large"                   // 413
	CodeUnsupportedMediaType     Code = "unsupported_media_type"      // 415
	CodeIdempotencyKeyReused     Code = "idempotency_key_reused"      // 422
	CodeTenantPaused             Code = "tenant_paused"               // 423
	CodeRateLimited              Code = "rate_limited"                // 429
	CodeBacklogFull              Code = "backlog_full"                // 429
	CodeInternal                 Code = "internal"                    // 500
	CodeUnavailable              Code = "unavailable"                 // 503
)

// Sentinels of the problem codes: errors.Is(err, ErrRateLimited) is true
// for an *Error of that code.
var (
	ErrInvalidRequest           = errors.New("fairq: invalid request")
	ErrUnauthorized             = errors.New("fairq: unauthorized")
	ErrForbidden                = errors.New("fairq: forbidden")
	ErrNotFound                 = errors.New("fairq: not found")
	ErrIdempotencyKeyInProgress = errors.New("fairq: idempotency key in progress")
	ErrTooLarge                 = errors.New("fairq: too large")
	ErrUnsupportedMediaType     = errors.New("fairq: unsupported media type")
	ErrIdempotencyKeyReused     = errors.New("fairq: idempotency key reused")
	ErrTenantPaused             = errors.New("fairq: tenant paused")
	ErrRateLimited              = errors.New("fairq: rate limited")
	ErrBacklogFull              = errors.New("fairq: backlog full")
	ErrInternal                 = errors.New("fairq: internal error")
	ErrUnavailable              = errors.New("fairq: unavailable")
)

var sentinels = map[Code]error{
	CodeInvalidRequest:           ErrInvalidRequest,
	CodeUnauthorized:             ErrUnauthorized,
	CodeForbidden:                ErrForbidden,
	CodeNotFound:                 ErrNotFound,
	CodeIdempotencyKeyInProgress: ErrIdempotencyKeyInProgress,
	CodeTooLarge:                 ErrTooLarge,
	CodeUnsupportedMediaType:     ErrUnsupportedMediaType,
	CodeIdempotencyKeyReused:     ErrIdempotencyKeyReused,
	CodeTenantPaused:             ErrTenantPaused,
	CodeRateLimited:              ErrRateLimited,
	CodeBacklogFull:              ErrBacklogFull,
	CodeInternal:                 ErrInternal,
	CodeUnavailable:              ErrUnavailable,
}

// codeOfStatus is the code of an answer that carries none (a proxy's
// page, say), where its status says it unambiguously.
var codeOfStatus = map[int]Code{
	http.StatusBadRequest:            CodeInvalidRequest,
	http.StatusUnauthorized:          CodeUnauthorized,
	http.StatusForbidden:             CodeForbidden,
	http.StatusNotFound:              CodeNotFound,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusUnsupportedMediaType:  CodeUnsupportedMediaType,
	http.StatusLocked:                CodeTenantPaused,
	http.StatusInternalServerError:   CodeInternal,
	http.StatusServiceUnavailable:    CodeUnavailable,
}

// Error is an answer of the API other than success.
type Error struct {
	Status     int           // HTTP status
	Code       Code          // the problem code; derived from Status when the answer had none
	Detail     string        // what was wrong, for a person
	RequestID  string        // the request's id (X-Request-Id): quote it when asking about a request
	RetryAfter time.Duration // for 429 and 503: how long the server asked to wait
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fairq: %d %s", e.Status, e.Code)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// problem is the API's problem+json answer.
type problem struct {
	Status    int    `json:"status"`
	Code      Code   `json:"code"`
	Detail    string `json:"detail"`
	RequestID string `json:"request_id"`
}

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 64 << 10

// errorOf builds the Error of a failed answer whose body is body.
func errorOf(res *http.Response, body []byte) *Error {
	e := &Error{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id")}
	var p problem
	if strings.Contains(res.Header.Get("Content-Type"), "json") && json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Detail = p.Code, p.Detail
		if e.RequestID == "" {
			e.RequestID = p.RequestID
		}
	} else {
		e.Code = codeOfStatus[res.StatusCode]
		if res.StatusCode == http.StatusTooManyRequests {
			e.Code = CodeRateLimited
		}
		e.Detail = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	e.RetryAfter = retryAfter(res.Header.Get("Retry-After"), time.Now())
	return e
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
