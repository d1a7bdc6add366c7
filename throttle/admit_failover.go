package throttle

import (
	"context"
	"errors"
)

// FailoverAdmitterConfig configures a FailoverAdmitter.
type FailoverAdmitterConfig struct {
	// Primary takes the slots and tokens together: a RedisAdmitter over
	// the RedisSemaphore and the buckets of Semaphore's and Rate's
	// primaries. Required.
	Primary Admitter
	// Semaphore and Rate answer one by one, each failing over as it does,
	// while Primary fails; required.
	Semaphore *FailoverSemaphore
	Rate      *FailoverLimiter
}

// FailoverAdmitter asks Primary while Redis answers, and otherwise
// Semaphore and Rate one by one (Separately), which then answer from
// this process (fail open) or refuse (fail closed) until Redis is back.
// A failure of Primary counts as a failure of both, in their logs and
// metrics, and an answer as their recovery; the slots Primary gives are
// counted by Semaphore as its own, so that the share it allows itself
// while Redis is down counts them.
type FailoverAdmitter struct {
	cfg FailoverAdmitterConfig
}

// NewFailoverAdmitter returns a FailoverAdmitter.
func NewFailoverAdmitter(cfg FailoverAdmitterConfig) (*FailoverAdmitter, error) {
	if cfg.Primary == nil || cfg.Semaphore == nil || cfg.Rate == nil {
		return nil, errors.New("throttle: FailoverAdmitterConfig: Primary, Semaphore and Rate are required")
	}
	return &FailoverAdmitter{cfg: cfg}, nil
}

// TryAdmit implements Admitter.
func (f *FailoverAdmitter) TryAdmit(ctx context.Context, n Need) (Admission, error) {
	sem, rate := f.cfg.Semaphore, f.cfg.Rate
	if !sem.dep.Resting() && !rate.dep.Resting() {
		a, err := f.cfg.Primary.TryAdmit(ctx, n)
		if err == nil {
			sem.dep.OK(ctx)
			rate.dep.OK(ctx)
			for i, p := range a.Permits {
				a.Permits[i] = sem.adopt(n.Slots[i].Key, p)
			}
			return a, nil
		}
		if ctx.Err() != nil {
			return Admission{Slot: -1, Token: -1}, ctx.Err() // the caller gave up; Redis is not to blame
		}
		sem.failed(ctx, err)
		rate.failed(ctx, err)
	}
	return Separately{Semaphore: sem, Rate: rate}.TryAdmit(ctx, n)
}
