package consumer_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
)

// request is what the test application saw of one push.
type request struct {
	method, path, body string
	header             http.Header
}

// app is a test application: it records every push and answers with
// answer(n) for the n-th push (from 1).
func app(t testing.TB, answer func(n int, w http.ResponseWriter)) (url string, reqs <-chan request) {
	t.Helper()
	ch := make(chan request, 100)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch <- request{r.Method, r.URL.RequestURI(), drainReader(r.Body), r.Header.Clone()}
		if answer == nil {
			return
		}
		answer(int(n.Add(1)), w)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func newPush(t testing.TB, cfg consumer.PushConfig) *consumer.Push {
	t.Helper()
	p, err := consumer.NewPush(cfg)
	if err != nil {
		t.Fatalf("NewPush: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestPushHeaders checks every header of the application contract
// (the aws-sqsd contract in the README) on a message that went through a queue.
func TestPushHeaders(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			url, reqs := app(t, nil)
			enqueued := time.Date(2025, 3, 1, 12, 0, 0, 123e6, time.UTC)
			id := send(t, b, names.Live[1], msg{
				body:   `{"order":42}`,
				tenant: "acme",
				meta:   &envelope.Meta{EnqueuedAt: enqueued.UnixMilli(), Attempts: 2, RequestID: "req-1", IdempotencyKey: "order-42"},
				attrs: map[string]string{
					"color":                  "blue",
					"Mixed.Case_name-1":      "100% sure",
					"evil":                   "a\r\nX-Injected: 1",
					envelope.AttrTraceparent: traceparent,
				},
			})
			before := time.Now().UTC().Truncate(time.Second)
			start(t, consumer.Config{
				Backend: b, Names: names,
				Handler: newPush(t, consumer.PushConfig{URL: url + "/work?x=1", MimeType: "text/plain; charset=utf-8", Version: "1.2.3"}),
			})
			r := recv(t, reqs, 10*time.Second, "push")
			after := time.Now().UTC()

			if r.method != http.MethodPost || r.path != "/work?x=1" || r.body != `{"order":42}` {
				t.Errorf("got %s %s %q, want POST /work?x=1 with the body", r.method, r.path, r.body)
			}
			first, err := time.Parse("2006-01-02T15:04:05Z", r.header.Get("X-Aws-Sqsd-First-Received-At"))
			if err != nil || first.Before(before) || first.After(after) {
				t.Errorf("X-Aws-Sqsd-First-Received-At = %q (%v), want ISO 8601 UTC between %v and %v",
					r.header.Get("X-Aws-Sqsd-First-Received-At"), err, before, after)
			}
			got := map[string]string{}
			for k := range r.header {
				lk := strings.ToLower(k)
				if strings.HasPrefix(lk, "x-aws-sqsd-") || strings.HasPrefix(lk, "x-fairq-") ||
					lk == "traceparent" || lk == "user-agent" || lk == "content-type" || lk == "x-injected" {
					got[k] = strings.Join(r.header.Values(k), "|")
				}
			}
			delete(got, "X-Aws-Sqsd-First-Received-At")
			want := map[string]string{
				"Content-Type":                      "text/plain; charset=utf-8",
				"User-Agent":                        "aws-sqsd/1.11 (fairq/1.2.3)",
				"X-Aws-Sqsd-Msgid":                  id,
				"X-Aws-Sqsd-Queue":                  names.Live[1],
				"X-Aws-Sqsd-Receive-Count":          "3", // two attempts before its move + this one
				"X-Aws-Sqsd-Attr-Color":             "blue",
				"X-Aws-Sqsd-Attr-Mixed.case_name-1": "100% sure",
				"X-Aws-Sqsd-Attr-Evil":              "a%0D%0AX-Injected: 1",
				"X-Fairq-Attr-Encoded":              "evil",
				"X-Fairq-Tenant":                    "acme",
				"X-Fairq-Enqueued-At":               "2025-03-01T12:00:00.123Z",
				"X-Fairq-Idempotency-Key":           "order-42",
				"Traceparent":                       traceparent,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeader checks the sanitising of header values and that attribute
// names keep their case on the wire.
func TestHeader(t *testing.T) {
	received := time.Date(2025, 1, 2, 3, 4, 5, 678e6, time.FixedZone("x", 3600))
	base := consumer.Message{ID: "id-1", Queue: "q", ReceiveCount: 1, FirstReceivedAt: received}
	tests := []struct {
		name string
		edit func(m *consumer.Message)
		want map[string]string // headers beyond the base ones
	}{
		{
			name: "plain",
			want: map[string]string{},
		},
		{
			name: "attribute case kept",
			edit: func(m *consumer.Message) { m.Attributes = map[string]string{"myAttr": "v"} },
			want: map[string]string{"X-Aws-Sqsd-Attr-myAttr": "v"},
		},
		{
			name: "control characters encoded, percent too",
			edit: func(m *consumer.Message) { m.Attributes = map[string]string{"a": "x\x00y%\x7f\n"} },
			want: map[string]string{"X-Aws-Sqsd-Attr-a": "x%00y%25%7F%0A", "X-Fairq-Attr-Encoded": "a"},
		},
		{
			name: "valid value with percent kept verbatim",
			edit: func(m *consumer.Message) { m.Attributes = map[string]string{"a": "50%\tok é"} },
			want: map[string]string{"X-Aws-Sqsd-Attr-a": "50%\tok é"},
		},
		{
			name: "name that is not a token dropped",
			edit: func(m *consumer.Message) { m.Attributes = map[string]string{"a b": "v", "c:d": "v", "": "v"} },
			want: map[string]string{},
		},
		{
			name: "tenant with a newline dropped",
			edit: func(m *consumer.Message) { m.Tenant = "acme\r\nX-Evil: 1" },
			want: map[string]string{},
		},
		{
			name: "tenant, enqueue time, traceparent",
			edit: func(m *consumer.Message) {
				m.Tenant = "acme"
				m.EnqueuedAt = time.UnixMilli(1700000000123)
				m.Traceparent = traceparent
			},
			want: map[string]string{
				"X-Fairq-Tenant":      "acme",
				"X-Fairq-Enqueued-At": "2023-11-14T22:13:20.123Z",
				"traceparent":         traceparent,
			},
		},
		{
			name: "invalid traceparent dropped",
			edit: func(m *consumer.Message) { m.Traceparent = "00-xyz\r\n" },
			want: map[string]string{},
		},
		{
			name: "periodic task",
			edit: func(m *consumer.Message) {
				m.Task = &envelope.Task{Name: "cleanup", Path: "/tasks/cleanup", ScheduledAt: time.Unix(1700000000, 0)}
			},
			want: map[string]string{
				"X-Aws-Sqsd-Taskname":     "cleanup",
				"X-Aws-Sqsd-Scheduled-At": "2023-11-14T22:13:20Z",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base
			if tt.edit != nil {
				tt.edit(&m)
			}
			want := map[string]string{
				"X-Aws-Sqsd-Msgid":             "id-1",
				"X-Aws-Sqsd-Queue":             "q",
				"X-Aws-Sqsd-Receive-Count":     "1",
				"X-Aws-Sqsd-First-Received-At": "2025-01-02T02:04:05Z",
			}
			for k, v := range tt.want {
				want[k] = v
			}
			got := map[string]string{}
			for k, v := range consumer.Header(&m) {
				got[k] = strings.Join(v, "|")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Header (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPushOutcomes checks how Push maps the application's answers.
func TestPushOutcomes(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   error // nil, *RetryAfterError or *StatusError (compared by value)
	}{
		{"200", func(w http.ResponseWriter) {}, nil},
		{"204", func(w http.ResponseWriter) { w.WriteHeader(204) }, nil},
		{"500", func(w http.ResponseWriter) { w.WriteHeader(500) },
			&consumer.StatusError{Code: 500, Status: "500 Internal Server Error"}},
		{"302 not followed", func(w http.ResponseWriter) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(302)
		}, &consumer.StatusError{Code: 302, Status: "302 Found"}},
		{"429 with seconds", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
		}, &consumer.RetryAfterError{After: 7 * time.Second, Err: &consumer.StatusError{Code: 429, Status: "429 Too Many Requests"}}},
		{"503 with a date", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(503)
		}, &consumer.RetryAfterError{After: 90 * time.Second, Err: &consumer.StatusError{Code: 503, Status: "503 Service Unavailable"}}},
		{"503 without Retry-After", func(w http.ResponseWriter) { w.WriteHeader(503) },
			&consumer.StatusError{Code: 503, Status: "503 Service Unavailable"}},
		{"429 with garbage Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "soon")
			w.WriteHeader(429)
		}, &consumer.StatusError{Code: 429, Status: "429 Too Many Requests"}},
		{"500 with Retry-After is a failure", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(500)
		}, &consumer.StatusError{Code: 500, Status: "500 Internal Server Error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, _ := app(t, func(_ int, w http.ResponseWriter) { tt.answer(w) })
			p := newPush(t, consumer.PushConfig{URL: url, NowFunc: func() time.Time { return now }})
			err := p.Handle(context.Background(), &consumer.Message{ID: "1", Queue: "q", Body: "x"})
			if diff := cmp.Diff(tt.want, err, cmp.Comparer(func(a, b error) bool {
				return a == nil && b == nil || a != nil && b != nil && a.Error() == b.Error()
			})); diff != "" {
				t.Errorf("Handle (-want +got):\n%s", diff)
			}
			if tt.want != nil {
				var ra *consumer.RetryAfterError
				wantRA := errors.As(tt.want, &ra)
				if gotRA := errors.As(err, &ra); gotRA != wantRA {
					t.Errorf("errors.As(RetryAfterError) = %v, want %v", gotRA, wantRA)
				}
			}
		})
	}
}

// TestPushNoResponse checks that a push is cancelled at its deadline and
// that a refused connection is an error.
func TestPushNoResponse(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	url, _ := app(t, func(_ int, w http.ResponseWriter) { <-release })
	defer close(release)
	p := newPush(t, consumer.PushConfig{URL: url})
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, consumer.ErrNoResponse)
	defer cancel()
	if err := p.Handle(ctx, &consumer.Message{ID: "1", Queue: "q", Body: "x"}); !errors.Is(err, consumer.ErrNoResponse) {
		t.Errorf("Handle past the deadline = %v, want ErrNoResponse", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p = newPush(t, consumer.PushConfig{URL: "http://" + addr + "/", ConnectTimeout: time.Second})
	if err := p.Handle(context.Background(), &consumer.Message{ID: "1", Queue: "q", Body: "x"}); err == nil {
		t.Error("Handle with nothing listening succeeded")
	}
}

func TestNewPushInvalid(t *testing.T) {
	for _, cfg := range []consumer.PushConfig{
		{},
		{URL: "127.0.0.1:80"},
		{URL: "ftp://host/"},
		{URL: "http://host/", MimeType: "a\nb"},
		{URL: "http://host/", ConnectTimeout: -1},
	} {
		if _, err := consumer.NewPush(cfg); !errors.Is(err, consumer.ErrInvalidConfig) {
			t.Errorf("NewPush(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestPushClose: Close closes the idle connections to the application; it
// may be called more than once.
func TestPushClose(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		drainReader(r.Body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p, err := consumer.NewPush(consumer.PushConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m := &consumer.Message{ID: "m-1", Queue: "q", Body: "{}", Tenant: "acme"}
	if err := p.Handle(context.Background(), m); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	p.Close()
	recv(t, closed, 10*time.Second, "connection closed by Close")
	p.Close()
}
