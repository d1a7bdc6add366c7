package overview

import (
	"sync"
	"sync/atomic"
	"time"
)

// Window is the span the rates of a Report cover: the last minute.
const Window = time.Minute

// markEvery is how often a Recorder keeps a mark of its counters, from
// which the rates over the window are computed: the window's start is
// known to within this.
const markEvery = 10 * time.Second

// minWindow is the shortest window a Report divides by: in a process's
// first second, counts over a few milliseconds would read as huge rates.
const minWindow = time.Second

// idleFor is how long a tenant with nothing in flight and no event is
// kept before its counters are dropped.
const idleFor = 5 * time.Minute

// AgeBounds are the upper bounds, in seconds, of the buckets of the age
// at first attempt a Recorder counts; one more bucket takes the rest.
// A p95 read from them is exact to within its bucket.
var AgeBounds = [...]float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// ageBuckets is the number of buckets: one per bound and one above them.
const ageBuckets = len(AgeBounds) + 1

// Recorder counts what one process sees of each tenant: at the front door
// the messages accepted and refused, in the worker those spilled, started
// and ended. Its methods are safe for concurrent use and cheap (an atomic
// add once the tenant is known); a nil *Recorder records nothing.
type Recorder struct {
	now     func() time.Time
	slots   int
	tenants sync.Map // tenant id → *activity

	mu    sync.Mutex
	marks []mark // oldest first; the first is at or before the window's start
}

// mark is the counters of every tenant at one instant.
type mark struct {
	at     time.Time
	counts map[string]counts
}

// activity is one tenant's counters, cumulative since the process began
// (or since the tenant was last dropped as idle).
type activity struct {
	accepted  atomic.Int64
	processed atomic.Int64
	busy      atomic.Int64 // nanoseconds of processing, of the ended jobs
	inFlight  atomic.Int64
	age       [ageBuckets]atomic.Int64
	last      atomic.Int64 // unix nanoseconds of the latest event

	mu      sync.Mutex // guards the maps' keys; values are atomic
	refused map[string]*atomic.Int64
	spilled map[string]*atomic.Int64
}

// counts is a copy of an activity's cumulative counters.
type counts struct {
	accepted, processed, busy int64
	age                       [ageBuckets]int64
	refused, spilled          map[string]int64
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Slots is the number of jobs this process runs at once
	// (worker.connections); 0 for a gateway.
	Slots int
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// NewRecorder returns a Recorder.
func NewRecorder(cfg RecorderConfig) *Recorder {
	r := &Recorder{now: cfg.Now, slots: cfg.Slots}
	if r.now == nil {
		r.now = time.Now
	}
	r.marks = []mark{{at: r.now(), counts: map[string]counts{}}}
	return r
}

// of returns the tenant's activity, creating it.
func (r *Recorder) of(tenant string) *activity {
	if a, ok := r.tenants.Load(tenant); ok {
		return a.(*activity)
	}
	a, _ := r.tenants.LoadOrStore(tenant, &activity{refused: map[string]*atomic.Int64{}, spilled: map[string]*atomic.Int64{}})
	return a.(*activity)
}

func (r *Recorder) touch(a *activity) { a.last.Store(r.now().UnixNano()) }

// Accepted counts n messages of tenant accepted at the front door.
func (r *Recorder) Accepted(tenant string, n int) {
	if r == nil || n <= 0 {
		return
	}
	a := r.of(tenant)
	a.accepted.Add(int64(n))
	r.touch(a)
}

// Refused counts n messages of tenant refused at the front door, by
// reason (the problem's code).
func (r *Recorder) Refused(tenant, reason string, n int) {
	if r == nil || n <= 0 {
		return
	}
	a := r.of(tenant)
	reasonCounter(&a.mu, a.refused, reason).Add(int64(n))
	r.touch(a)
}

// Spilled counts a message of tenant put off by the worker's limits, by
// reason (rate, concurrency, unavailable).
func (r *Recorder) Spilled(tenant, reason string) {
	if r == nil {
		return
	}
	a := r.of(tenant)
	reasonCounter(&a.mu, a.spilled, reason).Add(1)
	r.touch(a)
}

// Started counts a message of tenant handed to the application; age is
// its age at this attempt, counted when first is set (its first attempt).
// The returned func ends it: call it once, when the job is over.
func (r *Recorder) Started(tenant string, age time.Duration, first bool) (ended func()) {
	if r == nil {
		return func() {}
	}
	a := r.of(tenant)
	a.inFlight.Add(1)
	if first {
		a.age[ageBucket(age)].Add(1)
	}
	start := r.now()
	a.last.Store(start.UnixNano())
	var once sync.Once
	return func() {
		once.Do(func() {
			end := r.now()
			a.busy.Add(int64(end.Sub(start)))
			a.processed.Add(1)
			a.inFlight.Add(-1)
			a.last.Store(end.UnixNano())
		})
	}
}

func reasonCounter(mu *sync.Mutex, m map[string]*atomic.Int64, reason string) *atomic.Int64 {
	mu.Lock()
	defer mu.Unlock()
	c, ok := m[reason]
	if !ok {
		c = new(atomic.Int64)
		m[reason] = c
	}
	return c
}

func ageBucket(age time.Duration) int {
	s := age.Seconds()
	for i, b := range AgeBounds {
		if s <= b {
			return i
		}
	}
	return len(AgeBounds)
}

func (a *activity) counts() counts {
	c := counts{accepted: a.accepted.Load(), processed: a.processed.Load(), busy: a.busy.Load()}
	for i := range a.age {
		c.age[i] = a.age[i].Load()
	}
	a.mu.Lock()
	c.refused = loadAll(a.refused)
	c.spilled = loadAll(a.spilled)
	a.mu.Unlock()
	return c
}

func loadAll(m map[string]*atomic.Int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Load()
	}
	return out
}

// Report returns what this process saw over the last Window: for each
// tenant with an event in it or a message in flight, the counts since the
// window's start and the messages in flight now.
func (r *Recorder) Report(instance, role string) Report {
	now := r.now()
	cur := map[string]counts{}
	var inFlight = map[string]int64{}
	r.tenants.Range(func(k, v any) bool {
		a := v.(*activity)
		cur[k.(string)] = a.counts()
		if n := a.inFlight.Load(); n != 0 {
			inFlight[k.(string)] = n
		}
		return true
	})

	r.mu.Lock()
	base := r.marks[0]
	if now.Sub(r.marks[len(r.marks)-1].at) >= markEvery {
		r.marks = append(r.marks, mark{at: now, counts: cur})
	}
	// Keep one mark at or before the window's start, and those after it.
	for len(r.marks) > 1 && !r.marks[1].at.After(now.Add(-Window)) {
		r.marks = r.marks[1:]
	}
	r.mu.Unlock()

	rep := Report{
		Instance: instance,
		Role:     role,
		At:       now,
		Window:   max(now.Sub(base.at), minWindow).Seconds(),
		Slots:    r.slots,
		Tenants:  map[string]TenantReport{},
	}
	for id, c := range cur {
		d := c.since(base.counts[id])
		t := TenantReport{
			Accepted:    d.accepted,
			Processed:   d.processed,
			BusySeconds: time.Duration(d.busy).Seconds(),
			InFlight:    inFlight[id],
			Refused:     d.refused,
			Spilled:     d.spilled,
		}
		if d.age != ([ageBuckets]int64{}) {
			t.Age = d.age[:]
		}
		rep.SlotsInUse += int(t.InFlight)
		if t.active() {
			rep.Tenants[id] = t
		} else {
			r.dropIdle(id, now)
		}
	}
	return rep
}

// dropIdle forgets a tenant that has been quiet for idleFor, so that the
// map does not keep every tenant ever seen. An event racing the drop may
// be lost: the tenant had none for minutes.
func (r *Recorder) dropIdle(id string, now time.Time) {
	v, ok := r.tenants.Load(id)
	if !ok {
		return
	}
	a := v.(*activity)
	if a.inFlight.Load() == 0 && now.Sub(time.Unix(0, a.last.Load())) > idleFor {
		r.tenants.CompareAndDelete(id, a)
	}
}

// since returns c minus an earlier b. Counters that went backwards (the
// tenant was dropped as idle and seen again since) count from zero.
func (c counts) since(b counts) counts {
	if c.before(b) {
		b = counts{}
	}
	d := counts{accepted: c.accepted - b.accepted, processed: c.processed - b.processed, busy: c.busy - b.busy}
	for i := range c.age {
		d.age[i] = c.age[i] - b.age[i]
	}
	d.refused = minus(c.refused, b.refused)
	d.spilled = minus(c.spilled, b.spilled)
	return d
}

// before reports whether any counter of c is below b's: c was counted
// from zero after b.
func (c counts) before(b counts) bool {
	if c.accepted < b.accepted || c.processed < b.processed || c.busy < b.busy {
		return true
	}
	for i := range c.age {
		if c.age[i] < b.age[i] {
			return true
		}
	}
	for k, v := range b.refused {
		if c.refused[k] < v {
			return true
		}
	}
	for k, v := range b.spilled {
		if c.spilled[k] < v {
			return true
		}
	}
	return false
}

func minus(c, b map[string]int64) map[string]int64 {
	var out map[string]int64
	for k, v := range c {
		if n := v - b[k]; n > 0 {
			if out == nil {
				out = make(map[string]int64, len(c))
			}
			out[k] = n
		}
	}
	return out
}
