package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a child process may take to become ready.
const startTimeout = 30 * time.Second

// Services are the outside services a system on the sqs backend needs: the
// SQS endpoint (the fauxqs emulator, or empty for AWS itself) and Redis,
// the shared state of gateways and workers in separate processes.
type Services struct {
	// SQSEndpoint is the base URL of the SQS API, e.g. the emulator's
	// http://127.0.0.1:PORT.
	SQSEndpoint string
	// RedisAddr is the host:port of Redis.
	RedisAddr string
	// RedisCluster, when not empty, are the masters of a Redis Cluster
	// (host:port each), used instead of RedisAddr (redis.mode cluster).
	RedisCluster []string
	// PIDs are the services' processes by role ("sqs", "redis"), whose
	// CPU time a run accounts (Result.CPUUse); nil for services the harness
	// did not start.
	PIDs map[string][]int
}

// redis reports whether the services include a Redis.
func (s Services) redis() bool { return s.RedisAddr != "" || len(s.RedisCluster) > 0 }

// topology is redis.mode of the services' Redis: single or cluster.
func (s Services) topology() string {
	if len(s.RedisCluster) > 0 {
		return RedisCluster
	}
	return RedisSingle
}

// LocalServices are a redis-server and a fauxqs emulator started by the
// harness on free loopback ports, for the command line (tests get theirs
// from internal/testenv).
type LocalServices struct {
	Services
	procs  []*process
	fauxqs *process       // the emulator, among procs
	wg     sync.WaitGroup // the readers of the emulator's output
}

// StartLocalServices starts redis-server and the fauxqs emulator (Node.js,
// installed by `npm ci` in the module root), their output logged under dir.
// Stop them with Stop.
func StartLocalServices(ctx context.Context, root, dir string) (*LocalServices, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &LocalServices{}
	if err := s.startRedis(ctx, dir); err != nil {
		return nil, err
	}
	if err := s.startFauxqs(ctx, root, dir); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// StartEmulator starts the fauxqs emulator alone, for runs without Redis
// (Services.RedisAddr stays empty). Stop it with Stop.
func StartEmulator(ctx context.Context, root, dir string) (*LocalServices, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &LocalServices{}
	if err := s.startFauxqs(ctx, root, dir); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// Stop stops the services, the emulator first.
func (s *LocalServices) Stop(ctx context.Context) error {
	var first error
	for i := len(s.procs) - 1; i >= 0; i-- {
		if err := s.procs[i].stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	s.procs = nil
	s.wg.Wait()
	return first
}

// addPID records p as a process of role (Services.PIDs).
func (s *LocalServices) addPID(role string, p *process) {
	if s.PIDs == nil {
		s.PIDs = make(map[string][]int)
	}
	s.PIDs[role] = append(s.PIDs[role], p.cmd.Process.Pid)
}

func (s *LocalServices) startRedis(ctx context.Context, dir string) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not on PATH (Debian: apt-get install redis-server): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProcess("redis-server", dir, filepath.Join(dir, "redis.log"), nil, false, nil, bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	s.addPID(roleRedis, p)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	err = waitFor(ctx, p, startTimeout, func(ctx context.Context) error { return client.Ping(ctx).Err() })
	if err != nil {
		return fmt.Errorf("redis-server on %s: %w", addr, err)
	}
	s.RedisAddr = addr
	return nil
}

func (s *LocalServices) startFauxqs(ctx context.Context, root, dir string) error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node is not on PATH (the SQS emulator fauxqs runs on Node.js 20+): %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "fauxqs", "package.json")); err != nil {
		return fmt.Errorf("fauxqs is not installed: run `npm ci` in %s (make loadtest-deps does): %w", root, err)
	}
	pr, pw := io.Pipe()
	p, err := startProcess("fauxqs", root, filepath.Join(dir, "fauxqs.log"), nil, true, pw,
		node, filepath.Join(root, "internal", "testenv", "fauxqs.mjs"))
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	s.fauxqs = p
	s.addPID(roleSQS, p)
	// The launcher prints its address as its first line; the rest of its
	// output is drained so that it never blocks on the pipe.
	lines := make(chan string, 1)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		defer s.wg.Done()
		<-p.done
		pw.Close()
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case endpoint := <-lines:
		s.SQSEndpoint = endpoint
	case <-p.done:
		return p.exitError()
	case <-t.C:
		return fmt.Errorf("fauxqs: %w: printed no address within %v", ErrNotReady, startTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	client := &http.Client{Timeout: time.Second}
	return waitFor(ctx, p, startTimeout, func(ctx context.Context) error { return getOK(ctx, client, s.SQSEndpoint+"/health") })
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls check every 20 ms until it succeeds, the process exits,
// timeout passes or ctx ends.
func waitFor(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last check: %v)", p.name, ErrNotReady, err)
		case <-tick.C:
		}
	}
}

// getOK sends GET url and expects 200.
func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
