package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/console"
	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/idempotency"
	"github.com/fairq/fairq/internal/batch"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// Backend is the part of queue.Backend the gateway uses.
type Backend interface {
	Send(ctx context.Context, queue string, entries []queue.Entry) ([]queue.SendResult, error)
	Depth(ctx context.Context, queue string) (queue.Depth, error)
}

// Picker chooses the live queue of each message (sharding.Tracker).
type Picker interface {
	// Pick returns the index in Names.Live of the queue for a message of
	// the tenant, and counts the message there.
	Pick(tenant string) int
	// Sent corrects the count of queue i by n; the gateway calls it with
	// -1 for a picked message that was not sent.
	Sent(i, n int)
}

// Limiter grants admission tokens (throttle.LocalLimiter,
// throttle.FailoverLimiter over a throttle.RedisLimiter).
type Limiter interface {
	Allow(ctx context.Context, key string, l throttle.Limit, n int) (throttle.Decision, error)
}

// Backlog keeps each tenant's count of messages not yet ended
// (backlog.Tracker; backlog.Off keeps none). The gateway adds what SQS
// took; workers take away what ended.
type Backlog interface {
	// Add counts n messages of tenant that SQS took. It must not block:
	// the callers of a send batch are waiting.
	Add(tenant string, n int64)
	// Get returns the tenant's count; known is false when there is none
	// to go by (no counts kept, or Redis unreachable and failing open).
	// An error refuses the admission (failing closed).
	Get(ctx context.Context, tenant string) (n int64, known bool, err error)
}

// freshBacklog is a Backlog that can also read a count past its cache
// (backlog.Tracker): a tenant at its max_backlog is refused only on such
// a count (see backlogOf).
type freshBacklog interface {
	Fresh(ctx context.Context, tenant string) (n int64, known bool, err error)
}

var (
	_ Backlog      = (*backlog.Tracker)(nil)
	_ Backlog      = backlog.Off{}
	_ freshBacklog = (*backlog.Tracker)(nil)
)

// DeadLetters acts on the dead-letter queue (deadletter.Queue): the admin
// API's /admin/v1/dlq. Nil in Config leaves those routes answering 503.
type DeadLetters interface {
	Redrive(ctx context.Context, sel deadletter.Selection) (deadletter.RedriveResult, error)
	Peek(ctx context.Context, sel deadletter.Selection, bodies bool) (deadletter.Page, error)
	Purge(ctx context.Context, sel deadletter.Selection) (deadletter.PurgeResult, error)
}

var _ DeadLetters = (*deadletter.Queue)(nil)

// Overview builds the overview document (overview.Collector).
type Overview interface {
	Document(ctx context.Context) (*overview.Document, error)
}

var _ Overview = (*overview.Collector)(nil)

// Config configures a Server.
type Config struct {
	// Backend is where messages go; required.
	Backend Backend
	// Names are the deployment's queues; at least one live queue.
	Names queue.Names
	// Picker chooses a live queue for each message; required.
	Picker Picker
	// Tenants authenticates API keys; required.
	Tenants *tenant.Registry
	// Limiter admits each tenant's messages at its ingest_rate and
	// ingest_burst; nil uses a throttle.LocalLimiter.
	Limiter Limiter
	// DeadLetters, when set, serves /admin/v1/dlq (peek, redrive,
	// purge); without it those routes answer 503.
	DeadLetters DeadLetters
	// Overview, when set, serves GET /admin/v1/overview
	// (overview.Collector); without it that route answers 503.
	Overview Overview
	// Activity counts each tenant's messages accepted and refused, for
	// the overview; nil counts nothing.
	Activity *overview.Recorder
	// AdminTokenSHA256 is the sha256 (64 hex digits) of the bearer token
	// of the /admin API; empty turns /admin off (404).
	AdminTokenSHA256 string
	// Backlog counts accepted messages and slows then stops a tenant
	// whose backlog passes soft_backlog, then max_backlog; nil keeps no
	// counts (backlog.Off). Its own outage policy (backlog.TrackerConfig's
	// FailClosed) decides whether admission goes on without it.
	Backlog Backlog
	// FailClosed answers 503 while Redis, behind the idempotency keys, is
	// unreachable; by default (redis.fail_open: true) the gateway goes on
	// with in-process idempotency keys, and says so in the log and the
	// metrics.
	FailClosed bool
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series
	// of the components "backlog" and "idempotency" join; nil keeps them
	// registered nowhere.
	RedisMetrics *degrade.Metrics
	// Redis, when set, holds the Idempotency-Keys of the fleet; nil keeps
	// them in this process.
	Redis redis.UniversalClient
	// RedisPrefix goes in front of the gateway's Redis keys ("fairq:").
	RedisPrefix string
	// IdempotencyWindow is how long an Idempotency-Key is remembered; zero
	// uses IdempotencyWindowDefault.
	IdempotencyWindow time.Duration
	// MaxLocalIdempotencyKeys bounds the keys remembered in process
	// (without Redis, or while it is unreachable); past it the oldest are
	// forgotten first. Zero uses MaxLocalIdempotencyKeysDefault.
	MaxLocalIdempotencyKeys int

	// MaxMessageSize is the largest message accepted, counted as SQS
	// counts it; zero uses queue.MaxMessageSizeDefault, at most
	// queue.MaxMessageSizeCap.
	MaxMessageSize int
	// SendWindow is the longest a message may wait for others going to
	// the same queue before its SendMessageBatch call goes
	// (gateway.send_window). It waits only while others are likely within
	// it, at the rate messages have lately gone to that queue (see
	// batch.Adaptive); a full batch goes at once. Zero sends every message
	// at once, sharing a call only with those handed over at the same
	// moment.
	SendWindow time.Duration
	// MaxBatchBody caps the raw body of POST /v1/messages/batch; zero
	// uses MaxBatchBodyDefault (8 MiB).
	MaxBatchBody int
	// BatchBytes bounds the size of one SendMessageBatch call; zero uses
	// BatchBytesDefault.
	BatchBytes int
	// SendTimeout bounds the send of a message, every attempt together
	// (the queue backend's own retries, and those of entries a batch call
	// reports failed): past it the client is answered 503 unavailable.
	// Zero uses SendTimeoutDefault (gateway.send_timeout).
	SendTimeout time.Duration
	// MaxInflightBytes bounds the request body bytes the gateway holds at
	// once, and MaxTenantInflightBytes one tenant's share of them (see
	// body.go); zero uses MaxInflightBytesDefault and
	// MaxTenantInflightBytesDefault (gateway.max_inflight_bytes,
	// gateway.max_tenant_inflight_bytes).
	MaxInflightBytes       int64
	MaxTenantInflightBytes int64
	// ReadyCache is how long /readyz reuses its last look at the backend;
	// zero uses ReadyCacheDefault.
	ReadyCache time.Duration
	// MaxTenantLabels bounds the tenant label of the metrics; zero uses
	// MaxTenantLabelsDefault.
	MaxTenantLabels int

	// Logger receives request failures and state changes; nil discards.
	Logger *slog.Logger
	// Registerer receives the gateway's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves; nil serves 404 there.
	Gatherer prometheus.Gatherer
	// Now is the clock of enqueue times; nil uses time.Now.
	Now func() time.Time
	// TracerProvider, when set, traces requests and the messages they
	// send (see trace.go); nil makes no span.
	TracerProvider trace.TracerProvider
}

// idemLeaseMargin is what an idempotency key's lease adds to SendTimeout.
const idemLeaseMargin = 2 * time.Second

// Config defaults.
const (
	BatchBytesDefault      = 256 << 10
	SendTimeoutDefault     = 3 * time.Second
	ReadyCacheDefault      = time.Second
	MaxTenantLabelsDefault = 100

	IdempotencyWindowDefault       = 24 * time.Hour
	MaxLocalIdempotencyKeysDefault = 100_000
)

func (c Config) withDefaults() Config {
	c.MaxMessageSize = cmp.Or(c.MaxMessageSize, queue.MaxMessageSizeDefault)
	c.BatchBytes = cmp.Or(c.BatchBytes, BatchBytesDefault)
	c.MaxBatchBody = cmp.Or(c.MaxBatchBody, MaxBatchBodyDefault)
	c.SendTimeout = cmp.Or(c.SendTimeout, SendTimeoutDefault)
	c.MaxInflightBytes = cmp.Or(c.MaxInflightBytes, MaxInflightBytesDefault)
	c.MaxTenantInflightBytes = cmp.Or(c.MaxTenantInflightBytes, min(MaxTenantInflightBytesDefault, c.MaxInflightBytes))
	c.ReadyCache = cmp.Or(c.ReadyCache, ReadyCacheDefault)
	c.MaxTenantLabels = cmp.Or(c.MaxTenantLabels, MaxTenantLabelsDefault)
	c.IdempotencyWindow = cmp.Or(c.IdempotencyWindow, IdempotencyWindowDefault)
	c.MaxLocalIdempotencyKeys = cmp.Or(c.MaxLocalIdempotencyKeys, MaxLocalIdempotencyKeysDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Limiter == nil {
		c.Limiter = throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})
	}
	if c.Backlog == nil {
		c.Backlog = backlog.Off{}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("gateway: "+format, args...)) }
	if c.Backend == nil {
		bad("Backend is required")
	}
	if len(c.Names.Live) == 0 {
		bad("Names needs at least one live queue")
	}
	if c.Picker == nil {
		bad("Picker is required")
	}
	if c.Tenants == nil {
		bad("Tenants is required")
	}
	if c.MaxMessageSize < 1 || c.MaxMessageSize > queue.MaxMessageSizeCap {
		bad("MaxMessageSize %d, want 1–%d", c.MaxMessageSize, queue.MaxMessageSizeCap)
	}
	if c.MaxBatchBody < 1 {
		bad("MaxBatchBody %d must be positive", c.MaxBatchBody)
	}
	if c.BatchBytes < 1 || c.BatchBytes > queue.MaxMessageSizeCap {
		bad("BatchBytes %d, want 1–%d", c.BatchBytes, queue.MaxMessageSizeCap)
	}
	if c.IdempotencyWindow < time.Second || c.MaxLocalIdempotencyKeys < 1 {
		bad("IdempotencyWindow %v must be at least 1s and MaxLocalIdempotencyKeys %d positive", c.IdempotencyWindow, c.MaxLocalIdempotencyKeys)
	}
	if c.SendTimeout < 0 || c.SendWindow < 0 {
		bad("SendTimeout %v and SendWindow %v must not be negative", c.SendTimeout, c.SendWindow)
	}
	if c.MaxInflightBytes < int64(c.MaxMessageSize) || c.MaxTenantInflightBytes < int64(c.MaxMessageSize) || c.MaxTenantInflightBytes > c.MaxInflightBytes {
		bad("MaxInflightBytes %d and MaxTenantInflightBytes %d must hold a message of MaxMessageSize %d, and the tenant's share at most the whole",
			c.MaxInflightBytes, c.MaxTenantInflightBytes, c.MaxMessageSize)
	}
	return errors.Join(errs...)
}

// Server is the HTTP front door: an http.Handler serving the API of the
// README and openapi.json. Start it before serving and stop it after the
// HTTP server has shut down (see Stop).
type Server struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	ids     *requestIDs
	router  chi.Router
	batcher *batch.Batcher[sendItem, sendResult]
	// preferring is the Picker when it can prefer the queues where a
	// batch is waiting (waiting), and there is a send window; else nil.
	preferring preferringPicker
	waiting    func(q int) bool
	// longest is the longest live queue name, for sizing fairq-meta before
	// the queue is picked.
	longest   string
	ready     readiness
	backend   *backendHealth
	bodies    *bodyBudget
	refused   refusals
	idem      idempotencyKeys
	tracer    trace.Tracer // nil: no tracing
	stats     *stats
	admin     bool
	adminHash [32]byte
	console   *console.Console // with the admin API

	// mu is held for reading while a message is handed to the batcher,
	// and for writing to change phase: messages are handed over only
	// while it is phaseOpen, between Start and Stop.
	mu    sync.RWMutex
	phase phase
	loops lifecycle.Loops // the background loops: stats, backend probe
}

// phase is where a Server is in its life.
type phase int

const (
	phaseNew    phase = iota // before Start: enqueues answer 503
	phaseOpen                // between Start and Stop
	phaseClosed              // Stop began: enqueues answer 503
)

var _ http.Handler = (*Server)(nil)

// New returns a Server; Start it before serving.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, cfg.MaxTenantLabels)
	if err != nil {
		return nil, fmt.Errorf("gateway: register metrics: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, m: m, ids: newRequestIDs()}
	for _, n := range cfg.Names.Live {
		if len(n) > len(s.longest) {
			s.longest = n
		}
	}
	s.batcher, err = batch.New(batch.Config[sendItem, sendResult]{
		Flush:    s.flush,
		MaxItems: queue.MaxBatch,
		MaxBytes: cfg.BatchBytes,
		Size:     func(it sendItem) int { return it.size },
		Window:   cfg.SendWindow,
		Mode:     batch.Adaptive,
	})
	if err != nil {
		return nil, err
	}
	s.preferWaiting()
	if cfg.AdminTokenSHA256 != "" {
		if s.adminHash, err = parseAdminToken(cfg.AdminTokenSHA256); err != nil {
			return nil, err
		}
		s.admin = true
		if s.console, err = s.newConsole(); err != nil {
			return nil, err
		}
	}
	s.stats = &stats{redis: cfg.Redis, prefix: cfg.RedisPrefix, log: s.log}
	s.backend = newBackendHealth()
	s.bodies = newBodyBudget(cfg.MaxInflightBytes, cfg.MaxTenantInflightBytes)
	// A key's lease covers its send (SendTimeout) with room to resolve
	// the key; a crashed owner's claim lapses after it, and a retry sends
	// under the same id.
	lease := cfg.SendTimeout + idemLeaseMargin
	s.idem = idempotencyKeys{
		local: idempotency.NewMemory(idempotency.MemoryConfig{Window: cfg.IdempotencyWindow, Lease: lease, Max: cfg.MaxLocalIdempotencyKeys, Now: cfg.Now}),
		dep:   s.newDependency("idempotency"),
	}
	if cfg.Redis != nil {
		if s.idem.redis, err = idempotency.NewRedis(idempotency.RedisConfig{Client: cfg.Redis, Prefix: cfg.RedisPrefix, Window: cfg.IdempotencyWindow, Lease: lease, Now: cfg.Now}); err != nil {
			return nil, err
		}
	}
	s.tracer = newTracer(cfg.TracerProvider)
	s.router = s.routes()
	return s, nil
}

// routes builds the router. Every route is in openapi.json; a test holds
// the two together.
func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.frame)
	if s.tracer != nil {
		r.Use(s.traceRequest)
	}
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	r.Get("/healthz", s.handleHealth)
	r.Get("/readyz", s.handleReady)
	r.Get("/openapi.json", s.handleOpenAPI)
	if s.cfg.Gatherer != nil {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	r.Post("/v1/messages", s.handleEnqueue)
	r.Post("/v1/messages/batch", s.handleBatch)
	r.Get("/v1/tenant", s.handleTenant)
	if s.admin {
		r.Route("/admin/v1", s.adminRoutes)
		s.mountConsole(r)
	}
	return r
}

// Router returns the server's router, to list its routes.
func (s *Server) Router() chi.Routes { return s.router }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Start starts the send batcher and the background loops (shared stats,
// the backend probe) until Stop: ctx only carries values (see package
// lifecycle). The server answers 503 before Start.
func (s *Server) Start(ctx context.Context) error {
	loopCtx, err := s.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if err := s.batcher.Start(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if s.phase == phaseNew {
		s.phase = phaseOpen
	}
	s.mu.Unlock()
	if s.stats.redis != nil {
		s.loops.Go(func() { s.stats.run(loopCtx) })
	}
	s.loops.Go(func() { s.probeLoop(loopCtx) })
	return nil
}

// Stop flushes the messages waiting for a batch and waits for their sends;
// enqueue requests arriving after Stop are answered 503. Shut the HTTP
// server down first (http.Server.Shutdown stops accepting and waits for
// the handlers, which wait for their sends), then Stop. Stop is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.phase = phaseClosed
	s.mu.Unlock()
	err := s.batcher.Stop(ctx) // first: the loops outlive the last sends
	return errors.Join(err, s.loops.Stop(ctx))
}
