package spillover_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/throttle"
)

// series returns every series of reg as name{labels} → value, counters and
// gauges alike.
func series(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			slices.Sort(ls)
			name := mf.GetName()
			if len(ls) > 0 {
				name += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// admitter returns the Admitter a worker of a fleet has (as cmd/fairq
// builds it): a message's slots and tokens in one round trip to Redis,
// one by one through sem and rate while Redis fails.
func admitter(t testing.TB, redisSem *throttle.RedisSemaphore, prefix string, sem *throttle.FailoverSemaphore, rate *throttle.FailoverLimiter) throttle.Admitter {
	t.Helper()
	both, err := throttle.NewRedisAdmitter(throttle.RedisAdmitterConfig{Semaphore: redisSem, RatePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	a, err := throttle.NewFailoverAdmitter(throttle.FailoverAdmitterConfig{Primary: both, Semaphore: sem, Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
