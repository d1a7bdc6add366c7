package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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
}

// Accepted reports whether the gateway accepted the message.
func (s Send) Accepted() bool { return s.Status == http.StatusAccepted }

// generator offers each tenant's load at a constant rate, open loop: each
// message is sent when it is due, whatever happened to the earlier ones.
type generator struct {
	url     string
	keys    map[string]string
	tenants []Tenant
	client  *http.Client

	seq     atomic.Int64
	skipped atomic.Int64
	sem     chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	sends []Send
}

func newGenerator(baseURL string, keys map[string]string, tenants []Tenant) *generator {
	return &generator{
		url:     baseURL + "/v1/messages",
		keys:    keys,
		tenants: tenants,
		client: &http.Client{
			Timeout:   15 * time.Second,
			Transport: &http.Transport{MaxIdleConns: maxInFlight, MaxIdleConnsPerHost: maxInFlight, IdleConnTimeout: 30 * time.Second},
		},
		sem: make(chan struct{}, maxInFlight),
	}
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
	for n := 0; ; n++ {
		due := first.Add(time.Duration(float64(n) * float64(time.Second) / t.Rate))
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
		go func() {
			defer g.wg.Done()
			defer func() { <-g.sem }()
			s := g.send(ctx, t.ID, poison)
			s.Late = s.At.Sub(due)
			g.mu.Lock()
			g.sends = append(g.sends, s)
			g.mu.Unlock()
		}()
	}
}

type enqueueBody struct {
	Body       map[string]any    `json:"body"`
	Attributes map[string]string `json:"attributes"`
}

// send makes one POST /v1/messages.
func (g *generator) send(ctx context.Context, tenant string, poison bool) Send {
	s := Send{Seq: g.seq.Add(1), Tenant: tenant, Poison: poison}
	seq := strconv.FormatInt(s.Seq, 10)
	msg := enqueueBody{Body: map[string]any{"seq": s.Seq, "tenant": tenant}, Attributes: map[string]string{AttrSeq: seq}}
	if poison {
		msg.Attributes[AttrKind] = kindPoison
	}
	body, _ := json.Marshal(msg) // cannot fail: strings and numbers
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		s.Code = err.Error()
		return s
	}
	req.Header.Set("Authorization", "Bearer "+g.keys[tenant])
	req.Header.Set("Content-Type", "application/json")
	s.At = time.Now()
	resp, err := g.client.Do(req)
	s.Took = time.Since(s.At)
	if err != nil {
		s.Code = "transport"
		return s
	}
	defer resp.Body.Close()
	s.Status = resp.StatusCode
	var answer struct {
		ID   string `json:"id"`
		Code string `json:"code"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &answer) == nil {
		s.ID, s.Code = answer.ID, answer.Code
	}
	return s
}

// results returns every send, and the number skipped because too many
// requests were open.
func (g *generator) results() ([]Send, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Send(nil), g.sends...), g.skipped.Load()
}
