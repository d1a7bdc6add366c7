package overview

import "time"

// Report is what one process saw over the last Window, as it publishes it
// for the overview of the fleet.
type Report struct {
	Instance string    `json:"instance"`
	Role     string    `json:"role"` // gateway, worker or dev
	At       time.Time `json:"at"`
	// Window is the seconds the counts cover: Window, or less in a
	// process's first minute.
	Window float64 `json:"window_seconds"`
	// Slots is the jobs the process runs at once (a worker's
	// worker.connections); SlotsInUse those running now.
	Slots      int `json:"slots,omitempty"`
	SlotsInUse int `json:"slots_in_use,omitempty"`
	// Tenants holds the tenants with an event in the window or a message
	// in flight.
	Tenants map[string]TenantReport `json:"tenants"`
}

// TenantReport is one tenant in a Report: counts over the report's window,
// and the messages in flight at its end.
type TenantReport struct {
	Accepted    int64            `json:"accepted,omitempty"`
	Refused     map[string]int64 `json:"refused,omitempty"`
	Spilled     map[string]int64 `json:"spilled,omitempty"`
	Processed   int64            `json:"processed,omitempty"`
	BusySeconds float64          `json:"busy_seconds,omitempty"`
	InFlight    int64            `json:"in_flight,omitempty"`
	// Age counts the first attempts by age, in the buckets of AgeBounds.
	Age []int64 `json:"age,omitempty"`
}

func (t TenantReport) active() bool {
	return t.Accepted != 0 || t.Processed != 0 || t.InFlight != 0 || len(t.Refused) != 0 || len(t.Spilled) != 0 || len(t.Age) != 0
}

// rates is a tenant's activity summed over the fleet's reports: counts
// per second, each report's over its own window.
type rates struct {
	accepted, processed, busy float64 // per second; busy in seconds per second
	refused, spilled          map[string]float64
	inFlight                  int64
	age                       [ageBuckets]int64
}

// add adds one report's tenant, over the report's window.
func (r *rates) add(t TenantReport, window float64) {
	r.accepted += float64(t.Accepted) / window
	r.processed += float64(t.Processed) / window
	r.busy += t.BusySeconds / window
	r.inFlight += t.InFlight
	r.refused = addPerSecond(r.refused, t.Refused, window)
	r.spilled = addPerSecond(r.spilled, t.Spilled, window)
	for i := 0; i < len(t.Age) && i < ageBuckets; i++ {
		r.age[i] += t.Age[i]
	}
}

func addPerSecond(sum map[string]float64, n map[string]int64, window float64) map[string]float64 {
	if len(n) == 0 {
		return sum
	}
	if sum == nil {
		sum = make(map[string]float64, len(n))
	}
	for k, v := range n {
		sum[k] += float64(v) / window
	}
	return sum
}

// p95 returns the 95th percentile of the ages counted, in seconds,
// interpolated within its bucket; ok is false without any. Past the last
// bound it answers the last bound: the age is at least that.
func (r *rates) p95() (seconds float64, ok bool) {
	var total int64
	for _, n := range r.age {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := 0.95 * float64(total)
	var below int64
	for i, n := range r.age {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		if i == len(AgeBounds) {
			return AgeBounds[len(AgeBounds)-1], true
		}
		lo := 0.0
		if i > 0 {
			lo = AgeBounds[i-1]
		}
		return lo + (AgeBounds[i]-lo)*(rank-float64(below))/float64(n), true
	}
	return AgeBounds[len(AgeBounds)-1], true
}

// totals is the reports of the fleet summed by tenant.
type totals struct {
	tenants  map[string]*rates
	inFlight int64   // all tenants'
	busy     float64 // all tenants', seconds per second
}

func sum(reports []Report) totals {
	f := totals{tenants: map[string]*rates{}}
	for _, rep := range reports {
		w := max(rep.Window, 0.001)
		for id, t := range rep.Tenants {
			r := f.tenants[id]
			if r == nil {
				r = &rates{}
				f.tenants[id] = r
			}
			r.add(t, w)
			f.inFlight += t.InFlight
			f.busy += t.BusySeconds / w
		}
	}
	return f
}
