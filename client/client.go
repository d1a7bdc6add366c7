package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of WithRetries.
const (
	MaxAttemptsDefault = 4
	BackoffBaseDefault = 100 * time.Millisecond
	BackoffCapDefault  = 5 * time.Second
)

// userAgent names the client to the gateway's logs.
const userAgent = "fairq-go-client"

// maxAnswer bounds what is read of a successful answer (a batch of 100
// results is a few KiB).
const maxAnswer = 4 << 20

// Client calls fairq's API with one tenant's API key. It is safe for
// concurrent use.
type Client struct {
	base    string // scheme://host[/path], without a trailing slash
	auth    string // "Bearer <key>"
	http    *http.Client
	retries retryPolicy
	genKeys bool
}

// New returns a client of the gateway at baseURL (e.g.
// "https://fairq.example.com") that authenticates with key.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("fairq: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("fairq: base URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return nil, errors.New("fairq: the API key is empty or has spaces")
	}
	c := &Client{
		base:    strings.TrimSuffix(u.String(), "/"),
		auth:    "Bearer " + key,
		http:    http.DefaultClient,
		retries: retryPolicy{maxAttempts: MaxAttemptsDefault, base: BackoffBaseDefault, ceiling: BackoffCapDefault},
	}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Option configures a Client.
type Option func(*Client) error

// WithHTTPClient makes the client send its requests with hc (its
// transport, proxy, TLS and timeouts) instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("fairq: WithHTTPClient(nil)")
		}
		c.http = hc
		return nil
	}
}

// WithRetries sets how often a call is tried in all (1: never retried) and
// the base and cap of the exponential backoff between tries when the
// answer has no Retry-After. The package documentation says what is
// retried.
func WithRetries(maxAttempts int, base, ceiling time.Duration) Option {
	return func(c *Client) error {
		if maxAttempts < 1 || base <= 0 || ceiling < base {
			return fmt.Errorf("fairq: WithRetries(%d, %v, %v): want at least 1 attempt and 0 < base <= cap", maxAttempts, base, ceiling)
		}
		c.retries = retryPolicy{maxAttempts: maxAttempts, base: base, ceiling: ceiling}
		return nil
	}
}

// WithIdempotencyKeys makes Enqueue generate an Idempotency-Key for a
// Message that has none, and EnqueueBatch one for each such message, so
// that every attempt of a call carries the same key: a retry after a lost
// answer cannot enqueue the message twice, and such retries are made.
func WithIdempotencyKeys() Option {
	return func(c *Client) error {
		c.genKeys = true
		return nil
	}
}

// newKey returns a fresh idempotency key: 32 hex digits.
func newKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// answer is one HTTP answer, read whole.
type answer struct {
	res  *http.Response
	body []byte
}

// send makes one attempt of a call.
func (c *Client) send(ctx context.Context, method, path string, body []byte, idempotencyKey string) (answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{}, fmt.Errorf("fairq: %w", err)
	}
	h := req.Header
	h["Authorization"] = []string{c.auth}
	h["User-Agent"] = []string{userAgent}
	h["Accept"] = []string{"application/json, application/problem+json"}
	if body != nil {
		h["Content-Type"] = []string{"application/json"}
	}
	if idempotencyKey != "" {
		h["Idempotency-Key"] = []string{idempotencyKey}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	limit := int64(maxAnswer)
	if res.StatusCode >= 300 {
		limit = maxErrorBody
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, limit))
	if err != nil {
		return answer{}, fmt.Errorf("fairq: reading the answer to %s %s: %w", method, path, err)
	}
	return answer{res: res, body: raw}, nil
}

// attemptFunc makes one attempt of a call and says whether another may
// follow, and after what wait the server asked for.
type attemptFunc func(ctx context.Context) (again bool, retryAfter time.Duration, err error)

// retry runs attempt until it needs no other, the attempts run out, or the
// next one could not start before ctx's deadline; it returns the last
// attempt's error.
func (c *Client) retry(ctx context.Context, attempt attemptFunc) error {
	for n := 1; ; n++ {
		again, after, err := attempt(ctx)
		if !again || n >= c.retries.maxAttempts {
			return err
		}
		wait := c.retries.wait(n, after, mathrand.Float64())
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return err // sleeping would pass the deadline
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if err == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w while waiting to retry after: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}
