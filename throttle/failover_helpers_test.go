package throttle_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/internal/degrade"
)

// redisMetrics registers, once, the metrics of the failover components
// on reg, as a process does.
func redisMetrics(t *testing.T, reg *prometheus.Registry) *degrade.Metrics {
	t.Helper()
	m, err := degrade.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRecovered checks what a failover component says after an outage
// and the primary's return: degraded back to 0, the answers given without
// the primary counted (none when failing closed), and one log line each
// for the failure and the recovery.
func checkRecovered(t *testing.T, reg *prometheus.Registry, logs string, closed bool, fallbacks float64) {
	t.Helper()
	if got := gauge(t, reg, "fairq_redis_degraded"); got != 0 {
		t.Errorf("fairq_redis_degraded = %v once back, want 0", got)
	}
	if closed {
		fallbacks = 0
	}
	if got := gauge(t, reg, "fairq_redis_fallback_total"); got != fallbacks {
		t.Errorf("fairq_redis_fallback_total = %v, want %v", got, fallbacks)
	}
	if n := strings.Count(logs, "redis unreachable"); n != 1 {
		t.Errorf("%d log lines about the failure, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, "redis is back"); n != 1 {
		t.Errorf("%d log lines about the recovery, want 1:\n%s", n, logs)
	}
}

// failModes runs test as two parallel subtests, failing open and failing
// closed.
func failModes(t *testing.T, test func(t *testing.T, closed bool)) {
	t.Helper()
	for _, closed := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail open", true: "fail closed"}[closed], func(t *testing.T) {
			t.Parallel()
			test(t, closed)
		})
	}
}

// outage is a primary's switch: while down, its calls fail as calls to
// an unreachable Redis do. It counts the calls.
type outage struct {
	mu    sync.Mutex
	down  bool
	calls int
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

// call counts a call and returns the error it fails with, nil while up.
func (o *outage) call() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if o.down {
		return errors.New("dial tcp: connection refused")
	}
	return nil
}
