package harness

import (
	"slices"
	"time"
)

// A fleet run's processes: two gateways behind the generator, which takes
// them in turn as a load balancer would, and four workers, so that every
// per-tenant limit is shared by processes that only Redis connects.
const (
	FleetGateways = 2
	FleetWorkers  = 4
)

// Redis topologies of a fleet run (redis.mode).
const (
	RedisSingle  = "single"
	RedisCluster = "cluster"
)

// LimitsSeen is what the application (the sink) saw of the per-tenant
// worker limits of a run, whichever worker pushed.
type LimitsSeen struct {
	// MaxInFlight is, per tenant, the most of its pushes the sink was
	// answering at once.
	MaxInFlight map[string]int64 `json:"max_in_flight"`
	// Rates are the start rates of the tenants that were rate-bound for
	// at least one counted second (see RateBound).
	Rates []RateBound `json:"rates,omitempty"`
}

// RateBound is a tenant's rate of pushes to the application while its
// process_rate was what held it back.
//
// A second (of the run, from Result.Start) is rate-bound for a tenant when
// at its start at least process_rate of the tenant's accepted messages
// were waiting for their first push, and at its end at least one still
// was: the tenant had more work than its rate lets start, for the whole
// second. Seconds of the warmup and those in which the workers were down
// (an outage, up to WorkersReady) are not counted, nor is the first second
// of each run of rate-bound seconds: then the tenant may spend its
// process_burst on top of the rate, as the limit allows.
type RateBound struct {
	Tenant  string `json:"tenant"`
	Seconds int    `json:"seconds"`
	// Starts are the pushes of the tenant that began in those seconds,
	// every attempt counted, as each takes a token.
	Starts int     `json:"starts"`
	Rate   float64 `json:"rate"`
}

// limitsSeen measures the limits as the sink saw them; peaks are the
// sink's per-tenant maximum pushes in progress.
func (r *Result) limitsSeen(peaks map[string]int64) *LimitsSeen {
	ls := &LimitsSeen{MaxInFlight: peaks}
	for _, t := range r.Scenario.Tenants {
		if rb, ok := r.rateBound(t.ID, r.Scenario.Limits.ProcessRate); ok {
			ls.Rates = append(ls.Rates, rb)
		}
	}
	return ls
}

// rateBound returns tenant id's start rate over its rate-bound seconds
// (RateBound) under a process_rate of limit; false if it had none.
func (r *Result) rateBound(id string, limit float64) (RateBound, bool) {
	end := r.Scenario.Duration
	if !r.DrainedAt.IsZero() {
		end = max(end, r.since(r.DrainedAt))
	}
	// The whole seconds up to the end of the drain; events after it are
	// left out.
	n := int(end / time.Second)
	// Per second: messages accepted, first pushes begun, pushes begun.
	accepted, first, pushes := make([]int, n), make([]int, n), make([]int, n)
	count := func(per []int, d time.Duration) {
		if k := max(int(d/time.Second), 0); k < n {
			per[k]++
		}
	}
	for _, s := range r.Sends {
		if s.Tenant == id && s.Accepted() {
			count(accepted, r.since(s.At)+s.Took)
		}
	}
	firsts := map[int64]time.Time{}
	for _, d := range r.Deliveries {
		if d.Tenant != id || d.Redriven {
			continue
		}
		count(pushes, r.since(d.Start))
		if f, ok := firsts[d.Seq]; !ok || d.Start.Before(f) {
			firsts[d.Seq] = d.Start
		}
	}
	for _, t := range firsts {
		count(first, r.since(t))
	}
	down := func(k int) bool {
		if r.OutageStart.IsZero() {
			return false
		}
		from, to := r.since(r.OutageStart), r.since(r.WorkersReady)
		if r.WorkersReady.IsZero() {
			to = end
		}
		s := time.Duration(k) * time.Second
		return s+time.Second > from && s < to
	}
	waiting := 0 // at the start of second k
	bound := make([]bool, n)
	rb := RateBound{Tenant: id}
	for k := range n {
		atEnd := waiting + accepted[k] - first[k]
		bound[k] = float64(waiting) >= limit && atEnd >= 1 && !down(k)
		waiting = atEnd
		if bound[k] && k > 0 && bound[k-1] && time.Duration(k)*time.Second >= r.Scenario.Warmup {
			rb.Seconds++
			rb.Starts += pushes[k]
		}
	}
	if rb.Seconds == 0 {
		return RateBound{}, false
	}
	rb.Rate = float64(rb.Starts) / float64(rb.Seconds)
	return rb, true
}

// acceptedByGateway counts the accepted messages by the gateway that
// accepted them.
func (r *Result) acceptedByGateway() []int {
	out := make([]int, max(r.Gateways, 1))
	for _, s := range r.Sends {
		if s.Accepted() && s.Gateway < len(out) {
			out[s.Gateway]++
		}
	}
	return out
}

// RateTolerance is how far from process_rate a rate-bound tenant's start
// rate may be, as a fraction of it, either way; above it, the tenant's
// process_burst may come on top (withinRate).
const RateTolerance = 0.10

// withinRate reports whether a rate-bound tenant's starts are within
// RateTolerance of what its limits allow: a rate of at least 1 −
// RateTolerance times process_rate, and no more starts than 1 +
// RateTolerance times process_rate over its seconds plus one
// process_burst. A limit of rate r and burst b lets r·t + b messages start
// in t seconds, and the tenant spends the burst as fast as its
// concurrency lets it, not within the first second of the stretch, which
// is left out: over a stretch of 6 s, a tenant of 40/s, burst 40 and 10
// slots of 200 ms jobs (50/s) may start 46.7 a second and keep to its
// limits.
func withinRate(rb RateBound, lim Limits) bool {
	if rb.Rate < (1-RateTolerance)*lim.ProcessRate {
		return false
	}
	return float64(rb.Starts) <= (1+RateTolerance)*lim.ProcessRate*float64(rb.Seconds)+float64(lim.ProcessBurst)
}

// peakTenant returns the tenant with the most pushes at once, the first
// by id among equals, and that number.
func peakTenant(peaks map[string]int64) (string, int64) {
	ids := make([]string, 0, len(peaks))
	for id := range peaks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	best, most := "", int64(-1)
	for _, id := range ids {
		if peaks[id] > most {
			best, most = id, peaks[id]
		}
	}
	return best, most
}
