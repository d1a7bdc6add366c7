package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RequireEnv is the environment variable that turns a missing service from
// a skip into a failure when set to "1".
const RequireEnv = "FAIRQ_REQUIRE_SERVICES"

// startTimeout bounds how long a service may take to become ready.
const startTimeout = 20 * time.Second

// Option changes what Main does.
type Option func(*mainOptions)

type mainOptions struct {
	leaks    bool
	leakOpts []goleak.Option
}

// VerifyNoLeaks makes Main fail the test binary when goroutines are left
// running after the tests passed and the services were stopped, like
// goleak.VerifyTestMain.
func VerifyNoLeaks(opts ...goleak.Option) Option {
	return func(o *mainOptions) {
		o.leaks = true
		o.leakOpts = append(o.leakOpts, opts...)
	}
}

// Main runs the tests, stops the services they started, and exits with the
// tests' status. Call it from TestMain.
func Main(m *testing.M, opts ...Option) {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	code := m.Run()
	stopAll()
	if code == 0 && o.leaks {
		if err := goleak.Find(o.leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Prefix returns a fresh prefix, "t" and 8 hex digits, for the queue names
// and Redis keys of one test, so that tests sharing a service do not meet.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: prefix: %v", err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// missingError says that a service cannot run because something is not
// installed, and how to install it.
type missingError struct {
	what, how string
}

func (e *missingError) Error() string { return e.what + "; " + e.how }

// service is a process (or a group of them) started on first use and
// shared by the test binary; a failed start is remembered and reported to
// every later caller.
type service struct {
	name  string
	start func() (addr string, p stopper, err error)

	mu      sync.Mutex
	started bool
	stopped bool
	addr    string
	proc    stopper
	err     error
}

// stopper is what a service runs: a process, or a cluster of them.
type stopper interface{ stop() }

var (
	redisService = &service{name: "redis-server", start: func() (string, stopper, error) { return asStopper(startRedis()) }}
	sqsService   = &service{name: "fauxqs", start: func() (string, stopper, error) { return asStopper(startFauxqs()) }}
)

// asStopper passes a process on as a stopper, nil (not a typed nil) when
// none was started.
func asStopper(addr string, p *process, err error) (string, stopper, error) {
	if p == nil {
		return addr, nil, err
	}
	return addr, p, err
}

// get returns the service's address, starting it if need be; it skips or
// fails t when the service cannot be had.
func (s *service) get(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		t.Fatalf("testenv: %s asked for after Main stopped the services", s.name)
	}
	if !s.started {
		s.started = true
		s.addr, s.proc, s.err = s.start()
	}
	if s.err != nil {
		skipOrFail(t, s.name, s.err)
	}
	return s.addr
}

// skipOrFail ends t on the error of a service's start: a skip when
// something is missing (a failure with RequireEnv=1), a failure otherwise.
func skipOrFail(t testing.TB, name string, err error) {
	t.Helper()
	var missing *missingError
	if errors.As(err, &missing) {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("testenv: %v (%s=1, so this fails instead of skipping)", err, RequireEnv)
		}
		t.Skipf("testenv: skipped: %v", err)
	}
	t.Fatalf("testenv: %s: %v", name, err)
}

// stop stops the service's process, if it was started.
func (s *service) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
}

// stopAll stops every service, concurrently.
func stopAll() {
	var wg sync.WaitGroup
	for _, s := range []*service{redisService, sqsService, clusterService} {
		wg.Go(s.stop)
	}
	wg.Wait()
}

// moduleRoot returns the directory of the nearest go.mod at or above the
// working directory (go test runs tests in their package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}
