package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
)

// HeaderRequestID carries the request id, both ways.
const HeaderRequestID = "X-Request-Id"

// MaxRequestIDLength is the longest X-Request-Id taken from a caller.
const MaxRequestIDLength = 128

type ctxKey int

const requestIDKey ctxKey = 0

// requestID returns the id of the request of ctx.
func requestID(ctx context.Context) string {
	if f, ok := ctx.Value(requestIDKey).(*requestFrame); ok {
		return f.id
	}
	return ""
}

// requestFrame is what frame keeps of a request: its id, which the
// request's context carries (as a pointer, which needs no allocation of
// its own, unlike a string), and the status written.
type requestFrame struct {
	id string
	w  statusWriter
	// idHeader is the value of the X-Request-Id answer header, held here
	// to save it an allocation of its own.
	idHeader [1]string
	// span is the request's server span when the gateway traces (see
	// traceRequest); the request's context carries it too when sampled.
	span trace.Span
	// traceparent is what the messages of a request left out by the
	// sampler before any span was started carry (see traceRequest).
	traceparent string
}

// requestIDs makes request ids: a random prefix per process and a counter,
// unique without a random read per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var buf [32]byte
	b := append(buf[:0], g.prefix...)
	return string(strconv.AppendUint(b, g.n.Add(1), 10))
}

// validRequestID reports whether a caller's X-Request-Id is kept: 1–128
// printable ASCII characters, no space.
func validRequestID(s string) bool {
	if s == "" || len(s) > MaxRequestIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeOf returns the route pattern that served r, or "unmatched".
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// frame is the outermost middleware: it gives every request an id (the
// caller's, if well formed) and the X-Request-Id header, turns a panic into
// a 500 problem, and counts and times the request by route and status.
func (s *Server) frame(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = s.ids.next()
		}
		f := &requestFrame{id: id, w: statusWriter{ResponseWriter: w}, idHeader: [1]string{id}}
		w.Header()[HeaderRequestID] = f.idHeader[:] // the name is in canonical form
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, f))
		sw := &f.w
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http compares it
					panic(v)
				}
				s.log.LogAttrs(r.Context(), slog.LevelError, "handler panicked",
					slog.String("request_id", id), slog.String("route", routeOf(r)),
					slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
				if sw.status == 0 {
					writeProblem(sw, r, http.StatusInternalServerError, &Error{Code: CodeInternal, Detail: "internal error"})
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			route := routeOf(r)
			s.m.requests.WithLabelValues(route, statusLabel(status)).Inc()
			s.m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// notFound and methodNotAllowed answer unrouted requests with problems.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errorf(CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, &Error{Code: CodeInvalidRequest, status: http.StatusMethodNotAllowed,
		Detail: "method " + r.Method + " is not allowed on " + r.URL.Path})
}

// statusLabels are the status labels of the request metrics, made once:
// strconv.Itoa allocates for numbers from 100.
var statusLabels = func() (l [500]string) {
	for i := range l {
		l[i] = strconv.Itoa(100 + i)
	}
	return l
}()

// statusLabel returns an HTTP status as a metric label.
func statusLabel(status int) string {
	if status >= 100 && status < 100+len(statusLabels) {
		return statusLabels[status-100]
	}
	return strconv.Itoa(status)
}
