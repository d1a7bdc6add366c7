package spillover

import (
	"math"
	"time"
)

// FreshWindow is how long after a tenant's last fresh message (one not
// from the backlog queue) its backlog messages still yield to fresh ones,
// and the time constant of its fresh arrival rate: the Window of a
// Config.Meter.
const FreshWindow = 5 * time.Second

// fresh keeps, per tenant, when its latest fresh message came to this
// worker and how fast they come (a moving average over about FreshWindow),
// so that old work leaves fresh work the share of the limits it uses, and
// a tenant with nothing but old work left has its whole limits for it.
type fresh struct{ rate *perTenant[arrivals] }

// arrivals is a moving average of a rate, per second, as of at.
type arrivals struct {
	perSecond float64
	at        time.Time
}

func newFresh(now time.Time) fresh {
	return fresh{newPerTenant[arrivals](FreshWindow, now)}
}

// decay is the weight left to an average FreshWindow-long after d.
func decay(d time.Duration) float64 {
	return math.Exp(-d.Seconds() / FreshWindow.Seconds())
}

// mark records a fresh message of tenant, seen at now and enqueued at
// enqueued: it counts as much as the average leaves of a message that
// came then, so that a burst of messages that waited on a queue counts at
// the rate they were sent. A message without an enqueue time counts whole.
func (f fresh) mark(tenant string, now, enqueued time.Time) {
	w := 1.0
	if ago := now.Sub(enqueued); ago > 0 && !enqueued.IsZero() {
		w = decay(ago)
	}
	f.rate.update(tenant, now, func(a arrivals, ok bool) arrivals {
		r := 0.0
		if ok {
			r = a.perSecond * decay(now.Sub(a.at))
		}
		return arrivals{r + w/FreshWindow.Seconds(), now}
	})
}

// recent reports whether a fresh message of tenant came within
// FreshWindow of now, and the rate at which they have been coming to this
// worker, a second.
func (f fresh) recent(tenant string, now time.Time) (perSecond float64, ok bool) {
	a, _, ok := f.rate.get(tenant)
	if !ok || now.Sub(a.at) > FreshWindow {
		return 0, false
	}
	return a.perSecond * decay(now.Sub(a.at)), true
}
