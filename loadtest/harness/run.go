package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Options configure one run: a scenario in a mode.
type Options struct {
	Scenario Scenario
	Mode     Mode
	// Baseline runs the scenario with its quiet tenants only.
	Baseline bool
	// Backend is "memory" (the default: one `fairq dev` process) or
	// "sqs" (a gateway and separate workers on Services).
	Backend string
	// Services are the SQS endpoint and Redis of the sqs backend.
	Services Services
	// Binary is the fairq binary; Build makes one.
	Binary string
	// App, when set, is the application process (BuildApp makes one):
	// the sink then runs in a process of its own instead of the
	// harness's, so that a push does not wait to be answered in the
	// process that sends the load.
	App string
	// Clients, when set, is the clients process (BuildClients makes
	// one): the load is then sent from a process of its own, under
	// SCHED_IDLE, instead of the harness's.
	Clients string
	// Burn, when more than zero, is the CPU, in cores, that a burn
	// process (Burner, which BuildBurner makes) burns while the load is
	// offered, at normal priority: the contention control, which runs the
	// quiet tenants (Baseline) beside work that shares nothing with fairq
	// but the cores. Its CPU is counted in CPUUse as the burner's.
	Burn   float64
	Burner string
	// Dir receives the run's configuration, the processes' logs and its
	// records (messages.csv, result.json).
	Dir string
	// Logger reports progress; nil is slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Backend = cmp.Or(o.Backend, backendMemory)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

func (o Options) validate() error {
	if err := o.Scenario.validate(); err != nil {
		return err
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return err
	}
	switch o.Backend {
	case backendMemory:
		if o.Scenario.Outage.For > 0 {
			return fmt.Errorf("%w: %s", ErrNeedsSQS, o.Scenario.Name)
		}
	case backendSQS:
		if o.Services.SQSEndpoint == "" || !o.Services.redis() {
			return fmt.Errorf("%w: the sqs backend needs an SQS endpoint and Redis", ErrInvalidOptions)
		}
	default:
		return fmt.Errorf("%w: unknown backend %q (want memory or sqs)", ErrInvalidOptions, o.Backend)
	}
	if o.Mode == ModeFleet && o.Backend != backendSQS {
		return fmt.Errorf("%w: fleet mode, %s", ErrNeedsSQS, o.Scenario.Name)
	}
	if o.Binary == "" || o.Dir == "" {
		return fmt.Errorf("%w: Binary and Dir are required", ErrInvalidOptions)
	}
	if o.Burn < 0 || o.Burn > float64(runtime.NumCPU()) || (o.Burn > 0 && o.Burner == "") {
		return fmt.Errorf("%w: Burn %g must be 0 to the machine's %d cores, and with a Burner", ErrInvalidOptions, o.Burn, runtime.NumCPU())
	}
	return nil
}

// pollEvery is how often the harness reads the queue depths while it
// waits for them to drain.
const pollEvery = 250 * time.Millisecond

// Run starts the system of the scenario in the mode, drives the load for
// Scenario.Duration (stopping and restarting the workers for an outage),
// waits for every accepted message to end, redrives the dead letters so
// that the sink can name them, stops everything and returns what happened
// to every message. A run whose accounting does not balance is still
// returned, with no error: Result.Accounting says so.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	sc := o.Scenario
	if o.Baseline {
		sc = sc.WithoutOthers()
	}
	if o.Mode == ModeFleet {
		sc.Workers = FleetWorkers
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	log := o.Logger.With("scenario", sc.Name, "mode", o.Mode, "baseline", o.Baseline)

	snk, err := startApplication(ctx, o.App, o.Dir, sc.Tenants)
	if err != nil {
		return nil, err
	}
	defer snk.Stop(context.WithoutCancel(ctx))

	cfg := systemConfig{
		scenario: sc, mode: o.Mode, backend: o.Backend, services: o.Services,
		prefix: "lt" + randomHex(4), pushURL: snk.url(), creds: newCredentials(sc.Tenants),
	}
	if o.Mode == ModeFleet {
		cfg.gateways = FleetGateways
	}
	sys, err := startSystem(ctx, cfg, o.Binary, o.Dir)
	if err != nil {
		return nil, err
	}
	defer sys.stop(context.WithoutCancel(ctx))

	res := &Result{Scenario: sc, Mode: o.Mode, Backend: o.Backend, Baseline: o.Baseline,
		AppProcess: o.App != "", ClientsProcess: o.Clients != "", Burn: o.Burn}
	urls := []string{sys.baseURL()}
	if o.Mode == ModeFleet {
		res.Redis, res.Gateways = o.Services.topology(), FleetGateways
		urls = sys.gatewayURLs()
	}
	lead := 100 * time.Millisecond
	if o.Clients != "" {
		lead = clientsLead
	}
	res.Start = time.Now().Add(lead)
	log.Info("load", "duration", sc.Duration, "tenants", len(sc.Tenants))

	res.LoadAvg[0] = loadAvg()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampling := make(chan samples, 1)
	go func() { sampling <- sample(sampleCtx, sys, res.Start) }()
	sampled := false
	endSampling := func() {
		if !sampled {
			stopSampling()
			s := <-sampling
			res.Depths, res.CPU, sampled = s.depths, s.cpu, true
		}
	}
	defer endSampling()
	burner, err := startBurner(o.Burner, o.Dir, o.Burn)
	if err != nil {
		return nil, err
	}
	if burner != nil {
		defer burner.stop(context.WithoutCancel(ctx))
	}
	cpuSources := func() []cpuSource {
		ss := sys.cpuSources(snk)
		if burner != nil {
			ss = append(ss, cpuSource{role: roleBurner, p: burner})
		}
		return ss
	}
	// Read before the outage's goroutine starts, which starts workers,
	// and after it ends.
	meter := beginCPU(cpuSources())
	outageErr := make(chan error, 1)
	go func() { outageErr <- runOutage(ctx, sys, res, log) }()
	load := ClientsConfig{URLs: urls, Keys: cfg.creds.keys, Tenants: sc.Tenants, Start: res.Start, Duration: sc.Duration}
	var clientsCPU time.Duration
	res.Sends, res.Skipped, clientsCPU, err = offer(ctx, o.Clients, o.Dir, load)
	res.LoadAvg[1] = loadAvg()
	if burner != nil {
		err = errors.Join(err, burner.stop(ctx))
	}
	if err := errors.Join(err, <-outageErr); err != nil {
		return nil, err
	}
	var clients map[string]time.Duration // nil: the load came from the harness, counted as its own
	if o.Clients != "" {
		clients = map[string]time.Duration{roleClients: clientsCPU}
	}
	res.CPUUse = meter.end(cpuSources(), clients)
	if err := sys.check(); err != nil {
		return nil, err
	}

	log.Info("load done: waiting for the queues to drain", "sent", len(res.Sends), "limit", sc.Drain)
	res.Drained, res.Leftover, err = waitDrained(ctx, sys, snk, sc.Drain, false)
	if err != nil {
		return nil, err
	}
	res.DrainedAt = time.Now()
	if err := deadLetters(ctx, sys, snk, sc.Drain, res, log); err != nil {
		return nil, err
	}
	endSampling()
	if err := sys.saveMetrics(ctx); err != nil {
		log.Warn("metrics not saved", "err", err)
	}
	if err := sys.stop(ctx); err != nil {
		return nil, fmt.Errorf("stop fairq: %w", err)
	}
	// Stopped, the application has told of every push.
	if err := snk.Stop(ctx); err != nil {
		return nil, fmt.Errorf("stop the application: %w", err)
	}
	res.Deliveries = snk.snapshot()
	res.analyse()
	if o.Mode.limited() {
		res.LimitsSeen = res.limitsSeen(snk.maxInFlight())
	}
	if res.Gateways > 0 {
		res.GatewayAccepted = res.acceptedByGateway()
	}
	if err := res.write(o.Dir); err != nil {
		return nil, err
	}
	log.Info("run done", "accepted", res.Accounting.Accepted, "processed", res.Accounting.Processed,
		"dead_lettered", res.Accounting.DeadLettered, "lost", res.Accounting.Lost, "duplicates", res.Accounting.Duplicates)
	return res, nil
}

// clientsLead is how long before its load a clients process is started:
// time to start and read its configuration.
const clientsLead = time.Second

// offer offers the load of cfg from the clients process bin, or from the
// harness's own process when bin is empty, and returns every send, the
// number skipped and the CPU time of the clients process (0 without one).
func offer(ctx context.Context, bin, dir string, cfg ClientsConfig) ([]Send, int64, time.Duration, error) {
	if bin != "" {
		return offerFromProcess(ctx, bin, dir, cfg)
	}
	sends, skipped := generate(ctx, cfg)
	return sends, skipped, 0, nil
}

// startBurner starts the burn process bin, burning cores, when cores is
// more than zero; nil otherwise.
func startBurner(bin, dir string, cores float64) (*process, error) {
	if cores <= 0 {
		return nil, nil
	}
	return startProcess("burn", dir, filepath.Join(dir, "burn.log"), nil, false, nil, bin, "-cores", strconv.FormatFloat(cores, 'f', -1, 64))
}

// startApplication starts the application behind the workers: the
// application process bin, or the harness's own sink when bin is empty.
func startApplication(ctx context.Context, bin, dir string, tenants []Tenant) (application, error) {
	if bin != "" {
		return startApp(ctx, bin, dir, tenants)
	}
	s, err := newSink(tenants)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// samples is what the harness reads every second of a run.
type samples struct {
	depths []DepthSample
	cpu    []CPUSample
}

// sample reads the machine's CPU time at once and then, every second
// until ctx ends, the CPU time and the queues' depths. A depth reading
// that fails (the gateway busy, say) is skipped; where /proc/stat is
// missing there is no CPU time.
func sample(ctx context.Context, sys *system, start time.Time) samples {
	var out samples
	readCPU := func() {
		if t, ok := cpuTimes(); ok {
			out.cpu = append(out.cpu, CPUSample{At: time.Since(start), Steal: t.Steal, Total: t.Total})
		}
	}
	readCPU()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		readCPU()
		qs, err := sys.queues(ctx)
		if err != nil {
			continue
		}
		d := DepthSample{At: time.Since(start)}
		for _, q := range qs {
			switch q.Role {
			case "live":
				d.Live += q.total()
			case "overflow":
				d.Overflow += q.total()
			case "backlog":
				d.Backlog += q.total()
			case "dlq":
				d.DLQ += q.total()
			}
		}
		out.depths = append(out.depths, d)
	}
}

// runOutage stops the workers at Outage.At and starts them again For
// later, recording when; without an outage it returns at once.
func runOutage(ctx context.Context, sys *system, res *Result, log *slog.Logger) error {
	o := res.Scenario.Outage
	if o.For == 0 {
		return nil
	}
	if sleepUntil(ctx, res.Start.Add(o.At)) != nil {
		return nil //nolint:nilerr // the load ends with ctx too
	}
	res.OutageStart = time.Now()
	log.Info("outage: stopping the workers")
	if err := sys.stopWorkers(ctx); err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	if sleepUntil(ctx, res.OutageStart.Add(o.For)) != nil {
		return nil //nolint:nilerr // the load ends with ctx too
	}
	res.OutageEnd = time.Now()
	log.Info("outage over: starting the workers")
	if err := sys.startWorkers(ctx); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	res.WorkersReady = time.Now()
	return nil
}

// waitDrained waits until no queue holds a message (the dead-letter queue
// too, with dlq) and the sink answers none, read twice in a row, or until
// limit. It returns whether they drained and, if not, how many messages
// were left.
func waitDrained(ctx context.Context, sys *system, snk application, limit time.Duration, dlq bool) (bool, int, error) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	quiet, left := 0, -1
	for {
		qs, err := sys.queues(ctx)
		if err != nil {
			if err := sys.check(); err != nil {
				return false, left, err
			}
		} else {
			left = 0
			for _, q := range qs {
				if q.Role != "dlq" || dlq {
					left += q.total()
				}
			}
			if left == 0 && snk.busy() == 0 {
				quiet++
			} else {
				quiet = 0
			}
			if quiet >= 2 {
				return true, 0, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, left, ctx.Err()
		case <-deadline.C:
			return false, left, nil
		case <-tick.C:
		}
	}
}

// deadLetters counts the dead-letter queue, then, if it holds any,
// redrives it with the sink answering 200 to everything: each message the
// sink then receives is a dead letter, named by its number.
func deadLetters(ctx context.Context, sys *system, snk application, limit time.Duration, res *Result, log *slog.Logger) error {
	qs, err := sys.queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.Role == "dlq" {
			res.DLQDepth += q.total()
		}
	}
	if res.DLQDepth == 0 {
		return nil
	}
	log.Info("redriving the dead letters to name them", "dlq", res.DLQDepth)
	if err := snk.fix(ctx); err != nil {
		return err
	}
	if res.Redriven, err = sys.redrive(ctx); err != nil {
		return err
	}
	drained, left, err := waitDrained(ctx, sys, snk, limit, true)
	if err != nil {
		return err
	}
	if !drained {
		log.Warn("dead letters not all delivered after the redrive", "left", left)
		res.Leftover += left
	}
	return nil
}

// loadAvg returns the 1-minute load average, or "" where /proc has none.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// ModuleRoot returns the directory of fairq's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the fairq module")
	}
	return filepath.Dir(mod), nil
}

// Build builds the fairq binary into dir and returns its path; race builds
// it with the race detector.
func Build(ctx context.Context, root, dir string, race bool) (string, error) {
	return buildCommand(ctx, root, dir, "./cmd/fairq", race)
}

// BuildApp builds the application process (./loadtest/app) into dir and
// returns its path.
func BuildApp(ctx context.Context, root, dir string) (string, error) {
	return buildCommand(ctx, root, dir, "./loadtest/app", false)
}

// BuildClients builds the clients process (./loadtest/clients) into dir
// and returns its path.
func BuildClients(ctx context.Context, root, dir string) (string, error) {
	return buildCommand(ctx, root, dir, "./loadtest/clients", false)
}

// BuildBurner builds the burn process (command loadtest/burn) of the
// module at root into dir and returns its path.
func BuildBurner(ctx context.Context, root, dir string) (string, error) {
	return buildCommand(ctx, root, dir, "./loadtest/burn", false)
}

// buildCommand builds the command pkg of the module at root into dir,
// named as its directory, and returns its path.
func buildCommand(ctx context.Context, root, dir, pkg string, race bool) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin, err := filepath.Abs(filepath.Join(dir, filepath.Base(pkg)))
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}
