package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ChaosOptions configure one chaos run.
type ChaosOptions struct {
	Fault Fault
	// Binary is the fairq binary; Build makes one.
	Binary string
	// Root is the module root: the SQS emulator is started from its
	// node_modules.
	Root string
	// Dir receives the run's configuration, the logs of fairq and of the
	// services, and its records (result.json, messages.csv, memory.csv).
	Dir string
	// Logger reports progress; nil is slog.Default().
	Logger *slog.Logger
}

// memEvery is how often the resident memory of fairq's processes is read.
const memEvery = 200 * time.Millisecond

// carefulBackoff is the careful client's first wait after a transport
// error or an answer without Retry-After.
const carefulBackoff = 100 * time.Millisecond

// carefulInFlight bounds the messages the careful client has open at
// once: enough for 250 messages/s held 60 s by a stalled backend.
const carefulInFlight = 20_000

// chaosEnv is what a fault is injected into: the run's processes,
// services and measurements.
type chaosEnv struct {
	f     Fault
	sys   *system
	svc   *LocalServices
	snk   *sink
	gen   *generator
	mem   *memorySampler
	redis *proxy // between fairq and Redis, or nil
	sqs   *proxy // between fairq and the emulator, or nil
	res   *ChaosResult
	log   *slog.Logger
}

// RunChaos runs one fault on fresh processes: it starts redis-server and
// the SQS emulator, the sink, a gateway and the fault's workers, offers
// the load as a careful client, injects the fault, waits for every
// accepted message to end, redrives any dead letters so that the sink can
// name them, stops everything and returns what happened to every message.
// A run that falls short of its expectations is returned with no error:
// ChaosResult.Checks say so.
func RunChaos(ctx context.Context, o ChaosOptions) (*ChaosResult, error) {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	f := o.Fault
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if o.Binary == "" || o.Dir == "" || o.Root == "" {
		return nil, fmt.Errorf("%w: Binary, Root and Dir are required", ErrInvalidOptions)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	log := o.Logger.With("fault", f.Name)
	e := &chaosEnv{f: f, log: log, res: &ChaosResult{Fault: f}}
	err := e.run(ctx, o)
	e.close()
	if err != nil {
		return nil, err
	}
	if err := e.res.write(o.Dir); err != nil {
		return nil, err
	}
	a := e.res
	log.Info("chaos run done", "accepted", a.Accepted, "delivered", a.Delivered, "lost", a.Lost,
		"duplicates", a.Duplicates, "retried_duplicates", a.RetriedDuplicates, "pass", a.Pass())
	return e.res, nil
}

// run does the work of RunChaos; close undoes what it started.
func (e *chaosEnv) run(ctx context.Context, o ChaosOptions) error {
	f, log := e.f, e.log
	log.Info("starting redis-server and the SQS emulator")
	var err error
	if e.svc, err = StartLocalServices(ctx, o.Root, filepath.Join(o.Dir, "services")); err != nil {
		return err
	}
	services := e.svc.Services
	if f.needsRedisProxy() {
		if e.redis, err = startProxy(services.RedisAddr); err != nil {
			return err
		}
		services.RedisAddr = e.redis.addr()
	}
	if f.needsSQSProxy() {
		host, ok := strings.CutPrefix(services.SQSEndpoint, "http://")
		if !ok {
			return fmt.Errorf("SQS endpoint %q: want http://host:port", services.SQSEndpoint)
		}
		if e.sqs, err = startProxy(host); err != nil {
			return err
		}
		services.SQSEndpoint = "http://" + e.sqs.addr()
	}

	sc := f.scenario()
	if e.snk, err = newSink(sc.Tenants); err != nil {
		return err
	}
	if err := e.snk.Start(ctx); err != nil {
		return err
	}
	cfg := systemConfig{
		scenario: sc, mode: ModeFull, backend: backendSQS, services: services,
		prefix: "cx" + randomHex(4), pushURL: e.snk.url(), creds: newCredentials(sc.Tenants),
	}
	log.Info("starting fairq", "workers", f.Workers)
	if e.sys, err = startSystem(ctx, cfg, o.Binary, o.Dir); err != nil {
		return err
	}

	res := e.res
	res.Start = time.Now().Add(100 * time.Millisecond)
	e.mem = newMemorySampler(memEvery, res.Start)
	e.mem.track("gateway", e.sys.gateway)
	for i, p := range e.sys.workers {
		e.mem.track(workerRole(i), p)
	}
	memCtx, stopMem := context.WithCancel(ctx)
	memDone := make(chan struct{})
	go func() {
		defer close(memDone)
		e.mem.run(memCtx)
	}()
	defer func() {
		stopMem()
		<-memDone
	}()

	e.gen = newGenerator(e.sys.baseURL(), cfg.creds.keys, f.load(sc))
	e.gen.beCareful(retryPolicy{For: f.RetryFor, Backoff: carefulBackoff}, carefulInFlight)
	res.LoadAvg[0] = loadAvg()
	if f.Repeat > 0 {
		if err := e.restartThenSend(ctx); err != nil {
			return err
		}
	} else {
		log.Info("load", "rate", f.Rate, "duration", f.Duration, "fault_at", f.At, "fault_for", f.For)
		faultErr := make(chan error, 1)
		go func() { faultErr <- e.inject(ctx, cfg.creds.keys[attackTenant]) }()
		e.gen.run(ctx, res.Start, f.Duration)
		if err := <-faultErr; err != nil {
			return err
		}
	}
	res.LoadAvg[1] = loadAvg()
	if err := e.sys.check(); err != nil {
		return err
	}

	sends, skipped := e.gen.results()
	log.Info("load done: waiting for the queues to drain", "sent", len(sends), "limit", f.Drain)
	res.Drained, res.Leftover, err = waitDrained(ctx, e.sys, e.snk, f.Drain, false)
	if err != nil {
		return err
	}
	// Dead letters are counted and redriven as in a load test run, so
	// that the sink names each; a run's Result only carries what
	// deadLetters fills.
	dl := &Result{}
	if err := deadLetters(ctx, e.sys, e.snk, f.Drain, dl, log); err != nil {
		return err
	}
	res.DLQDepth, res.Leftover = dl.DLQDepth, res.Leftover+dl.Leftover
	deliveries := e.snk.snapshot()
	stopMem()
	<-memDone
	if err := e.sys.saveMetrics(ctx); err != nil {
		log.Warn("metrics not saved", "err", err)
	}
	if err := e.sys.stop(ctx); err != nil {
		return fmt.Errorf("stop fairq: %w", err)
	}
	res.Skipped = skipped
	res.analyse(sends, deliveries, e.mem.all())
	return nil
}

// close stops what run started, in the reverse order: fairq, the sink,
// the proxies, the services. The emulator of a stall is continued first
// (again, if the fault did), or it could not exit.
func (e *chaosEnv) close() {
	ctx := context.Background()
	var errs []error
	if e.sys != nil {
		errs = append(errs, e.sys.stop(ctx))
	}
	if e.snk != nil {
		errs = append(errs, e.snk.Stop(ctx))
	}
	for _, p := range []*proxy{e.redis, e.sqs} {
		if p != nil {
			p.close()
		}
	}
	if e.svc != nil {
		if e.f.Name == FaultSQSStall && e.svc.fauxqs != nil {
			errs = append(errs, e.svc.fauxqs.signal(sigCont))
		}
		errs = append(errs, e.svc.Stop(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		e.log.Warn("chaos run: stopping", "err", err)
	}
}

// workerRole is the memory sampler's name of worker i (from 0).
func workerRole(i int) string { return fmt.Sprintf("worker-%d", i+1) }
