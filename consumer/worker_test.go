package consumer_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
)

// TestDeleteAfterSuccess: a 2xx deletes the message; nothing is left on
// any queue.
func TestDeleteAfterSuccess(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			url, reqs := app(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
			for i := range 3 {
				send(t, b, names.Live[i%2], msg{tenant: "acme"})
			}
			w := start(t, consumer.Config{Backend: b, Names: names, Handler: newPush(t, consumer.PushConfig{URL: url})})
			for range 3 {
				recv(t, reqs, 10*time.Second, "push")
			}
			stop(t, w) // flushes the deletes
			for _, q := range names.All() {
				if n := depth(t, b, q); n != 0 {
					t.Errorf("%s holds %d messages after success, want 0", q, n)
				}
			}
		})
	}
}

// TestRedeliveredAfterFailure: a non-2xx answer deletes nothing; the
// message comes back with X-Aws-Sqsd-Receive-Count 2 and is deleted once
// it succeeds.
func TestRedeliveredAfterFailure(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			url, reqs := app(t, func(n int, w http.ResponseWriter) {
				if n == 1 {
					w.WriteHeader(http.StatusInternalServerError)
				}
			})
			id := send(t, b, names.Live[0], msg{tenant: "acme"})
			w := start(t, consumer.Config{
				Backend: b, Names: names,
				Handler:     newPush(t, consumer.PushConfig{URL: url}),
				BackoffBase: time.Second,
				RandFunc:    func() float64 { return 0.999 }, // back after about 1 s
			})
			first := recv(t, reqs, 10*time.Second, "first push")
			if got := depth(t, b, names.Live[0]); got != 1 {
				t.Errorf("after the failure %s holds %d messages, want 1", names.Live[0], got)
			}
			second := recv(t, reqs, 10*time.Second, "second push")
			for i, r := range []request{first, second} {
				if got, want := r.header.Get("X-Aws-Sqsd-Receive-Count"), []string{"1", "2"}[i]; got != want {
					t.Errorf("push %d: X-Aws-Sqsd-Receive-Count = %s, want %s", i+1, got, want)
				}
				if got := r.header.Get("X-Aws-Sqsd-Msgid"); got != id {
					t.Errorf("push %d: X-Aws-Sqsd-Msgid = %s, want %s", i+1, got, id)
				}
			}
			stop(t, w)
			if got := depth(t, b, names.Live[0]); got != 0 {
				t.Errorf("after the success %s holds %d messages, want 0", names.Live[0], got)
			}
		})
	}
}

func TestNewInvalid(t *testing.T) {
	b, names := setup(t, "memory")
	h := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	valid := consumer.Config{Backend: b, Names: names, Handler: h}
	tests := []struct {
		name string
		edit func(c *consumer.Config)
	}{
		{"no backend", func(c *consumer.Config) { c.Backend = nil }},
		{"no handler", func(c *consumer.Config) { c.Handler = nil }},
		{"no live queue", func(c *consumer.Config) { c.Names.Live = nil }},
		{"negative connections", func(c *consumer.Config) { c.Connections = -1 }},
		{"visibility over 12 h", func(c *consumer.Config) { c.VisibilityTimeout = 13 * time.Hour }},
		{"negative max retries", func(c *consumer.Config) { c.MaxRetries = -2 }},
		{"wait over 20 s", func(c *consumer.Config) { c.ReceiveWait = time.Minute }},
		{"heartbeat not below visibility", func(c *consumer.Config) { c.HeartbeatInterval = time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			if _, err := consumer.New(cfg); !errors.Is(err, consumer.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := consumer.New(valid); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}
