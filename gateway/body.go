package gateway

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fairq/fairq/tenant"
)

// Request bodies are read into memory, so a client's Content-Length is a
// claim on the gateway's memory. It is honoured only within three bounds,
// all checked before a byte of the body is read:
//
//   - the endpoint's own cap (a message: three times max_message_size,
//     for JSON escapes, plus room for its fields; a batch: MaxBatchBody);
//   - a budget of body bytes held at once by the whole gateway
//     (MaxInflightBytes), past which the answer is 503;
//   - a tenant's share of that budget (MaxTenantInflightBytes), past which
//     the tenant's requests are answered 429 while others' go on.
//
// A request claims its Content-Length from the budget before its body is
// read (a chunked body claims as it grows) and gives it back once the body
// is decoded. The buffer grows with the bytes that arrive, never from the
// declared length, and only small buffers are pooled, so that a client
// that declares megabytes and sends one byte costs a reservation, not
// memory. The server's ReadTimeout bounds how long a body may take, from
// the request's first byte, so that a trickle cannot hold a reservation
// for longer.

// Defaults of the body budget.
const (
	MaxInflightBytesDefault       = 64 << 20
	MaxTenantInflightBytesDefault = 16 << 20
)

// bodyChunk is the reservation step of a body of unknown length, and the
// size of the first read of any body.
const bodyChunk = 64 << 10

// bodyBudget counts the request body bytes held, in all and by tenant.
type bodyBudget struct {
	max, perTenant int64

	mu      sync.Mutex
	total   int64
	tenants map[string]int64
}

func newBodyBudget(max, perTenant int64) *bodyBudget {
	return &bodyBudget{max: max, perTenant: perTenant, tenants: make(map[string]int64)}
}

// Scopes of a refusal by the budget, the label of
// fairq_body_budget_refused_total.
const (
	scopeGateway = "gateway"
	scopeTenant  = "tenant"
)

// reserve takes n bytes for a tenant; it returns the scope that refused
// them, or "".
func (b *bodyBudget) reserve(tenant string, n int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.tenants[tenant]
	switch {
	case held+n > b.perTenant:
		return scopeTenant
	case b.total+n > b.max:
		return scopeGateway
	}
	b.tenants[tenant] = held + n
	b.total += n
	return ""
}

// release gives back n bytes of a tenant.
func (b *bodyBudget) release(tenant string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if left := b.tenants[tenant] - n; left > 0 {
		b.tenants[tenant] = left
	} else {
		delete(b.tenants, tenant)
	}
}

// bodyRetry is the Retry-After of a refusal by the budget: bodies are read
// within the server's ReadTimeout, so room comes back quickly.
const bodyRetry = time.Second

// readBody reads the request body of tenant t, at most limit bytes, within
// the body budget. Release the body once nothing refers to its data any
// more: that gives its buffer and its reservation back.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, t tenant.Tenant, limit int64) (body, error) {
	if r.ContentLength > limit {
		return body{}, &http.MaxBytesError{Limit: limit}
	}
	b := body{rd: bodyReader{s: s, tenant: t.ID}}
	if r.ContentLength >= 0 {
		if err := b.rd.reserve(r.ContentLength); err != nil {
			return body{}, err
		}
		b.rd.fixed = true
	}
	b.bp = bodyBuffers.Get().(*[]byte)
	var err error
	if b.data, err = b.rd.read((*b.bp)[:0], http.MaxBytesReader(w, r.Body, limit)); err != nil {
		putBodyBuffer(b.bp, nil)
		b.rd.release()
		return body{}, err
	}
	return b, nil
}

// body is a request body read within the budget.
type body struct {
	data []byte
	bp   *[]byte // the pooled buffer data was read into
	rd   bodyReader
}

// release gives the body's buffer and reservation back.
func (b *body) release() {
	putBodyBuffer(b.bp, b.data)
	b.rd.release()
	b.data = nil
}

// bodyReader reads one body within its reservation.
type bodyReader struct {
	s        *Server
	tenant   string
	reserved int64
	fixed    bool // the body has a Content-Length, reserved whole
}

func (rd *bodyReader) reserve(n int64) error {
	if scope := rd.s.bodies.reserve(rd.tenant, n); scope != "" {
		rd.s.m.bodyRefused.WithLabelValues(scope).Inc()
		if scope == scopeTenant {
			return &Error{Code: CodeRateLimited, RetryAfter: bodyRetry,
				Detail: "tenant " + rd.tenant + " has " + strconv.FormatInt(rd.s.cfg.MaxTenantInflightBytes>>20, 10) + " MiB of request bodies in flight, its share of the gateway; retry"}
		}
		return &Error{Code: CodeUnavailable, RetryAfter: bodyRetry, Detail: "the gateway holds as many request bodies as it may; retry"}
	}
	rd.reserved += n
	rd.s.m.bodyBytes.Add(float64(n))
	return nil
}

func (rd *bodyReader) release() {
	rd.s.bodies.release(rd.tenant, rd.reserved)
	rd.s.m.bodyBytes.Sub(float64(rd.reserved))
	rd.reserved = 0
}

// read appends the body to buf, growing it as bytes arrive: at most
// doubling, and never beyond the Content-Length (plus one byte, to see
// the end).
func (rd *bodyReader) read(buf []byte, body io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			grow := max(cap(buf), bodyChunk/16)
			if rd.fixed {
				grow = min(grow, int(rd.reserved)+1-len(buf))
			} else if need := int64(len(buf) + grow); need > rd.reserved {
				if err := rd.reserve(max(need-rd.reserved, bodyChunk)); err != nil {
					return nil, err
				}
			}
			buf = slices.Grow(buf, max(grow, 1))
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, &Error{Code: CodeInvalidRequest, Detail: "could not read the request body", Err: err}
		}
	}
}

// bodyBuffers holds the buffers request bodies are read into. A decoded
// message keeps nothing of its body's buffer (its strings are copies), so
// the buffer serves the next request.
var bodyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 4<<10)
	return &b
}}

// maxPooledBody is the largest body buffer put back in bodyBuffers; larger
// ones are left to the garbage collector, so that a few large requests do
// not keep their memory.
const maxPooledBody = 64 << 10

// putBodyBuffer puts bp back in bodyBuffers, holding data's array if data
// was read into it and is small enough.
func putBodyBuffer(bp *[]byte, data []byte) {
	if data != nil {
		if cap(data) > maxPooledBody {
			return
		}
		*bp = data[:0]
	}
	bodyBuffers.Put(bp)
}

// readSmallBody reads a body of at most limit bytes outside the budget:
// the admin API's, behind its token, whose cap is small.
func readSmallBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, &Error{Code: CodeInvalidRequest, Detail: "could not read the request body", Err: err}
	}
	return data, nil
}
