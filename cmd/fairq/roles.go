package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/tenant"
)

// demoTenant is the tenant `fairq dev` creates when the configuration has
// none.
const demoTenant = "demo"

// devOptions are the flags of `fairq dev`.
type devOptions struct {
	config  string
	listen  string
	pushURL string
}

// runDev runs gateway and worker in one process: the memory backend unless
// the configuration says sqs; with no --push-url, each message is logged by
// a built-in handler and deleted.
func runDev(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "dev")
	var o devOptions
	fs.StringVar(&o.config, "config", "", "configuration file (YAML); none runs with defaults and a demo tenant")
	fs.StringVar(&o.listen, "listen", "", "address of the HTTP API (overrides listen)")
	fs.StringVar(&o.pushURL, "push-url", "", "POST each message to this URL, as aws-sqsd does; none logs and deletes each message")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return dev(ctx, e, o, nil)
}

// dev is `fairq dev`; ready, when not nil, receives the system and the
// API's address once it is up (tests use it).
func dev(ctx context.Context, e env, o devOptions, ready func(*system, net.Addr)) error {
	cfg, err := config.Load(o.config, e.getenv)
	if err != nil {
		return err
	}
	if o.listen != "" {
		cfg.Listen = o.listen
	}
	if o.pushURL != "" {
		cfg.Worker.PushURL = o.pushURL
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("--push-url: %w", err)
		}
	}
	var demoKey string
	if len(cfg.Tenants) == 0 {
		demoKey = newAPIKey()
		cfg.Tenants = []config.Tenant{{ID: demoTenant, APIKeys: []string{tenant.HashKey(demoKey)}}}
	}
	// The console and the admin API come on out of the box, with a token
	// made for this run.
	var adminToken string
	if cfg.Admin.TokenSHA256 == "" {
		adminToken = newAPIKey()
		cfg.Admin.TokenSHA256 = strings.TrimPrefix(tenant.HashKey(adminToken), "sha256:")
	}
	logger := newLogger(e, cfg, true)
	return logFailure(logger, devRun(ctx, e, o, cfg, demoKey, adminToken, logger, ready))
}

// devRun is the part of dev that runs under its logger.
func devRun(ctx context.Context, e env, o devOptions, cfg config.Config, demoKey, adminToken string, logger *slog.Logger, ready func(*system, net.Addr)) error {
	s, err := newSystem(ctx, roleDev, cfg, logger)
	if err != nil {
		return err
	}
	if err := s.withTracing(ctx, e); err != nil {
		return err
	}
	var h consumer.Handler = consumer.NewLogHandler(logger)
	if o.pushURL != "" {
		if h, err = s.pushHandler(o.pushURL); err != nil {
			return err
		}
	}
	if err := s.withGateway(); err != nil {
		return err
	}
	if err := s.withWorker(h); err != nil {
		return err
	}
	return runSystem(ctx, s, s.gateway, func(addr net.Addr) {
		logger.Info("fairq dev is up", "listen", addr.String(), "backend", cfg.Backend,
			"push_url", o.pushURL, "queues", len(s.names.Live))
		if demoKey != "" {
			fmt.Fprintf(e.stderr, "api key for tenant %s: %s\n", demoTenant, demoKey)
		}
		if adminToken != "" {
			fmt.Fprintf(e.stderr, "admin token: %s\n", adminToken)
		}
		fmt.Fprintf(e.stderr, "console: http://%s/console/\n", addr)
		if ready != nil {
			ready(s, addr)
		}
	})
}

// runGateway runs the HTTP front door.
func runGateway(ctx context.Context, e env, args []string) error {
	cfg, err := loadRoleConfig(e, "gateway", args)
	if err != nil {
		return err
	}
	logger := newLogger(e, cfg, false)
	return logFailure(logger, gatewayRun(ctx, e, cfg, logger))
}

func gatewayRun(ctx context.Context, e env, cfg config.Config, logger *slog.Logger) error {
	s, err := newSystem(ctx, roleGateway, cfg, logger)
	if err != nil {
		return err
	}
	if err := s.withTracing(ctx, e); err != nil {
		return err
	}
	if err := s.withGateway(); err != nil {
		return err
	}
	return runSystem(ctx, s, s.gateway, func(addr net.Addr) {
		logger.Info("gateway listening", "listen", addr.String(), "backend", cfg.Backend, "version", buildVersion())
	})
}

// runWorker runs the consumer daemon. It serves /healthz and /metrics on
// the listen address, for probes and scraping.
func runWorker(ctx context.Context, e env, args []string) error {
	cfg, err := loadRoleConfig(e, "worker", args)
	if err != nil {
		return err
	}
	logger := newLogger(e, cfg, false)
	return logFailure(logger, workerRun(ctx, e, cfg, logger))
}

func workerRun(ctx context.Context, e env, cfg config.Config, logger *slog.Logger) error {
	s, err := newSystem(ctx, roleWorker, cfg, logger)
	if err != nil {
		return err
	}
	if err := s.withTracing(ctx, e); err != nil {
		return err
	}
	h, err := s.pushHandler(cfg.Worker.PushURL)
	if err != nil {
		return err
	}
	if err := s.withWorker(h); err != nil {
		return err
	}
	ops := chi.NewRouter()
	ops.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ops.Get("/readyz", s.workerReady().ServeHTTP)
	ops.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	return runSystem(ctx, s, ops, func(addr net.Addr) {
		logger.Info("worker running", "ops_listen", addr.String(), "push_url", cfg.Worker.PushURL,
			"backend", cfg.Backend, "version", buildVersion())
	})
}

// loadRoleConfig parses --config for a role that needs a file.
func loadRoleConfig(e env, name string, args []string) (config.Config, error) {
	fs := newFlags(e, name)
	path := fs.String("config", "", "configuration file (YAML)")
	if err := parseFlags(fs, args); err != nil {
		return config.Config{}, err
	}
	if *path == "" {
		return config.Config{}, fmt.Errorf("%w: --config is required", errUsage)
	}
	return config.Load(*path, e.getenv)
}

// runSystem starts s, serves handler until ctx ends (SIGINT or SIGTERM),
// then shuts down in order: the HTTP server stops accepting and drains,
// then the system stops (worker, gateway batches, tracker, registry) within
// its grace period.
func runSystem(ctx context.Context, s *system, handler http.Handler, ready func(net.Addr)) error {
	// The parts run until Stop, not until the signal: their own contexts
	// must outlive it so that Stop's grace period means something.
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	serveErr := serve(ctx, s.cfg.Listen, handler, s.logger, ready)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workerGrace)
	defer cancel()
	stopErr := s.Stop(stopCtx)
	if serveErr == nil && stopErr == nil {
		s.logger.Info("stopped cleanly")
	}
	return errors.Join(serveErr, stopErr)
}

// newAPIKey returns a fresh API key in the registry's format.
func newAPIKey() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "fq_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// redriveCountTimeout bounds the backlog counts of a redrive from the
// command line.
const redriveCountTimeout = 5 * time.Second

// runDLQRedrive moves dead letters back to their tenants' shards, each
// with its attempts reset, and prints the counts.
func runDLQRedrive(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "dlq redrive")
	path := fs.String("config", "", "configuration file (YAML)")
	tenantID := fs.String("tenant", "", "move only this tenant's dead letters")
	maxN := fs.Int("max", 0, "move at most this many (0: all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("%w: --config is required", errUsage)
	}
	if *maxN < 0 {
		return fmt.Errorf("%w: --max must not be negative", errUsage)
	}
	cfg, err := config.Load(*path, e.getenv)
	if err != nil {
		return err
	}
	if cfg.Backend != config.BackendSQS {
		return fmt.Errorf("%w: backend is %q: the memory backend lives inside a running process; use POST /admin/v1/dlq/redrive there", errUsage, cfg.Backend)
	}
	logger := newLogger(e, cfg, false)
	s, err := newSystem(ctx, roleTool, cfg, logger)
	if err != nil {
		return err
	}
	defer func() { _ = s.Stop(context.WithoutCancel(ctx)) }()
	// One reading of the queue depths, so that each message goes to the
	// shallowest queue of its tenant's shard.
	if err := s.tracker.Refresh(ctx); err != nil {
		logger.Warn("queue depths unknown: picking at random within each shard", "err", err)
	}
	dead, err := s.deadLetters()
	if err != nil {
		return err
	}
	res, err := dead.Redrive(ctx, deadletter.Selection{Tenant: *tenantID, Max: *maxN})
	// The system was not started: the counts of the messages moved back
	// are applied here, whatever became of ctx.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redriveCountTimeout)
	if ferr := s.backlog.Flush(fctx); ferr != nil {
		logger.Warn("redrive: backlog counter not incremented", "err", ferr)
	}
	cancel()
	fmt.Fprintf(e.stdout, "moved %d, skipped %d, failed %d\n", res.Moved, res.Skipped, res.Failed)
	for _, t := range slices.Sorted(maps.Keys(res.ByTenant)) {
		fmt.Fprintf(e.stdout, "  tenant %q: %d\n", t, res.ByTenant[t])
	}
	return err
}
