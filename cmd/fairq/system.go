package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/telemetry"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/parking"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/schedule"
	"github.com/fairq/fairq/sharding"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// Shutdown bounds: the HTTP server drains for up to httpGrace, then the
// worker finishes in-flight jobs for up to workerGrace and gives the rest
// back to their queues.
const (
	httpGrace   = 10 * time.Second
	workerGrace = 25 * time.Second
)

// component is anything with the Start/Stop lifecycle of the house style.
type component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// backlogCounts are the tenants' backlog counts a process keeps: a
// backlog.Tracker, or backlog.Off when no count can be shared.
type backlogCounts interface {
	component
	gateway.Backlog
	consumer.Backlog
	Flush(ctx context.Context) error
}

// role is what a process runs.
type role int

const (
	roleDev     role = iota // gateway and worker in one process
	roleGateway             // the HTTP front door
	roleWorker              // the consumer daemon
	roleTool                // a command that runs once: dlq redrive
)

// String names the role as the overview's reports do.
func (r role) String() string {
	switch r {
	case roleDev:
		return "dev"
	case roleGateway:
		return "gateway"
	case roleWorker:
		return "worker"
	}
	return "tool"
}

// system is one fairq process: the parts that cmd wires from a Config.
type system struct {
	role     role
	cfg      config.Config
	logger   *slog.Logger
	registry *prometheus.Registry
	backend  queue.Backend
	names    queue.Names
	redis    redis.UniversalClient // nil without Redis
	// degrade holds fairq_redis_degraded and fairq_redis_fallback_total,
	// registered once and shared by every part that depends on Redis.
	degrade *degrade.Metrics

	tenants   *tenant.Registry
	backlog   backlogCounts // backlog.Off when no count can be shared: see newSystem
	tracker   *sharding.Tracker
	gateway   *gateway.Server
	worker    *consumer.Worker
	scheduler *schedule.Scheduler // nil without worker.cron_file
	waker     *parking.Waker      // wakes paused tenants' parked messages at a resume
	push      *consumer.Push      // the worker's handler when it pushes over HTTP

	// The worker's fleet-wide limits and autoscaling signals.
	fleet       *fleet.Fleet
	semaphore   *throttle.RedisSemaphore // nil without Redis
	meter       *throttle.RedisMeter     // nil without Redis
	autoscaling *fleet.Autoscaling

	// What an operator sees: this process's counts of each tenant's
	// messages, published for the fleet on the board (with Redis), and,
	// where the admin API is, the overview built from them.
	instance string
	activity *overview.Recorder
	board    *overview.Board     // nil without Redis
	overview *overview.Collector // nil but on a gateway

	// started holds what Start started, in order; Stop stops it in reverse.
	started []component
	// tracing is the process's tracer provider (see withTracing); off
	// when nil or when the environment asks for no exporter.
	tracing *telemetry.Provider
}

// newSystem builds the parts shared by every role: metrics, backend, Redis,
// the tenant registry, the backlog counters and the shard tracker.
func newSystem(ctx context.Context, r role, cfg config.Config, logger *slog.Logger) (*system, error) {
	if cfg.Backend == config.BackendMemory && r != roleDev {
		// A memory queue lives and dies inside one process: a gateway's
		// messages would never reach a separate worker.
		return nil, fmt.Errorf("%w: backend is %q: only fairq dev runs on the memory backend; set backend: sqs", errUsage, cfg.Backend)
	}
	s := &system{role: r, cfg: cfg, logger: logger, registry: prometheus.NewRegistry(), names: queueNames(cfg)}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if s.degrade, err = degrade.NewMetrics(s.registry); err != nil {
		return nil, err
	}
	b, err := openBackend(ctx, cfg, logger, s.registry)
	if err != nil {
		return nil, err
	}
	s.backend = b
	if cfg.Backend == config.BackendMemory {
		// The memory backend starts empty: its queues exist from now on.
		if _, err := createQueues(ctx, b, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Redis.Configured() {
		s.redis = newRedisClient(cfg.Redis)
	}
	if err := s.withActivity(); err != nil {
		return nil, err
	}
	s.tenants, err = tenant.New(tenant.Config{
		Tenants:      tenantSpecs(cfg.Tenants),
		Defaults:     cfg.Defaults,
		Redis:        s.redisOrNil(),
		Prefix:       cfg.SQS.QueuePrefix + ":",
		Logger:       logger,
		Registerer:   s.registry,
		RedisMetrics: s.degrade,
	})
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	// A tenant's backlog is raised by the gateway that accepts a message
	// and lowered by the worker that ends it: the count needs both to see
	// the same counter, Redis for a fleet or one process for dev. A
	// gateway and a worker apart without Redis would each count half, and
	// backpressure would refuse tenants for others' messages, so they keep
	// no counters and say so.
	if s.redis != nil || r == roleDev {
		if s.backlog, err = s.backlogTracker(); err != nil {
			return nil, fmt.Errorf("backlog counts: %w", err)
		}
	} else {
		s.backlog = backlog.Off{}
		if r == roleGateway {
			logger.Warn("no redis.addr: backlog counters and backpressure are off (soft_backlog and max_backlog need the counts a worker shares through Redis)")
		}
	}
	var trackerMetrics prometheus.Registerer
	var trackerRedis *degrade.Metrics
	if r == roleDev || r == roleGateway {
		// The tracker runs only where messages are enqueued.
		trackerMetrics, trackerRedis = s.registry, s.degrade
	}
	s.tracker, err = sharding.NewTracker(sharding.Config{
		Reader:       s.backend,
		Queues:       s.names.Live,
		ShardSize:    cfg.Pool.ShardSize,
		Redis:        s.redis,
		KeyPrefix:    s.keyPrefix(),
		Logger:       logger,
		Registerer:   trackerMetrics,
		RedisMetrics: trackerRedis,
	})
	if err != nil {
		return nil, fmt.Errorf("shard tracker: %w", err)
	}
	return s, nil
}

// withActivity makes this process's Recorder of each tenant's activity
// and, with Redis, the board it is published on for the overview.
func (s *system) withActivity() error {
	s.instance = fleet.NewID()
	var slots int
	if s.role == roleDev || s.role == roleWorker {
		slots = s.cfg.Worker.Connections
	}
	s.activity = overview.NewRecorder(overview.RecorderConfig{Slots: slots})
	if s.redis == nil || s.role == roleTool {
		return nil
	}
	var err error
	s.board, err = overview.NewBoard(overview.BoardConfig{
		Redis: s.redis, Prefix: s.keyPrefix(), Instance: s.instance, Role: s.role.String(),
		Recorder: s.activity, Logger: s.logger,
	})
	return err
}

// clusterReload is how often a client of a Redis Cluster reloads the map
// of slots to nodes. go-redis's default is a minute, and a client learns
// of a failover only from it (a dead master cannot answer MOVED): limits
// would stay local for up to a minute after a replica took over.
const clusterReload = 5 * time.Second

// Timeouts of the Redis client, short on purpose: Redis answers in well
// under a millisecond in a region, and every caller has a local fallback
// (internal/degrade) that is worth more than a long wait. go-redis's
// defaults (5 s to dial, 3 s to read, 3 retries) held requests for about
// 15 s when Redis went away.
const (
	redisDialTimeout = time.Second
	redisIOTimeout   = time.Second
	redisRetries     = 1
)

// newRedisClient returns the client of redis.mode: one node, a Redis
// Cluster, or a primary found through Sentinels.
func newRedisClient(r config.Redis) redis.UniversalClient {
	addrs := r.Endpoints()
	var tlsConfig *tls.Config
	if r.TLS {
		host, _, _ := net.SplitHostPort(addrs[0]) // validated by config
		tlsConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	o := &redis.UniversalOptions{
		Addrs: addrs, Username: r.Username, Password: r.Password, TLSConfig: tlsConfig,
		DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
		PoolTimeout: redisIOTimeout, MaxRetries: redisRetries,
	}
	switch r.Mode {
	case config.RedisCluster:
		co := o.Cluster()
		co.ClusterStateReloadInterval = clusterReload
		return redis.NewClusterClient(co)
	case config.RedisSentinel:
		o.MasterName = r.MasterName
		return redis.NewFailoverClient(o.Failover())
	}
	return redis.NewClient(o.Simple())
}

// tenantSpecs returns the tenants of the configuration file as the
// registry takes them.
func tenantSpecs(file []config.Tenant) []tenant.Spec {
	specs := make([]tenant.Spec, len(file))
	for i, t := range file {
		specs[i] = tenant.Spec(t)
	}
	return specs
}

// backlogTracker returns the backlog counts of a process that can share
// them: in Redis, or in this process for dev. Where messages are enqueued
// the tracker also reconciles the counts with the queues' depths; a
// worker's only takes away what ended.
func (s *system) backlogTracker() (*backlog.Tracker, error) {
	counter, err := backlog.New(backlog.Config{Redis: s.redisOrNil(), Prefix: s.keyPrefix()})
	if err != nil {
		return nil, err
	}
	cfg := backlog.TrackerConfig{
		Counter:      counter,
		FailClosed:   !s.cfg.Redis.FailOpen,
		Logger:       s.logger,
		RedisMetrics: s.degrade,
	}
	if s.role == roleDev || s.role == roleGateway {
		cfg.Depths, cfg.Queues = s.backend, append(append([]string{}, s.names.Live...), s.names.Overflow, s.names.Backlog)
	} else {
		cfg.KeepFresh = -1 // a worker asks for no counts
	}
	if s.role == roleDev || s.role == roleWorker {
		cfg.Registerer = s.registry // fairq_worker_backlog_decrements_dropped_total
	}
	return backlog.NewTracker(cfg)
}

// keyPrefix starts every Redis key of the deployment, so that deployments
// with different queue prefixes can share one Redis.
func (s *system) keyPrefix() string { return s.cfg.SQS.QueuePrefix + ":" }

// deadLetters returns the dead-letter queue's tools: peek, purge and
// redrive back to each tenant's shard.
func (s *system) deadLetters() (*deadletter.Queue, error) {
	return deadletter.New(deadletter.Config{Backend: s.backend, Names: s.names, Picker: s.tracker, Backlog: s.backlog, Logger: s.logger})
}

// redisOrNil returns the Redis client as the interface the packages take,
// nil (not a typed nil) when there is none.
func (s *system) redisOrNil() redis.UniversalClient {
	if s.redis == nil {
		return nil
	}
	return s.redis
}

// withGateway adds the front door: admission limiter, shard tracker and the
// HTTP API.
func (s *system) withGateway() error {
	var limiter gateway.Limiter = throttle.NewLocalLimiter(throttle.LocalConfig{})
	if s.redis != nil {
		primary, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: s.redis, Prefix: s.keyPrefix()})
		if err != nil {
			return err
		}
		limiter, err = throttle.NewFailoverLimiter(throttle.FailoverConfig{
			Primary:      primary,
			FailClosed:   !s.cfg.Redis.FailOpen,
			Logger:       s.logger,
			RedisMetrics: s.degrade,
		})
		if err != nil {
			return err
		}
	}
	dead, err := s.deadLetters()
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	s.overview, err = overview.New(overview.Config{
		Depths:  s.backend,
		Names:   s.names,
		Tenants: s.tenants,
		Backlog: s.backlog,
		Shard: func(tenant string) []int {
			sh := s.tracker.Pool().Shard(tenant)
			out := make([]int, sh.Len())
			for i := range out {
				out[i] = sh.Queue(i)
			}
			return out
		},
		Local:            s.activity,
		Instance:         s.instance,
		Role:             s.role.String(),
		Redis:            s.redisOrNil(),
		Prefix:           s.keyPrefix(),
		NoisyShare:       s.cfg.Admin.NoisyInFlightShare,
		NoisyMinInFlight: s.cfg.Admin.NoisyMinInFlight,
		Registerer:       s.registry,
		Logger:           s.logger,
	})
	if err != nil {
		return fmt.Errorf("overview: %w", err)
	}
	s.gateway, err = gateway.New(gateway.Config{
		Backend:           s.backend,
		Names:             s.names,
		Picker:            s.tracker,
		Tenants:           s.tenants,
		Limiter:           limiter,
		DeadLetters:       dead,
		Overview:          s.overview,
		Activity:          s.activity,
		AdminTokenSHA256:  s.cfg.Admin.TokenSHA256,
		Backlog:           s.backlog,
		FailClosed:        !s.cfg.Redis.FailOpen,
		RedisMetrics:      s.degrade,
		Redis:             s.redisOrNil(),
		RedisPrefix:       s.keyPrefix(),
		IdempotencyWindow: s.cfg.Gateway.IdempotencyWindow,
		MaxMessageSize:    s.cfg.Gateway.MaxMessageSize,
		SendTimeout:       s.cfg.Gateway.SendTimeout,
		SendWindow:        s.cfg.Gateway.SendWindow,
		// Bodies are held in memory while read: a budget in all and per
		// tenant, claimed before a body is read.
		MaxInflightBytes:       s.cfg.Gateway.MaxInflightBytes,
		MaxTenantInflightBytes: s.cfg.Gateway.MaxTenantInflightBytes,
		Logger:                 s.logger,
		Registerer:             s.registry,
		Gatherer:               s.registry,
		TracerProvider:         s.tracerProvider(),
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// workerLimiter builds the per-tenant policy of the worker (package
// spillover: drop and backlog ages, process_rate and concurrency) and the
// fleet registration its limits divide by when Redis is down. With Redis,
// both limits hold across the fleet; without it, they hold in this
// process.
func (s *system) workerLimiter() (consumer.Limiter, error) {
	var err error
	s.fleet, err = fleet.New(fleet.Config{
		Redis: s.redisOrNil(), Prefix: s.keyPrefix(), ID: s.instance, Logger: s.logger, Registerer: s.registry, RedisMetrics: s.degrade,
		// The worker is made after its fleet registration, and started
		// after it: the heartbeat asks it once it exists.
		SaturatedFunc: func() bool { return s.worker != nil && s.worker.Saturated() },
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	s.autoscaling, err = fleet.NewAutoscaling(fleet.AutoscalingConfig{
		Depths:            s.backend,
		Queues:            append(append([]string{}, s.names.Live...), s.names.Overflow, s.names.Backlog),
		SizeFunc:          s.fleet.Last,
		AcceptableLatency: s.cfg.Worker.AcceptableLatency,
		Slots:             s.cfg.Worker.Connections,
		Redis:             s.redisOrNil(),
		Prefix:            s.keyPrefix(),
		RedisMetrics:      s.degrade,
		Logger:            s.logger,
		Registerer:        s.registry,
	})
	if err != nil {
		return nil, fmt.Errorf("autoscaling: %w", err)
	}
	cfg := spillover.Config{
		Tenants:       s.tenants,
		Defaults:      s.cfg.Defaults,
		DropAge:       s.cfg.Worker.DropAge,
		BacklogAge:    s.cfg.Worker.BacklogAge,
		FleetSizeFunc: s.fleet.Last,
		Registerer:    s.registry,
		Activity:      s.activity,
	}
	if s.redis != nil {
		primary, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: s.redis, Prefix: s.keyPrefix()})
		if err != nil {
			return nil, err
		}
		// While Redis is down each worker takes its share of the rate:
		// the tenant's rate divided by the last known fleet size.
		rate, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
			Primary: primary,
			Fallback: &throttle.ScaledLimiter{
				Limiter:    throttle.NewLocalLimiter(throttle.LocalConfig{}),
				FactorFunc: func() float64 { return throttle.Share(s.fleet.Last()) },
			},
			FailClosed:   !s.cfg.Redis.FailOpen,
			Component:    "worker_ratelimit",
			Logger:       s.logger,
			RedisMetrics: s.degrade,
		})
		if err != nil {
			return nil, err
		}
		cfg.Rate = rate
		// Spilled messages come back at their tenant's rate, whichever
		// workers spilled them: one line of turns in Redis, each
		// worker's own at its share while Redis is down.
		pacer, err := throttle.NewRedisPacer(throttle.RedisConfig{Client: s.redis, Prefix: s.keyPrefix()})
		if err != nil {
			return nil, err
		}
		cfg.Pacer, err = throttle.NewFailoverPacer(throttle.FailoverPacerConfig{
			Primary:       pacer,
			FleetSizeFunc: s.fleet.Last,
			Component:     "worker_pacer",
			Logger:        s.logger,
			RedisMetrics:  s.degrade,
		})
		if err != nil {
			return nil, err
		}
		// What old work leaves fresh work is measured across the fleet:
		// a worker may receive more of a tenant's fresh messages than its
		// share, or none.
		s.meter, err = throttle.NewRedisMeter(throttle.RedisMeterConfig{Client: s.redis, Prefix: s.keyPrefix(),
			Window: spillover.FreshWindow, Component: "worker_fresh_meter", Logger: s.logger, RedisMetrics: s.degrade})
		if err != nil {
			return nil, err
		}
		cfg.Meter = s.meter
		s.semaphore, err = throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: s.redis, Prefix: s.keyPrefix(), Logger: s.logger})
		if err != nil {
			return nil, err
		}
		sem, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
			Primary:       s.semaphore,
			FailClosed:    !s.cfg.Redis.FailOpen,
			FleetSizeFunc: s.fleet.Last,
			Component:     "worker_semaphore",
			Logger:        s.logger,
			RedisMetrics:  s.degrade,
		})
		if err != nil {
			return nil, err
		}
		cfg.Semaphore = sem
		// A message's slot and token in one round trip to Redis, where
		// asking for each costs one (and a refused token one more, to
		// give the slot back).
		both, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: s.semaphore, RatePrefix: s.keyPrefix()})
		if err != nil {
			return nil, err
		}
		cfg.Admitter, err = throttle.NewFailoverAdmitter(throttle.FailoverAdmitterConfig{Primary: both, Semaphore: sem, Rate: rate})
		if err != nil {
			return nil, err
		}
	}
	return spillover.New(cfg)
}

var _ consumer.Fleet = (*fleet.Fleet)(nil)

// withWorker adds the consumer daemon with the given handler.
func (s *system) withWorker(h consumer.Handler) error {
	w := s.cfg.Worker
	limiter, err := s.workerLimiter()
	if err != nil {
		return err
	}
	lot, err := s.parkingLot()
	if err != nil {
		return err
	}
	s.worker, err = consumer.New(consumer.Config{
		Backend:                s.backend,
		Names:                  s.names,
		Handler:                h,
		Connections:            w.Connections,
		VisibilityTimeout:      w.VisibilityTimeout,
		ErrorVisibilityTimeout: w.ErrorVisibilityTimeout,
		MaxRetries:             w.MaxRetries,
		InactivityTimeout:      w.InactivityTimeout,
		Limiter:                limiter,
		Dedupe:                 s.deduper(),
		Parking:                lot,
		Backlog:                s.backlog,
		ObserveFunc:            s.autoscaling.Observe,
		Fleet:                  s.fleet,
		WatchersPerQueue:       w.WatchersPerQueue,
		Logger:                 s.logger,
		Registerer:             s.registry,
		TracerProvider:         s.tracerProvider(),
	})
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if w.CronFile == "" {
		return nil
	}
	tasks, err := schedule.ParseFile(w.CronFile)
	if err != nil {
		return fmt.Errorf("worker.cron_file: %w", err)
	}
	// Firings go to the first live queue: a periodic task belongs to no
	// tenant and passes no tenant limit.
	s.scheduler, err = schedule.New(schedule.Config{
		Tasks:      tasks,
		Backend:    s.backend,
		Queue:      s.names.Live[0],
		Redis:      s.redisOrNil(),
		KeyPrefix:  s.keyPrefix(),
		Logger:     s.logger,
		Registerer: s.registry,
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// parkingLot returns where the worker records the messages of paused
// tenants it parks (in Redis for the fleet, else in this process) and
// makes the Waker that wakes them when their tenant is resumed.
func (s *system) parkingLot() (parking.Lot, error) {
	var lot parking.Lot = parking.NewMemory(nil)
	if s.redis != nil {
		// Kept a little longer than a message is parked.
		r, err := parking.NewRedis(s.redis, s.keyPrefix(), consumer.ParkForDefault+time.Hour, nil)
		if err != nil {
			return nil, err
		}
		lot = r
	}
	paused := func(id string) bool {
		st, _ := s.tenants.StateOf(id)
		return st.Paused
	}
	var err error
	s.waker, err = parking.NewWaker(parking.WakerConfig{Lot: lot, Backend: s.backend, PausedFunc: paused, Logger: s.logger, Registerer: s.registry})
	return lot, err
}

// deduper returns the worker's memory of the messages it ran: in Redis for
// the fleet, else in this process; nil when worker.dedupe_window is 0s.
// A claim's lease is the visibility timeout, renewed by the heartbeat, so
// that a dead worker's claims lapse with its messages' visibility.
func (s *system) deduper() consumer.Deduper {
	w := s.cfg.Worker
	if w.DedupeWindow <= 0 {
		return nil
	}
	if s.redis == nil {
		return dedupe.NewMemory(dedupe.MemoryConfig{Window: w.DedupeWindow, Lease: w.VisibilityTimeout})
	}
	d, _ := dedupe.NewRedis(dedupe.RedisConfig{ // cannot fail: the client is set
		Client: s.redis, Prefix: s.keyPrefix(), Window: w.DedupeWindow, Lease: w.VisibilityTimeout,
		Dependency: degrade.New(degrade.Config{
			Component: "worker_dedupe",
			Metrics:   s.degrade,
			Logger:    s.logger,
			Down:      "redis unreachable; messages run without de-duplication until it is back (fail open)",
		}),
	})
	return d
}

// pushHandler returns the handler that POSTs each message to the
// application at url, as aws-sqsd does.
func (s *system) pushHandler(url string) (consumer.Handler, error) {
	w := s.cfg.Worker
	p, err := consumer.NewPush(consumer.PushConfig{
		URL:            url,
		MimeType:       w.MimeType,
		Connections:    w.Connections,
		ConnectTimeout: w.ConnectTimeout,
		Version:        buildVersion(),
	})
	if err != nil {
		return nil, err
	}
	s.push = p
	return p, nil
}

// Start starts the parts in dependency order: the tenant registry first
// (auth needs it), then the backlog counts (the gateway adds to them, the
// worker takes away), the shard tracker, the gateway's batchers, the
// worker and the scheduler of periodic tasks. On failure it stops what it
// started.
func (s *system) Start(ctx context.Context) error {
	parts := []component{s.tenants, s.backlog}
	if s.gateway != nil {
		parts = append(parts, s.tracker, s.gateway, s.overview)
	}
	if s.worker != nil {
		// The fleet registration and the lease renewer before the worker
		// that relies on them; the worker stops first and releases its
		// permits before the renewer stops.
		parts = append(parts, s.fleet)
		if s.semaphore != nil {
			parts = append(parts, s.semaphore, s.meter)
		}
		parts = append(parts, s.autoscaling, s.worker, s.waker)
	}
	if s.scheduler != nil {
		parts = append(parts, s.scheduler)
	}
	if s.board != nil {
		parts = append(parts, s.board)
	}
	for _, p := range parts {
		if err := p.Start(ctx); err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpGrace)
			defer cancel()
			return errors.Join(err, s.Stop(stopCtx))
		}
		s.started = append(s.started, p)
	}
	return nil
}

// partStop bounds the Stop of each part but the worker, which has the
// grace period: flushing a batch or giving up a lease takes a round trip.
const partStop = 5 * time.Second

// Stop stops the parts in reverse order: the scheduler first (it gives up
// its lease), the worker (it finishes or releases in-flight jobs and
// flushes deletes, within ctx: the grace period), then the lease renewer
// (it releases what the worker held), the fleet registration, the gateway
// (it flushes pending send batches), the tracker, the backlog counts (they
// apply what the gateway and the worker counted until they stopped) and
// the registry; last the Redis connection. Each part after the worker has partStop of its own,
// so that a worker that used the whole grace period leaves them time.
func (s *system) Stop(ctx context.Context) error {
	var errs []error
	for i := len(s.started) - 1; i >= 0; i-- {
		part := s.started[i]
		partCtx, cancel := ctx, context.CancelFunc(func() {})
		if part != component(s.worker) {
			partCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), partStop)
		}
		err := part.Stop(partCtx)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.started = nil
	if err := s.stopTracing(ctx); err != nil { // the parts made their last spans
		errs = append(errs, err)
	}
	if s.push != nil {
		s.push.Close() // idle connections to the application
	}
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
		s.redis = nil
	}
	return errors.Join(errs...)
}

// Limits of the HTTP server, chosen so that a slow or hostile client holds
// little for long (the README's "What a client gets" lists them):
//   - readHeaderTimeout: the request line and headers, from the first
//     byte; an API client sends them at once.
//   - readTimeout: the whole request, headers and body, from its first
//     byte: a trickling body cannot stretch it, and it bounds how long a
//     body holds its claim on the gateway's body budget. An 8 MiB batch
//     needs 4.5 Mbit/s to make it.
//   - idleTimeout: a kept-alive connection waiting for its next request.
//   - maxHeaderBytes: the request line and headers (an API key, a
//     traceparent, an Idempotency-Key of 128 bytes fit many times over);
//     past it the client gets 431.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

// serve runs handler on the configured address until ctx ends, then shuts
// the server down within httpGrace (in-flight requests finish; new
// connections are refused). ready, when not nil, receives the bound
// address once the listener is open.
func serve(ctx context.Context, addr string, handler http.Handler, logger *slog.Logger, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpGrace)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	<-errc //nolint:errcheck // Serve returns ErrServerClosed once Shutdown began
	return err
}
