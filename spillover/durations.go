package spillover

import "time"

// durationsAlpha is the weight of the latest job in a tenant's mean job
// time: about the last ten jobs count.
const durationsAlpha = 0.2

// durationsForget is how long a tenant's mean is kept after its last job.
const durationsForget = 10 * time.Minute

// durations keeps each tenant's mean job time, a moving average of the
// jobs this worker ran, to estimate how fast its concurrency slots free
// up.
type durations struct{ mean *perTenant[time.Duration] }

func newDurations(now time.Time) durations {
	return durations{newPerTenant[time.Duration](durationsForget, now)}
}

// observe records that a job of tenant took d.
func (ds durations) observe(tenant string, d time.Duration, now time.Time) {
	ds.mean.update(tenant, now, func(mean time.Duration, ok bool) time.Duration {
		if !ok {
			return d
		}
		return mean + time.Duration(durationsAlpha*float64(d-mean))
	})
}

// of returns the mean job time of tenant, and false if none is known.
func (ds durations) of(tenant string) (time.Duration, bool) {
	mean, _, ok := ds.mean.get(tenant)
	return mean, ok && mean > 0
}
