package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/internal/lowerhex"
	"github.com/fairq/fairq/internal/telemetry"
)

// Defaults of PushConfig, aws-sqsd's.
const (
	MimeTypeDefault       = "application/json"
	ConnectTimeoutDefault = 5 * time.Second
)

// PushConfig configures Push.
type PushConfig struct {
	// URL is where messages are POSTed (worker.push_url), e.g.
	// http://127.0.0.1:80/. Periodic tasks go to their own path on the
	// same scheme and host.
	URL string
	// MimeType is the Content-Type of every push; default application/json.
	MimeType string
	// Connections is how many idle connections to the application are
	// kept for reuse; default ConnectionsDefault. The worker's
	// Config.Connections bounds how many pushes run at once.
	Connections int
	// ConnectTimeout bounds connecting to the application; default 5 s.
	ConnectTimeout time.Duration
	// Version is fairq's version, sent in User-Agent:
	// "aws-sqsd/1.11 (fairq/<version>)".
	Version string
	// NowFunc is the clock used to read a Retry-After date; default time.Now.
	NowFunc func() time.Time
	// Transport replaces the HTTP transport built from the fields above
	// (tests); ConnectTimeout and Connections are then not used.
	Transport http.RoundTripper
}

func (c PushConfig) withDefaults() PushConfig {
	c.MimeType = cmp.Or(c.MimeType, MimeTypeDefault)
	c.Connections = cmp.Or(c.Connections, ConnectionsDefault)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, ConnectTimeoutDefault)
	c.Version = cmp.Or(c.Version, "dev")
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

func (c PushConfig) validate() (*url.URL, error) {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return nil, fmt.Errorf("%w: push URL is empty", ErrInvalidConfig)
	case err != nil:
		return nil, fmt.Errorf("%w: push URL: %v", ErrInvalidConfig, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("%w: push URL %q must be an absolute http or https URL", ErrInvalidConfig, c.URL)
	case c.Connections < 1:
		return nil, fmt.Errorf("%w: push connections %d must be at least 1", ErrInvalidConfig, c.Connections)
	case c.ConnectTimeout < 0:
		return nil, fmt.Errorf("%w: connect timeout %v is negative", ErrInvalidConfig, c.ConnectTimeout)
	case !validHeaderValue(c.MimeType):
		return nil, fmt.Errorf("%w: mime type %q", ErrInvalidConfig, c.MimeType)
	}
	return u, nil
}

// Push is the Handler of `fairq worker`: it POSTs each message to the
// application with the headers of aws-sqsd (see Header), so that an
// application written for an Elastic Beanstalk worker environment runs
// unchanged behind fairq.
//
// Outcomes: a 2xx answer is success; 429 or 503 with a Retry-After header
// (seconds or an HTTP date) is a *RetryAfterError; any other status is a
// *StatusError; no answer before ctx ends wraps ErrNoResponse. Redirects
// are not followed: a 3xx is a failure like any other non-2xx status.
type Push struct {
	url       *url.URL
	client    *http.Client
	transport *http.Transport // nil when PushConfig.Transport was given
	userAgent []string
	mimeType  []string
	now       func() time.Time
	dialer    *net.Dialer
}

var _ Handler = (*Push)(nil)

// NewPush returns a Push handler, or an error wrapping ErrInvalidConfig.
func NewPush(cfg PushConfig) (*Push, error) {
	cfg = cfg.withDefaults()
	u, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Push{
		url:       u,
		userAgent: []string{"aws-sqsd/1.11 (fairq/" + cfg.Version + ")"},
		mimeType:  []string{cfg.MimeType},
		now:       cfg.NowFunc,
		dialer:    &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second},
	}
	rt := cfg.Transport
	if rt == nil {
		p.transport = &http.Transport{
			Proxy:                 nil, // the application is local; never go through a proxy
			DialContext:           p.dialer.DialContext,
			TLSHandshakeTimeout:   cfg.ConnectTimeout,
			MaxIdleConns:          cfg.Connections,
			MaxIdleConnsPerHost:   cfg.Connections,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
		rt = p.transport
	}
	p.client = &http.Client{
		Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return p, nil
}

// Close closes the idle connections to the application. A Worker does not
// close its Handler: the caller that made the Push closes it once the
// Worker using it has stopped. Close may be called more than once; it
// does nothing for a Push given its own PushConfig.Transport.
func (p *Push) Close() {
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
}

// Ping reports whether the application accepts connections: it opens a
// TCP connection to the push URL's host and closes it, within ctx and the
// connect timeout. It is the application half of the worker's readiness
// (aws-sqsd has no probe; Kubernetes needs one).
func (p *Push) Ping(ctx context.Context) error {
	host := p.url.Host
	if p.url.Port() == "" {
		port := "80"
		if p.url.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(p.url.Hostname(), port)
	}
	conn, err := p.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("push URL %s: %w", p.url.Redacted(), err)
	}
	return conn.Close()
}

// maxDrain is how much of an answer's body is read so that its connection
// can be reused; the body is otherwise ignored.
const maxDrain = 64 << 10

// Handle POSTs m to the application.
func (p *Push) Handle(ctx context.Context, m *Message) error {
	req, err := p.request(ctx, m)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			cause := context.Cause(ctx)
			if errors.Is(cause, context.DeadlineExceeded) {
				cause = ErrNoResponse
			}
			return fmt.Errorf("push: %w", cause)
		}
		return fmt.Errorf("push: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	serr := &StatusError{Code: resp.StatusCode, Status: resp.Status}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), p.now()); ok {
			return &RetryAfterError{After: d, Err: serr}
		}
	}
	return serr
}

// request builds the POST of m.
func (p *Push) request(ctx context.Context, m *Message) (*http.Request, error) {
	u := p.url
	body := m.Body
	if m.Task != nil {
		// Only the path and query of the task's URL are used: the
		// scheme and host are always those of the push URL, whatever
		// the message says.
		ref, err := url.Parse(m.Task.Path)
		if err != nil || !strings.HasPrefix(ref.Path, "/") {
			return nil, fmt.Errorf("push: task %q: invalid path %q", m.Task.Name, m.Task.Path)
		}
		t := *p.url
		t.Path, t.RawPath, t.RawQuery, t.Fragment = ref.Path, ref.RawPath, ref.RawQuery, ""
		u = &t
		body = "" // aws-sqsd posts periodic tasks without a body
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	req.Header = p.header(m)
	// With tracing, the application's spans nest under the delivery's:
	// its traceparent replaces the sender's.
	telemetry.InjectHTTP(ctx, req.Header)
	return req, nil
}

// Header names of the push, with aws-sqsd's spelling.
const (
	HeaderMsgid           = "X-Aws-Sqsd-Msgid"
	HeaderQueue           = "X-Aws-Sqsd-Queue"
	HeaderFirstReceivedAt = "X-Aws-Sqsd-First-Received-At"
	HeaderReceiveCount    = "X-Aws-Sqsd-Receive-Count"
	HeaderAttrPrefix      = "X-Aws-Sqsd-Attr-"
	HeaderTaskname        = "X-Aws-Sqsd-Taskname"
	HeaderScheduledAt     = "X-Aws-Sqsd-Scheduled-At"
	HeaderTenant          = "X-Fairq-Tenant"
	HeaderEnqueuedAt      = "X-Fairq-Enqueued-At"
	HeaderTraceparent     = "traceparent"
	HeaderTracestate      = "tracestate"
	// HeaderIdempotencyKey carries the Idempotency-Key the message was
	// enqueued with.
	HeaderIdempotencyKey = "X-Fairq-Idempotency-Key"
	// HeaderAttrEncoded lists, comma-separated, the attributes whose
	// X-Aws-Sqsd-Attr- value was percent-encoded because it held
	// characters a header value cannot carry (see Header).
	HeaderAttrEncoded = "X-Fairq-Attr-Encoded"
)

// Time formats of the headers: aws-sqsd sends ISO 8601 UTC to the second
// (2014-10-21T11:01:06Z); X-Fairq-Enqueued-At has the milliseconds that
// fairq-meta keeps.
const (
	timeFormat   = "2006-01-02T15:04:05Z"
	timeFormatMS = "2006-01-02T15:04:05.000Z"
)

// Header returns the headers Push sends with m, without User-Agent and
// Content-Type. Values are sanitised so that no message can inject a
// header: an attribute whose value holds a control character (CR, LF, NUL,
// DEL…) is sent percent-encoded (those characters and '%' itself, so that
// url.PathUnescape restores it exactly) and named in X-Fairq-Attr-Encoded;
// an attribute whose name is not an HTTP token is left out, as is a tenant,
// task name or traceparent that is not a valid header value. Attribute
// names keep their case on the wire.
func Header(m *Message) http.Header {
	h := make(http.Header, 10+len(m.Attributes))
	h[HeaderMsgid] = []string{m.ID}
	h[HeaderQueue] = []string{m.Queue}
	if !m.FirstReceivedAt.IsZero() {
		h[HeaderFirstReceivedAt] = []string{m.FirstReceivedAt.UTC().Format(timeFormat)}
	}
	h[HeaderReceiveCount] = []string{strconv.Itoa(m.ReceiveCount)}
	var encoded []string
	for name, v := range m.Attributes {
		if !validToken(name) {
			continue
		}
		if !validHeaderValue(v) {
			v = percentEncode(v)
			encoded = append(encoded, name)
		}
		h[HeaderAttrPrefix+name] = []string{v}
	}
	if len(encoded) > 0 {
		h[HeaderAttrEncoded] = []string{strings.Join(encoded, ",")}
	}
	if m.Tenant != "" && validHeaderValue(m.Tenant) {
		h[HeaderTenant] = []string{m.Tenant}
	}
	if !m.EnqueuedAt.IsZero() {
		h[HeaderEnqueuedAt] = []string{m.EnqueuedAt.UTC().Format(timeFormatMS)}
	}
	if m.IdempotencyKey != "" && validHeaderValue(m.IdempotencyKey) {
		h[HeaderIdempotencyKey] = []string{m.IdempotencyKey}
	}
	if m.Traceparent != "" && validTraceparent(m.Traceparent) {
		h[HeaderTraceparent] = []string{m.Traceparent}
		if m.Tracestate != "" && validHeaderValue(m.Tracestate) {
			h[HeaderTracestate] = []string{m.Tracestate}
		}
	}
	if m.Task != nil {
		if validHeaderValue(m.Task.Name) {
			h[HeaderTaskname] = []string{m.Task.Name}
		}
		h[HeaderScheduledAt] = []string{m.Task.ScheduledAt.UTC().Format(timeFormat)}
	}
	return h
}

// header returns all the headers of the push of m.
func (p *Push) header(m *Message) http.Header {
	h := Header(m)
	h["Content-Type"] = p.mimeType
	h["User-Agent"] = p.userAgent
	return h
}

// validToken reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// syntax of a header name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can be sent as a header value as it
// is: no control characters other than tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// percentEncode encodes the control characters of s and '%'.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// validTraceparent checks the shape of a W3C traceparent:
// version-traceid-parentid-flags in lower-case hex, 2-32-16-2 digits
// (a future version may append fields after another '-').
func validTraceparent(s string) bool {
	n := telemetry.TraceparentLen
	if len(s) < n || len(s) > n && s[n] != '-' || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	return lowerhex.Valid(s[0:2]) && lowerhex.Valid(s[3:35]) && lowerhex.Valid(s[36:52]) && lowerhex.Valid(s[53:55]) &&
		validHeaderValue(s)
}

// maxRetryAfter bounds a Retry-After to what a visibility timeout can be.
const maxRetryAfter = 12 * time.Hour

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// errorText is the text of a failure, as carried to the dead-letter queue.
func errorText(err error) string {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}
