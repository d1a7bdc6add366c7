package harness

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fairq/fairq/tenant"
)

// SendCostOptions configure RunSendCost.
type SendCostOptions struct {
	// Binary is the fairq binary; Dir receives the run's configuration,
	// logs, metrics and send-cost.json.
	Binary string
	Dir    string
	// SQSEndpoint is the emulator's base URL.
	SQSEndpoint string
	// Window is gateway.send_window; Round is copied to SendCost.Round.
	Window time.Duration
	Round  int
	// Delay is added to every SQS call by a proxy in front of the
	// emulator; zero adds none.
	Delay time.Duration
	// Rate is the single messages offered a second, all tenants together,
	// for Duration; Tenants share it evenly (10 by default). Each tenant's
	// sends are spaced at random (a Poisson process), as the sends of many
	// independent clients are: evenly spaced, ten tenants at 100 a second
	// would each send exactly once every 10 ms, and a window of 10 ms would
	// gather one message of each sharing its queue every time.
	Rate     float64
	Tenants  int
	Duration time.Duration
	// Warmup is left out of the latency figures (the queues' rates are
	// being learnt); the SQS requests count from the start.
	Warmup time.Duration
	// Drain bounds the wait, after the load, for the worker to process
	// every accepted message; 60 s by default, so that a message the
	// emulator handed to a receive the worker had given up on comes back
	// after its visibility timeout (30 s) and is processed.
	Drain time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// SendCost is what RunSendCost measured.
type SendCost struct {
	// Round is the run's round, from 1, where windows run in turn round
	// after round (SummariseSendCost pairs the runs of a round); 0 for a
	// lone run.
	Round  int           `json:"round"`
	Window time.Duration `json:"window"`
	Delay  time.Duration `json:"delay"`
	Rate   float64       `json:"rate"`
	// Sent counts the POST /v1/messages made, Accepted those answered 202,
	// Processed the messages the worker's handler took; Skipped the sends
	// the generator dropped with too many requests open.
	Sent      int   `json:"sent"`
	Accepted  int   `json:"accepted"`
	Processed int   `json:"processed"`
	Skipped   int64 `json:"skipped"`
	// Requests are fairq_sqs_requests_total by operation when the worker
	// had processed everything: every billed call, the gateway's and the
	// worker's. Proxied counts the calls that passed the delay proxy,
	// which should be at least as many.
	Requests map[string]float64 `json:"requests"`
	Proxied  int64              `json:"proxied"`
	// Steady are the requests by operation from Warmup to the end of the
	// load, and SteadyAdmitted the messages admitted meanwhile: the cost
	// at the offered rate, without the polls of the process's first
	// seconds and of the wait for the worker, which run whatever the rate.
	Steady         map[string]float64 `json:"steady"`
	SteadyAdmitted int                `json:"steady_admitted"`
	// Latency is that of the 202 answers sent after Warmup, from the
	// request to the answer; Late is the p99 of how late the generator
	// sent (the machine held it up).
	Latency Quantiles     `json:"latency"`
	Late    time.Duration `json:"late_p99"`
	// LoadAvg is the 1-minute load average before and after the run.
	LoadAvg [2]string `json:"load_avg"`
}

// Disturbed reports whether the machine held the run up, so that its
// figures are not fairq's alone: the generator's sends left late
// (DisturbedLate), were skipped with too many requests open, or were not
// all accepted.
func (c SendCost) Disturbed() bool {
	return c.Late > DisturbedLate || c.Skipped > 0 || c.Accepted < c.Sent
}

// SendPerMessage returns the SendMessageBatch calls per accepted message.
func (c SendCost) SendPerMessage() float64 { return c.per(c.Requests[opSend]) }

// PerMessage returns the SQS requests per accepted message, every
// operation together: the cost end to end.
func (c SendCost) PerMessage() float64 {
	var total float64
	for _, n := range c.Requests {
		total += n
	}
	return c.per(total)
}

func (c SendCost) per(n float64) float64 {
	if c.Accepted == 0 {
		return 0
	}
	return n / float64(c.Accepted)
}

// SteadyPerMessage returns the SQS requests per message admitted from
// Warmup to the end of the load, every operation together.
func (c SendCost) SteadyPerMessage() float64 {
	if c.SteadyAdmitted == 0 {
		return 0
	}
	var total float64
	for _, n := range c.Steady {
		total += n
	}
	return total / float64(c.SteadyAdmitted)
}

// The SQS operation and the metrics a run reads.
const (
	opSend           = "SendMessageBatch"
	metricRequests   = "fairq_sqs_requests_total"
	metricAdmitted   = "fairq_admitted_total"
	metricProcessed  = "fairq_worker_processed_total"
	outcomeProcessed = "success"
)

// RunSendCost measures what single messages cost on SQS under a send
// window: `fairq dev` (gateway and worker in one process, the worker's
// built-in handler deleting each message) on the emulator, behind a proxy
// that adds Delay to every call, takes Rate single messages a second from
// an open-loop generator for Duration; once the worker has processed
// every accepted message, the SQS requests of both are read from
// /metrics.
func RunSendCost(ctx context.Context, o SendCostOptions) (*SendCost, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	px, err := startDelayProxy(o.SQSEndpoint, o.Delay)
	if err != nil {
		return nil, err
	}
	defer px.close()
	tenants := make([]Tenant, o.Tenants)
	for i := range tenants {
		tenants[i] = Tenant{ID: fmt.Sprintf("t%02d", i+1), Role: RoleQuiet, Rate: o.Rate / float64(o.Tenants)}
	}
	creds := newCredentials(tenants)
	res := &SendCost{Round: o.Round, Window: o.Window, Delay: o.Delay, Rate: o.Rate}
	res.LoadAvg[0] = loadAvg()
	s, err := startSendCostSystem(ctx, o, sendCostConfig(px.url(), "sc"+randomHex(4), o.Window, tenants, creds))
	if err != nil {
		return nil, err
	}
	defer s.stop(context.WithoutCancel(ctx))

	o.Logger.Info("send cost: load", "window", o.Window, "rate", o.Rate, "duration", o.Duration)
	gen := newGenerator(s.baseURL(), creds.keys, tenants)
	gen.poisson = true
	start := time.Now()
	var marks [2]map[string]*dto.MetricFamily
	var wg sync.WaitGroup
	wg.Go(func() { marks = scrapeAt(ctx, s, start.Add(o.Warmup), start.Add(o.Duration)) })
	gen.run(ctx, start, o.Duration)
	wg.Wait()
	res.Steady, res.SteadyAdmitted = steady(marks)
	sends, skipped := gen.results()
	res.Sent, res.Skipped = len(sends), skipped
	res.Accepted, res.Latency, res.Late = answers(sends, start.Add(o.Warmup))

	mfs, err := waitProcessed(ctx, s, res.Accepted, o.Drain)
	if err != nil {
		return nil, err
	}
	res.Requests = byLabel(mfs[metricRequests], "op")
	res.Processed = int(byLabel(mfs[metricProcessed], "outcome")[outcomeProcessed])
	res.Proxied = px.requests()
	res.LoadAvg[1] = loadAvg()
	if admitted := int(sum(mfs[metricAdmitted])); admitted != res.Accepted {
		return res, fmt.Errorf("send cost: the gateway admitted %d messages, the generator saw %d accepted", admitted, res.Accepted)
	}
	if err := writeJSON(filepath.Join(o.Dir, "send-cost.json"), res); err != nil {
		return res, err
	}
	return res, ctx.Err()
}

func (o SendCostOptions) withDefaults() SendCostOptions {
	o.Tenants = cmp.Or(o.Tenants, 10)
	o.Drain = cmp.Or(o.Drain, time.Minute)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (o SendCostOptions) validate() error {
	if o.Binary == "" || o.Dir == "" || o.SQSEndpoint == "" || o.Rate <= 0 || o.Duration <= 0 || o.Window < 0 || o.Delay < 0 || o.Tenants < 1 {
		return fmt.Errorf("send cost: want a binary, a directory, the emulator's endpoint, a rate, tenants and a duration: %+v", o)
	}
	return nil
}

// startSendCostSystem writes config into o.Dir, creates the queues and
// starts `fairq dev`.
func startSendCostSystem(ctx context.Context, o SendCostOptions, config []byte) (*system, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	s := &system{cfg: systemConfig{backend: backendSQS}, bin: o.Binary, dir: o.Dir, configPath: filepath.Join(o.Dir, "fairq.yaml"), client: newProbeClient()}
	if err := os.WriteFile(s.configPath, config, 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	var err error
	if s.gatewayAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	if err := s.createQueues(ctx); err != nil {
		return nil, err
	}
	if s.gateway, err = s.start(ctx, "fairq dev", "dev.log", s.gatewayAddr, "/readyz", "dev", "--config", s.configPath); err != nil {
		return nil, err
	}
	return s, nil
}

// scrapeAt reads /metrics at from and at to; a scrape that fails, or
// that ctx ends before, is nil.
func scrapeAt(ctx context.Context, s *system, from, to time.Time) (marks [2]map[string]*dto.MetricFamily) {
	for i, at := range []time.Time{from, to} {
		if sleepUntil(ctx, at) != nil {
			return marks
		}
		marks[i], _ = scrape(ctx, s.client, s.baseURL()+"/metrics")
	}
	return marks
}

// steady returns the requests by operation between two scrapes, and the
// messages admitted between them; nothing without both.
func steady(marks [2]map[string]*dto.MetricFamily) (map[string]float64, int) {
	if marks[0] == nil || marks[1] == nil {
		return nil, 0
	}
	before, after := byLabel(marks[0][metricRequests], "op"), byLabel(marks[1][metricRequests], "op")
	for op, n := range before {
		after[op] -= n
	}
	return after, int(sum(marks[1][metricAdmitted]) - sum(marks[0][metricAdmitted]))
}

// answers counts the sends answered 202 and returns the quantiles of
// their latency, of those sent from measured on, and the p99 of how late
// every send left.
func answers(sends []Send, measured time.Time) (accepted int, latency Quantiles, late time.Duration) {
	var took, lates []time.Duration
	for _, snd := range sends {
		lates = append(lates, snd.Late)
		if snd.Status != http.StatusAccepted {
			continue
		}
		accepted++
		if !snd.At.Before(measured) {
			took = append(took, snd.Took)
		}
	}
	return accepted, quantiles(took), quantiles(lates).P99
}

// sendCostConfig is the fairq configuration of a send cost run: limits that
// never hold a message back, so that only the window shapes the calls.
func sendCostConfig(endpoint, prefix string, window time.Duration, tenants []Tenant, creds credentials) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# fairq configuration of a send cost run. Written by loadtest/harness; the API keys are fresh for the run.")
	w("listen: 127.0.0.1:0")
	sum := sha256.Sum256([]byte(creds.admin))
	w("admin: {token_sha256: %s}", hex.EncodeToString(sum[:]))
	w("backend: sqs")
	w("sqs: {region: us-east-1, endpoint: %q, queue_prefix: %s}", endpoint, prefix)
	w("defaults: {ingest_rate: %d, ingest_burst: %d, process_rate: %d, process_burst: %d, concurrency: %d, soft_backlog: %d, max_backlog: %d}",
		unlimited, unlimited, unlimited, unlimited, unlimited, 10*unlimited, 100*unlimited)
	w("tenants:")
	for _, t := range tenants {
		w("  - {id: %s, api_keys: [%q]}", t.ID, tenant.HashKey(creds.keys[t.ID]))
	}
	w("gateway: {send_window: %s}", window)
	w("log: {level: warn, format: json}")
	return []byte(b.String())
}

// waitProcessed polls /metrics until the worker has processed accepted
// messages, or limit passes, and returns the last metrics read.
func waitProcessed(ctx context.Context, s *system, accepted int, limit time.Duration) (map[string]*dto.MetricFamily, error) {
	deadline := time.Now().Add(limit)
	for {
		mfs, err := scrape(ctx, s.client, s.baseURL()+"/metrics")
		if err != nil {
			return nil, err
		}
		done := int(byLabel(mfs[metricProcessed], "outcome")[outcomeProcessed])
		if done >= accepted {
			// A message counts as processed once its delete is handed to
			// the worker's batcher: give the last deletes their call.
			if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil {
				return nil, err
			}
			return scrape(ctx, s.client, s.baseURL()+"/metrics")
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("send cost: the worker processed %d of %d accepted messages within %v", done, accepted, limit)
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return nil, err
		}
	}
}

// scrape reads a Prometheus text exposition.
func scrape(ctx context.Context, client *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return mfs, nil
}

// byLabel sums a counter family by the value of one label.
func byLabel(mf *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// sum sums a counter family.
func sum(mf *dto.MetricFamily) float64 {
	var total float64
	for _, m := range mf.GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

// writeJSON writes v, indented, to path.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
