package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxInFlight bounds the enqueue requests the generator has open at once;
// a send due while all are open is skipped and counted, so that a stalled
// gateway cannot make the harness itself the bottleneck unnoticed.
const maxInFlight = 2048

// requestTimeout bounds each enqueue request of the generator.
const requestTimeout = 15 * time.Second

// Send is one enqueue request of the load.
type Send struct {
	// Seq is the message's number in the run, sent as attribute lt-seq.
	Seq    int64
	Tenant string
	Poison bool
	// At is when the request was sent, Took how long its answer took;
	// Late is how long after its due time it was sent (the harness
	// itself was held up: a sign of an overloaded machine).
	At   time.Time
	Took time.Duration
	Late time.Duration
	// Status is the HTTP status, 0 after a transport error.
	Status int
	// Code is the problem code of an error answer.
	Code string
	// ID is the message id of a 202.
	ID string
	// Gateway is the index of the gateway the last attempt went to, among
	// those the generator spreads its load over (0 with one).
	Gateway int
	// Key is the Idempotency-Key a careful client sent with every attempt
	// of the message; empty otherwise.
	Key string
	// Replayed is set when the final answer was a 200 with
	// Idempotent-Replayed: true, an earlier attempt's acceptance.
	Replayed bool
	// Attempts are the requests made for the message, in order: one,
	// unless a careful client tried again. At, Took, Status and Code
	// above are the first attempt's start and the last one's answer.
	Attempts []Attempt
}

// Attempt is one request of a message.
type Attempt struct {
	At   time.Time
	Took time.Duration
	// Status is the HTTP status, 0 after a transport error.
	Status int
	Code   string
}

// Accepted reports whether the gateway accepted the message: a 202, or a
// replay of one.
func (s Send) Accepted() bool {
	return s.Status == http.StatusAccepted || s.Replayed && s.Status == http.StatusOK
}

// Retried reports whether the message's first attempt was answered 503 or
// failed in transport, so that a careful client sent it again.
func (s Send) Retried() bool {
	return len(s.Attempts) > 1 && (s.Attempts[0].Status == 0 || s.Attempts[0].Status == http.StatusServiceUnavailable)
}

// retryPolicy makes the generator a careful client: every message carries
// an Idempotency-Key of its own, and a 503, a 429, a 409 for a key still in
// progress or a transport error is answered by sending the same message
// with the same key again, after Retry-After or a short backoff, until For
// has passed since the first attempt.
type retryPolicy struct {
	For time.Duration
	// Backoff is the first wait after an answer without Retry-After; it
	// doubles up to a second, with full jitter.
	Backoff time.Duration
}

// generator offers each tenant's load at a constant rate, open loop: each
// message is sent when it is due, whatever happened to the earlier ones.
type generator struct {
	// urls are the enqueue URLs of the gateways, taken in turn, one per
	// request.
	urls    []string
	keys    map[string]string
	tenants []Tenant
	client  *http.Client

	// careful, when not nil, makes every message idempotent and retried
	// (retryPolicy); keyPrefix then begins its keys.
	careful   *retryPolicy
	keyPrefix string
	// poisson spaces each tenant's sends at random, exponentially, at the
	// same mean rate, as many independent clients send; else they are
	// evenly spaced.
	poisson bool

	seq     atomic.Int64
	turn    atomic.Uint64 // the next request's gateway, modulo len(urls)
	skipped atomic.Int64
	sem     chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	sends []Send
}

func newGenerator(baseURL string, keys map[string]string, tenants []Tenant) *generator {
	return &generator{
		urls:    []string{baseURL + "/v1/messages"},
		keys:    keys,
		tenants: tenants,
		client: &http.Client{
			Timeout:   requestTimeout,
			Transport: &http.Transport{MaxIdleConns: maxInFlight, MaxIdleConnsPerHost: maxInFlight, IdleConnTimeout: 30 * time.Second},
		},
		sem: make(chan struct{}, maxInFlight),
	}
}

// spread makes g send its requests to the gateways at baseURLs in turn,
// one each, as a load balancer would. Call it before run.
func (g *generator) spread(baseURLs []string) {
	g.urls = g.urls[:0]
	for _, u := range baseURLs {
		g.urls = append(g.urls, u+"/v1/messages")
	}
}

// beCareful makes g a careful client (retryPolicy), with up to inFlight
// messages open at once: a message being retried holds its place. An
// attempt may wait for its answer as long as the retries may last, so
// that a slow 503 is seen as such, not as the client's own timeout. Call
// it before run.
func (g *generator) beCareful(p retryPolicy, inFlight int) {
	g.careful, g.keyPrefix = &p, "lt-"+randomHex(6)+"-"
	g.sem = make(chan struct{}, inFlight)
	g.client.Timeout = max(g.client.Timeout, p.For)
}

// run sends for d from start, then waits for every answer. Sends are
// spread: tenant i starts i/n of a period after start, so that the
// tenants' messages do not arrive in step.
func (g *generator) run(ctx context.Context, start time.Time, d time.Duration) {
	var tenants sync.WaitGroup
	for i, t := range g.tenants {
		tenants.Add(1)
		go func() {
			defer tenants.Done()
			period := time.Duration(float64(time.Second) / t.Rate)
			g.tenant(ctx, t, start.Add(period*time.Duration(i)/time.Duration(len(g.tenants))), start.Add(d))
		}()
	}
	tenants.Wait()
	g.wg.Wait()
	g.client.CloseIdleConnections()
}

// tenant sends t's messages from first until end.
func (g *generator) tenant(ctx context.Context, t Tenant, first, end time.Time) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	due := first
	for n := 0; ; n++ {
		switch {
		case g.poisson && n > 0:
			due = due.Add(time.Duration(rand.ExpFloat64() * float64(time.Second) / t.Rate))
		case !g.poisson:
			due = first.Add(time.Duration(float64(n) * float64(time.Second) / t.Rate))
		}
		if !due.Before(end) {
			return
		}
		timer.Reset(time.Until(due))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		select {
		case g.sem <- struct{}{}:
		default:
			g.skipped.Add(1)
			continue
		}
		poison := t.PoisonEvery > 0 && (n+1)%t.PoisonEvery == 0
		g.wg.Add(1)
		go func(due time.Time) {
			defer g.wg.Done()
			defer func() { <-g.sem }()
			s := g.send(ctx, t.ID, poison)
			s.Late = s.At.Sub(due)
			g.record(s)
		}(due)
	}
}

// record keeps s among the results.
func (g *generator) record(s Send) {
	g.mu.Lock()
	g.sends = append(g.sends, s)
	g.mu.Unlock()
}

type enqueueBody struct {
	Body       map[string]any    `json:"body"`
	Attributes map[string]string `json:"attributes"`
}

// send sends one message: one POST /v1/messages, or, for a careful
// client, as many as it takes (retryPolicy).
func (g *generator) send(ctx context.Context, tenant string, poison bool) Send {
	s := Send{Seq: g.seq.Add(1), Tenant: tenant, Poison: poison}
	seq := strconv.FormatInt(s.Seq, 10)
	msg := enqueueBody{Body: map[string]any{"seq": s.Seq, "tenant": tenant}, Attributes: map[string]string{AttrSeq: seq}}
	if poison {
		msg.Attributes[AttrKind] = kindPoison
	}
	body, _ := json.Marshal(msg) // cannot fail: strings and numbers
	if g.careful != nil {
		s.Key = g.keyPrefix + seq
	}
	backoff := time.Duration(0)
	if g.careful != nil {
		backoff = g.careful.Backoff
	}
	for {
		a, retryAfter := g.attempt(ctx, &s, body)
		if len(s.Attempts) == 0 {
			s.At = a.At
		}
		s.Attempts = append(s.Attempts, a)
		s.Status, s.Code, s.Took = a.Status, a.Code, time.Since(s.At)
		if g.careful == nil || !retryable(a) || ctx.Err() != nil {
			return s
		}
		wait := retryAfter
		if wait <= 0 {
			wait = rand.N(backoff) + 1
			backoff = min(2*backoff, time.Second)
		}
		if time.Since(s.At)+wait > g.careful.For {
			return s // given up: the last answer stands
		}
		if sleepUntil(ctx, time.Now().Add(wait)) != nil {
			return s
		}
	}
}

// retryable reports whether a careful client sends the message again
// after the answer a.
func retryable(a Attempt) bool {
	switch a.Status {
	case 0, http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return true
	case http.StatusConflict:
		return a.Code == "idempotency_key_in_progress"
	}
	return false
}

// attempt makes one POST /v1/messages of s with body; it sets s.ID and
// s.Replayed from a success, and returns the answer's Retry-After.
func (g *generator) attempt(ctx context.Context, s *Send, body []byte) (Attempt, time.Duration) {
	var a Attempt
	s.Gateway = int(g.turn.Add(1)-1) % len(g.urls)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.urls[s.Gateway], bytes.NewReader(body))
	if err != nil {
		a.Code = err.Error()
		return a, 0
	}
	req.Header.Set("Authorization", "Bearer "+g.keys[s.Tenant])
	req.Header.Set("Content-Type", "application/json")
	if s.Key != "" {
		req.Header.Set("Idempotency-Key", s.Key)
	}
	a.At = time.Now()
	resp, err := g.client.Do(req)
	a.Took = time.Since(a.At)
	if err != nil {
		a.Code = "transport"
		return a, 0
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	var answer struct {
		ID   string `json:"id"`
		Code string `json:"code"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &answer) == nil {
		a.Code = answer.Code
		if answer.ID != "" {
			s.ID = answer.ID
		}
	}
	s.Replayed = a.Status == http.StatusOK && resp.Header.Get("Idempotent-Replayed") == "true"
	retryAfter := time.Duration(0)
	if v, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && v >= 0 {
		retryAfter = time.Duration(v) * time.Second
	}
	return a, retryAfter
}

// results returns every send, and the number skipped because too many
// requests were open.
func (g *generator) results() ([]Send, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Send(nil), g.sends...), g.skipped.Load()
}
