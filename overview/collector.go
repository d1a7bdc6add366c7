package overview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
)

// Defaults of a Collector.
const (
	SampleEveryDefault = 10 * time.Second
	HistoryDefault     = 15 * time.Minute
	// NoisyShareDefault and NoisyMinInFlightDefault are the thresholds SQS
	// fair queues use: a tenant is noisy past a tenth of the messages in
	// flight while at least 30 are.
	NoisyShareDefault       = 0.10
	NoisyMinInFlightDefault = 30
)

// cacheFor is how long a built Document answers: consoles polling every
// second share one build per gateway.
const cacheFor = time.Second

// readTimeout bounds the reads of one build.
const readTimeout = 2 * time.Second

// DepthReader reads a queue's depth; queue.Backend is one.
type DepthReader interface {
	Depth(ctx context.Context, queue string) (queue.Depth, error)
}

// Tenants lists the registry's tenants; tenant.Registry is one.
type Tenants interface {
	List() []tenant.Tenant
}

// Backlog reads a tenant's backlog count; backlog.Tracker is one.
type Backlog interface {
	Get(ctx context.Context, tenant string) (n int64, known bool, err error)
}

// Config configures a Collector.
type Config struct {
	Depths  DepthReader // required
	Names   queue.Names // required
	Tenants Tenants     // required
	// Backlog gives each tenant's backlog; nil shows none.
	Backlog Backlog
	// Shard returns the indices, into Names.Live, of a tenant's shard;
	// nil shows none.
	Shard func(tenant string) []int

	// Local is this process's Recorder, read first hand; Instance and
	// Role name this process.
	Local          *Recorder
	Instance, Role string
	// Redis holds the fleet's reports (Board) and registry (package
	// fleet), under Prefix; nil shows this process alone.
	Redis  redis.UniversalClient
	Prefix string
	// Heartbeat is the fleet's heartbeat (fleet.Config.Heartbeat); zero
	// uses fleet.HeartbeatDefault.
	Heartbeat time.Duration

	// NoisyShare and NoisyMinInFlight are the noisy rule; zero uses the
	// defaults.
	NoisyShare       float64
	NoisyMinInFlight int

	SampleEvery time.Duration // zero: SampleEveryDefault
	History     time.Duration // zero: HistoryDefault
	// Registerer receives fairq_tenant_noisy; nil registers nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

func (c Config) withDefaults() Config {
	c.NoisyShare = cmp.Or(c.NoisyShare, NoisyShareDefault)
	c.NoisyMinInFlight = cmp.Or(c.NoisyMinInFlight, NoisyMinInFlightDefault)
	c.SampleEvery = cmp.Or(c.SampleEvery, SampleEveryDefault)
	c.History = cmp.Or(c.History, HistoryDefault)
	c.Heartbeat = cmp.Or(c.Heartbeat, fleet.HeartbeatDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Depths == nil || c.Tenants == nil || len(c.Names.Live) == 0 {
		errs = append(errs, errors.New("a DepthReader, the queue names and the tenants are required"))
	}
	if c.NoisyShare < 0 || c.NoisyShare > 1 {
		errs = append(errs, fmt.Errorf("noisy share %v is outside 0–1", c.NoisyShare))
	}
	if c.NoisyMinInFlight < 0 {
		errs = append(errs, fmt.Errorf("noisy min in flight %d is negative", c.NoisyMinInFlight))
	}
	if c.SampleEvery < 0 || c.History < 0 {
		errs = append(errs, errors.New("sample interval and history must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	return nil
}

// Collector builds the overview Document: it samples the queues' depths
// every SampleEvery and keeps History of them, and sums the fleet's
// reports when asked. It exports fairq_tenant_noisy.
type Collector struct {
	cfg    Config
	queues []queueRef
	loops  lifecycle.Loops
	noisy  *prometheus.GaugeVec

	mu      sync.Mutex
	history [][]Point // by queue, oldest first
	latest  []*time.Time
	problem []string // by queue: the latest sample's error, if any
	noisyOn map[string]bool

	build   sync.Mutex // one build at a time
	cached  *Document
	builtAt time.Time
}

type queueRef struct{ name, role string }

// New returns a Collector; Start samples the queues.
func New(cfg Config) (*Collector, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Collector{
		cfg: cfg,
		noisy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_tenant_noisy",
			Help: "1 while a tenant is noisy: its share of the fleet's messages in flight, or of its processing time, is above the noisy share while the fleet has at least the noisy minimum in flight. Only noisy tenants have a series.",
		}, []string{"tenant"}),
		noisyOn: map[string]bool{},
	}
	for _, n := range cfg.Names.Live {
		c.queues = append(c.queues, queueRef{n, "live"})
	}
	c.queues = append(c.queues, queueRef{cfg.Names.Overflow, "overflow"}, queueRef{cfg.Names.Backlog, "backlog"}, queueRef{cfg.Names.DLQ, "dlq"})
	c.history = make([][]Point, len(c.queues))
	c.latest = make([]*time.Time, len(c.queues))
	c.problem = make([]string, len(c.queues))
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c.noisy); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start samples the queues now and every SampleEvery, and refreshes
// fairq_tenant_noisy as often.
func (c *Collector) Start(ctx context.Context) error {
	lctx, err := c.loops.Start(ctx)
	if err != nil {
		return err
	}
	c.loops.Go(func() {
		t := time.NewTicker(c.cfg.SampleEvery)
		defer t.Stop()
		for {
			c.sample(lctx)
			if _, err := c.Document(lctx); err != nil && lctx.Err() == nil {
				c.cfg.Logger.Warn("overview: not built", "err", err)
			}
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

// Stop ends the sampling.
func (c *Collector) Stop(ctx context.Context) error { return c.loops.Stop(ctx) }

// sample reads every queue's depth and adds it to the history. A pass
// is recorded whole, under one lock, so that a document never shows some
// queues read and others not yet.
func (c *Collector) sample(ctx context.Context) {
	type reading struct {
		depth queue.Depth
		at    time.Time
		err   error
	}
	pass := make([]reading, len(c.queues))
	for i, q := range c.queues {
		cctx, cancel := context.WithTimeout(ctx, readTimeout)
		pass[i].depth, pass[i].err = c.cfg.Depths.Depth(cctx, q.name)
		cancel()
		pass[i].at = c.cfg.Now()
	}
	keep := int(c.cfg.History / c.cfg.SampleEvery)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range pass {
		if r.err != nil {
			c.problem[i] = fmt.Sprintf("depth of %s: %v", c.queues[i].name, r.err)
			continue
		}
		c.problem[i] = ""
		c.latest[i] = &r.at
		h := append(c.history[i], Point{At: Stamp(r.at), Visible: r.depth.Visible, NotVisible: r.depth.NotVisible, Delayed: r.depth.Delayed})
		if len(h) > keep {
			h = slices.Delete(h, 0, len(h)-keep)
		}
		c.history[i] = h
	}
}

// Document returns the overview, built at most cacheFor ago. The caller
// must not change it.
func (c *Collector) Document(ctx context.Context) (*Document, error) {
	c.build.Lock()
	defer c.build.Unlock()
	now := c.cfg.Now()
	if c.cached != nil && now.Sub(c.builtAt) < cacheFor {
		return c.cached, nil
	}
	cctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	d := c.buildDocument(cctx, now)
	c.cached, c.builtAt = d, now
	return d, nil
}

func (c *Collector) buildDocument(ctx context.Context, now time.Time) *Document {
	d := &Document{
		GeneratedAt: Stamp(now),
		Noisy:       NoisyRule{InFlightShare: c.cfg.NoisyShare, MinInFlight: c.cfg.NoisyMinInFlight},
		Problems:    []string{},
	}
	d.Queues = c.queueRows(d)

	var reports []Report
	if c.cfg.Local != nil {
		reports = append(reports, c.cfg.Local.Report(c.cfg.Instance, c.cfg.Role))
	}
	if c.cfg.Redis != nil {
		fleetReports, err := ReadReports(ctx, c.cfg.Redis, c.cfg.Prefix, c.cfg.Instance, now)
		if err != nil {
			d.problem("the fleet's reports: %v", err)
		}
		reports = append(reports, fleetReports...)
	}
	f := sum(reports)
	d.Tenants = c.tenantRows(ctx, d, f)
	c.export(d.Tenants)
	d.Workers = c.workerRows(ctx, d, reports)
	return d
}

func (d *Document) problem(format string, args ...any) {
	d.Partial = true
	d.Problems = append(d.Problems, fmt.Sprintf(format, args...))
}

func (c *Collector) queueRows(d *Document) []QueueRow {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows := make([]QueueRow, len(c.queues))
	for i, q := range c.queues {
		r := QueueRow{Name: q.name, Role: q.role, History: slices.Clone(c.history[i])}
		if r.History == nil {
			r.History = []Point{}
		}
		if at := c.latest[i]; at != nil {
			s := Stamp(*at)
			r.SampledAt = &s
			last := c.history[i][len(c.history[i])-1]
			r.Visible, r.NotVisible, r.Delayed = last.Visible, last.NotVisible, last.Delayed
		}
		if c.problem[i] != "" {
			d.problem("%s", c.problem[i])
		} else if c.latest[i] == nil {
			d.problem("depth of %s: not read yet", q.name)
		}
		if q.role == "dlq" {
			d.DLQ.Visible = r.Visible
		}
		rows[i] = r
	}
	return rows
}

func (c *Collector) tenantRows(ctx context.Context, d *Document, f totals) []TenantRow {
	known := map[string]bool{}
	var rows []TenantRow
	backlogFailed := false
	for _, t := range c.cfg.Tenants.List() {
		known[t.ID] = true
		row := TenantRow{ID: t.ID, State: "active", PauseIngest: t.PauseIngest,
			Concurrency: t.Limits.Concurrency, ProcessRateLimit: t.Limits.ProcessRate}
		if t.Paused {
			row.State = "paused"
		}
		if c.cfg.Backlog != nil && !backlogFailed {
			n, ok, err := c.cfg.Backlog.Get(ctx, t.ID)
			switch {
			case err != nil:
				backlogFailed = true
				d.problem("backlog counts: %v", err)
			case ok:
				row.Backlog = &n
			}
		}
		rows = append(rows, c.fill(row, f))
	}
	// Activity of tenants the registry no longer has (deleted while their
	// messages ran) is shown too; that of messages without a tenant not.
	for id := range f.tenants {
		if !known[id] && id != "" {
			rows = append(rows, c.fill(TenantRow{ID: id, State: "unknown"}, f))
		}
	}
	slices.SortFunc(rows, func(a, b TenantRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

// fill adds a tenant's activity, shares, noisy verdict and shard.
func (c *Collector) fill(row TenantRow, f totals) TenantRow {
	row.RefusedPerS, row.SpilledPerS = map[string]float64{}, map[string]float64{}
	row.Shard = []string{}
	if c.cfg.Shard != nil {
		for _, i := range c.cfg.Shard(row.ID) {
			row.Shard = append(row.Shard, c.cfg.Names.Live[i])
		}
	}
	r := f.tenants[row.ID]
	if r == nil {
		return row
	}
	row.AcceptedPerS = round(r.accepted)
	row.RefusedPerS = roundAll(r.refused)
	row.SpilledPerS = roundAll(r.spilled)
	row.InFlight = r.inFlight
	row.ProcessRate = round(r.processed)
	if p, ok := r.p95(); ok {
		p = round(p)
		row.AgeFirstAttemptP95 = &p
	}
	if f.inFlight > 0 {
		row.InFlightShare = round(float64(r.inFlight) / float64(f.inFlight))
	}
	if f.busy > 0 {
		row.ProcessingShare = round(r.busy / f.busy)
	}
	// Noisy only while the fleet is busy enough for shares to mean
	// something: a tenant alone on an idle fleet has all of nothing.
	if f.inFlight >= int64(c.cfg.NoisyMinInFlight) {
		switch {
		case row.InFlightShare > c.cfg.NoisyShare:
			row.Noisy = true
			row.NoisyReason = fmt.Sprintf("%.0f%% of the messages in flight", 100*row.InFlightShare)
		case row.ProcessingShare > c.cfg.NoisyShare:
			row.Noisy = true
			row.NoisyReason = fmt.Sprintf("%.0f%% of the processing time", 100*row.ProcessingShare)
		}
	}
	return row
}

// export sets fairq_tenant_noisy: a series for each noisy tenant, none
// for the others.
func (c *Collector) export(rows []TenantRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := map[string]bool{}
	for _, r := range rows {
		if r.Noisy {
			now[r.ID] = true
			c.noisy.WithLabelValues(r.ID).Set(1)
		}
	}
	for id := range c.noisyOn {
		if !now[id] {
			c.noisy.DeleteLabelValues(id)
		}
	}
	c.noisyOn = now
}

// workerRows lists the fleet's workers: those of the registry with their
// reports; without Redis, this process if it runs jobs.
func (c *Collector) workerRows(ctx context.Context, d *Document, reports []Report) []WorkerRow {
	byID := map[string]Report{}
	for _, r := range reports {
		if r.Role != "gateway" {
			byID[r.Instance] = r
		}
	}
	row := func(id string, r Report, ok bool, beat time.Time) WorkerRow {
		w := WorkerRow{ID: id, LastHeartbeat: Stamp(beat), Reporting: ok}
		if ok {
			w.Slots, w.SlotsInUse = r.Slots, r.SlotsInUse
			var n float64
			for _, t := range r.Tenants {
				n += float64(t.Processed)
			}
			w.MessagesPerS = round(n / max(r.Window, 0.001))
		}
		return w
	}
	rows := []WorkerRow{}
	if c.cfg.Redis == nil {
		if r, ok := byID[c.cfg.Instance]; ok {
			rows = append(rows, row(r.Instance, r, true, r.At))
		}
		return rows
	}
	members, err := fleet.Members(ctx, c.cfg.Redis, c.cfg.Prefix, c.cfg.Heartbeat)
	if err != nil {
		d.problem("the fleet registry: %v", err)
	}
	for _, m := range members {
		r, ok := byID[m.ID]
		rows = append(rows, row(m.ID, r, ok, m.LastHeartbeat))
	}
	return rows
}
