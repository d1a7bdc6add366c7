package spillover

import "time"

// emptyForget is how long a bucket's last refusal is kept: far longer than
// any wait it can say (a token at the lowest rate a tenant is likely to
// have), so that the sweep only drops buckets gone quiet.
const emptyForget = time.Minute

// empty remembers, per rate bucket, until when its last refusal said it
// has no token (the limiter's RetryAfter). No token comes sooner, whatever
// the other workers do: they only take tokens. A message that comes
// meanwhile is refused without asking and before it takes a concurrency
// slot; asked, it took a slot, was refused its token and gave the slot
// back, telling every worker, which for a tenant held at its rate was
// most of its asks. Raising a tenant's rate meanwhile is seen at most one
// such wait late.
type empty struct{ until *perTenant[time.Time] }

func newEmpty(now time.Time) empty {
	return empty{newPerTenant[time.Time](emptyForget, now)}
}

// refused records that key's bucket refused a token at now, the next one
// due after retryAfter.
func (e empty) refused(key string, now time.Time, retryAfter time.Duration) {
	if retryAfter <= 0 {
		return
	}
	e.until.update(key, now, func(time.Time, bool) time.Time { return now.Add(retryAfter) })
}

// wait returns how long key's bucket has no token from now, and false
// when it may have one.
func (e empty) wait(key string, now time.Time) (time.Duration, bool) {
	until, _, ok := e.until.get(key)
	if !ok || !until.After(now) {
		return 0, false
	}
	return until.Sub(now), true
}
