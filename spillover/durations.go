package spillover

import (
	"sync"
	"time"
)

// durationsAlpha is the weight of the latest job in a tenant's mean job
// time: about the last ten jobs count.
const durationsAlpha = 0.2

// durationsForget is how long a tenant's mean is kept after its last job.
const durationsForget = 10 * time.Minute

// durations keeps each tenant's mean job time, a moving average of the
// jobs this worker ran, to estimate how fast its concurrency slots free
// up.
type durations struct {
	mu        sync.Mutex
	mean      map[string]tenantMean
	lastSweep time.Time
}

type tenantMean struct {
	mean time.Duration
	at   time.Time
}

func newDurations(now time.Time) *durations {
	return &durations{mean: make(map[string]tenantMean), lastSweep: now}
}

// observe records that a job of tenant took d.
func (ds *durations) observe(tenant string, d time.Duration, now time.Time) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if now.Sub(ds.lastSweep) >= time.Minute {
		ds.lastSweep = now
		for k, m := range ds.mean {
			if now.Sub(m.at) > durationsForget {
				delete(ds.mean, k)
			}
		}
	}
	m, ok := ds.mean[tenant]
	if !ok {
		m.mean = d
	} else {
		m.mean += time.Duration(durationsAlpha * float64(d-m.mean))
	}
	m.at = now
	ds.mean[tenant] = m
}

// of returns the mean job time of tenant, and false if none is known.
func (ds *durations) of(tenant string) (time.Duration, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	m, ok := ds.mean[tenant]
	return m.mean, ok && m.mean > 0
}
