package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The backends a system runs on.
const (
	backendMemory = "memory"
	backendSQS    = "sqs"
)

// system is fairq as a user runs it, in child processes of the real
// binary: on the memory backend one `fairq dev` (gateway and worker share
// the in-process queues); on sqs a gateway and Scenario.Workers workers,
// with Redis for the shared limits and counters; a fleet (ModeFleet) has
// systemConfig.gateways gateways.
type system struct {
	cfg        systemConfig
	bin        string
	dir        string
	configPath string
	client     *http.Client

	gatewayAddr string
	gateway     *process // the `fairq dev` process on memory
	// peerAddrs and peers are a fleet's gateways after the first, which
	// the admin calls and the chaos faults do not use.
	peerAddrs   []string
	peers       []*process
	workerAddrs []string
	workers     []*process // nil while stopped; always nil on memory
	// started are every process started, stopped ones included, for
	// their CPU time (CPUUse).
	started []cpuSource
}

// startSystem writes the configuration under dir and starts the processes.
func startSystem(ctx context.Context, cfg systemConfig, bin, dir string) (*system, error) {
	s := &system{cfg: cfg, bin: bin, dir: dir, configPath: filepath.Join(dir, "fairq.yaml"), client: newProbeClient()}
	if err := os.WriteFile(s.configPath, cfg.yaml(), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	var err error
	if s.gatewayAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	if cfg.backend == backendMemory {
		s.gateway, err = s.start(ctx, "fairq dev", "dev.log", s.gatewayAddr, "/readyz", "dev", "--config", s.configPath, "--push-url", cfg.pushURL)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := s.createQueues(ctx); err != nil {
		return nil, err
	}
	if err := s.startGateway(ctx); err != nil {
		return nil, err
	}
	for i := 1; i < cfg.gateways; i++ {
		addr, err := freeAddr()
		if err != nil {
			s.stop(context.WithoutCancel(ctx))
			return nil, err
		}
		p, err := s.start(ctx, fmt.Sprintf("fairq gateway %d", i+1), fmt.Sprintf("gateway-%d.log", i+1), addr, "/readyz", "gateway", "--config", s.configPath)
		if err != nil {
			s.stop(context.WithoutCancel(ctx))
			return nil, err
		}
		s.peerAddrs, s.peers = append(s.peerAddrs, addr), append(s.peers, p)
	}
	for range cfg.scenario.Workers {
		addr, err := freeAddr()
		if err != nil {
			s.stop(context.WithoutCancel(ctx))
			return nil, err
		}
		s.workerAddrs = append(s.workerAddrs, addr)
	}
	if err := s.startWorkers(ctx); err != nil {
		s.stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// createQueues runs `fairq queues create`.
func (s *system) createQueues(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, s.bin, "queues", "create", "--config", s.configPath)
	cmd.Env = append(os.Environ(), s.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("fairq queues create: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// env is the environment of every fairq process: static credentials for
// the emulator (the SDK wants some).
func (s *system) env() []string {
	if s.cfg.backend != backendSQS || os.Getenv("AWS_ACCESS_KEY_ID") != "" {
		return nil
	}
	return []string{"AWS_ACCESS_KEY_ID=loadtest", "AWS_SECRET_ACCESS_KEY=loadtest"}
}

// start starts one fairq process listening on addr and waits until GET
// probe answers 200 there.
func (s *system) start(ctx context.Context, name, log, addr, probe string, args ...string) (*process, error) {
	env := append(s.env(), "FAIRQ_LISTEN="+addr)
	p, err := startProcess(name, s.dir, filepath.Join(s.dir, log), env, false, nil, s.bin, args...)
	if err != nil {
		return nil, err
	}
	s.started = append(s.started, cpuSource{role: cpuRole(args[0]), p: p})
	err = waitFor(ctx, p, startTimeout, func(ctx context.Context) error { return getOK(ctx, s.client, "http://"+addr+probe) })
	if err != nil {
		p.stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return p, nil
}

// cpuRole is the role (CPUUse) of a process started as `fairq cmd`.
func cpuRole(cmd string) string {
	switch cmd {
	case "gateway":
		return roleGateways
	case "worker":
		return roleWorkers
	}
	return roleDev
}

// cpuSources are the processes of the system and its services, and the
// application's when it has one.
func (s *system) cpuSources(snk application) []cpuSource {
	out := append(slices.Clip(s.started), serviceSources(s.cfg.services)...)
	if a, ok := snk.(*appProcess); ok {
		out = append(out, cpuSource{role: roleApp, p: a.proc})
	}
	return append(out, cpuSource{role: roleHarness, pid: os.Getpid()})
}

// separateWorkers reports whether the workers run in processes of their
// own, which an outage can stop.
func (s *system) separateWorkers() bool { return s.cfg.backend == backendSQS }

// startWorkers starts the worker processes.
func (s *system) startWorkers(ctx context.Context) error {
	if !s.separateWorkers() || s.workers != nil {
		return nil
	}
	s.workers = make([]*process, len(s.workerAddrs))
	for i := range s.workerAddrs {
		if err := s.startWorker(ctx, i); err != nil {
			return errors.Join(err, s.stopWorkers(context.WithoutCancel(ctx)))
		}
	}
	return nil
}

// startWorker starts worker i (from 0) on its address, its output
// appended to its log, and waits until it is healthy.
func (s *system) startWorker(ctx context.Context, i int) error {
	p, err := s.start(ctx, fmt.Sprintf("fairq worker %d", i+1), fmt.Sprintf("worker-%d.log", i+1), s.workerAddrs[i], "/healthz", "worker", "--config", s.configPath)
	if err != nil {
		return err
	}
	s.workers[i] = p
	return nil
}

// stopWorker stops worker i as an operator would (SIGTERM) and waits for
// it; killWorker kills it (SIGKILL), as a crash would.
func (s *system) stopWorker(ctx context.Context, i int) error {
	p := s.workers[i]
	s.workers[i] = nil
	if p == nil {
		return nil
	}
	return p.stop(ctx)
}

func (s *system) killWorker(i int) {
	if p := s.workers[i]; p != nil {
		p.kill()
		s.workers[i] = nil
	}
}

// killGateway kills the gateway (SIGKILL); startGateway starts it again on
// its address and waits until it is ready.
func (s *system) killGateway() {
	if s.gateway != nil {
		s.gateway.kill()
		s.gateway = nil
	}
}

func (s *system) startGateway(ctx context.Context) error {
	p, err := s.start(ctx, "fairq gateway", "gateway.log", s.gatewayAddr, "/readyz", "gateway", "--config", s.configPath)
	if err != nil {
		return err
	}
	s.gateway = p
	return nil
}

// stopWorkers stops the worker processes as an operator would (SIGTERM:
// they finish or give back what they hold), all at once, and waits for
// them. One by one, a fleet's outage would begin with the first worker and
// end with the last: each lets its receives under way finish, up to a long
// poll's 20 s.
func (s *system) stopWorkers(ctx context.Context) error {
	errs := make([]error, len(s.workers))
	var wg sync.WaitGroup
	for i, p := range s.workers {
		if p != nil {
			wg.Go(func() { errs[i] = p.stop(ctx) })
		}
	}
	wg.Wait()
	s.workers = nil
	return errors.Join(errs...)
}

// stop stops the workers, then the gateways.
func (s *system) stop(ctx context.Context) error {
	err := s.stopWorkers(ctx)
	for _, p := range s.peers {
		err = errors.Join(err, p.stop(ctx))
	}
	s.peers = nil
	if s.gateway != nil {
		err = errors.Join(err, s.gateway.stop(ctx))
		s.gateway = nil
	}
	return err
}

// check returns an error if a process that should be running has exited.
func (s *system) check() error {
	for _, p := range append(append([]*process{s.gateway}, s.peers...), s.workers...) {
		if p != nil && !p.running() {
			return p.exitError()
		}
	}
	return nil
}

// saveMetrics writes each process's /metrics into the run's directory
// (metrics-gateway.txt, metrics-worker-N.txt), for looking into a run.
func (s *system) saveMetrics(ctx context.Context) error {
	targets := map[string]string{"metrics-gateway.txt": s.gatewayAddr}
	if s.peers != nil {
		for i, addr := range s.peerAddrs {
			targets[fmt.Sprintf("metrics-gateway-%d.txt", i+2)] = addr
		}
	}
	if s.workers != nil {
		for i, addr := range s.workerAddrs {
			targets[fmt.Sprintf("metrics-worker-%d.txt", i+1)] = addr
		}
	}
	var errs []error
	for name, addr := range targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(s.dir, name), data, 0o644)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// baseURL is the gateway's (a fleet's first gateway's).
func (s *system) baseURL() string { return "http://" + s.gatewayAddr }

// gatewayURLs are the base URLs of every gateway, the first first.
func (s *system) gatewayURLs() []string {
	urls := []string{s.baseURL()}
	for _, a := range s.peerAddrs {
		urls = append(urls, "http://"+a)
	}
	return urls
}

// queueDepth is one row of GET /admin/v1/queues.
type queueDepth struct {
	Name       string `json:"name"`
	Role       string `json:"role"`
	Visible    int    `json:"visible"`
	NotVisible int    `json:"not_visible"`
	Delayed    int    `json:"delayed"`
}

func (q queueDepth) total() int { return q.Visible + q.NotVisible + q.Delayed }

// queues reads the depth of every queue through the admin API.
func (s *system) queues(ctx context.Context) ([]queueDepth, error) {
	var out struct {
		Queues []queueDepth `json:"queues"`
	}
	if err := s.admin(ctx, http.MethodGet, "/admin/v1/queues", nil, &out); err != nil {
		return nil, err
	}
	return out.Queues, nil
}

// redrive moves every dead letter back to its tenant's shard through the
// admin API and returns how many moved.
func (s *system) redrive(ctx context.Context) (int, error) {
	var out struct {
		Moved int `json:"moved"`
	}
	err := s.admin(ctx, http.MethodPost, "/admin/v1/dlq/redrive", []byte(`{}`), &out)
	return out.Moved, err
}

// admin calls the admin API with the run's token.
func (s *system) admin(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, s.baseURL()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.creds.admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// newProbeClient returns the client of the harness's own calls to fairq:
// readiness probes, the admin API, /metrics.
func newProbeClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
