package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Role is the part a tenant plays in a scenario.
type Role string

const (
	// RoleQuiet is a well-behaved tenant: the experiment measures what
	// the others do to it.
	RoleQuiet Role = "quiet"
	// RoleNoisy sends far more than the others.
	RoleNoisy Role = "noisy"
	// RoleSlow sends as much as the others, but each of its messages
	// takes far longer to process.
	RoleSlow Role = "slow"
	// RolePoison sends messages that always fail.
	RolePoison Role = "poison"
)

// Tenant is one tenant of a scenario and the load it offers.
type Tenant struct {
	ID   string
	Role Role
	// Rate is the messages per second offered, at a constant rate
	// (open loop: a slow answer does not slow the sender).
	Rate float64
	// Work is how long the sink takes over each of its messages.
	Work time.Duration
	// PoisonEvery makes every n-th message of the tenant poison: the sink
	// answers it 500 every time, so that it ends in the dead-letter
	// queue. 0 sends none, 1 only poison.
	PoisonEvery int
}

// Outage stops every worker process at At (since the start of the load)
// for For, while the gateway keeps accepting, then starts them again.
type Outage struct {
	At  time.Duration
	For time.Duration
}

// Limits are the per-tenant worker limits of ModeFull (every tenant's
// defaults: the experiment gives no tenant special treatment). The other
// modes run without worker limits.
type Limits struct {
	ProcessRate  float64
	ProcessBurst int
	Concurrency  int
}

// Scenario is a load pattern and the system it runs against.
type Scenario struct {
	// Name is short and safe in file names: noisy, outage, slow, poison.
	Name  string
	Title string
	// Tenants and their load.
	Tenants []Tenant
	// Duration is how long the load runs.
	Duration time.Duration
	// Warmup is left out of the statistics: queues fill and settle.
	Warmup time.Duration
	// Outage, when its For is not zero, stops the workers for a while.
	Outage Outage

	// Workers is the number of worker processes (sqs backend; the memory
	// backend always runs one `fairq dev` process).
	Workers int
	// Connections is worker.connections of each worker: with the sink's
	// processing times it sets the capacity (Little's law).
	Connections int
	// Limits are the worker limits of ModeFull.
	Limits Limits
	// BacklogAge is worker.backlog_age in ModeFull (0 in the others).
	BacklogAge time.Duration
	// SoftBacklog and MaxBacklog are every tenant's admission
	// backpressure, the same in every mode: it bounds how much a tenant
	// can put in front of the others, and how long the queues take to
	// drain after the load.
	SoftBacklog, MaxBacklog int
	// MaxRetries, Visibility and ErrorVisibility are worker.max_retries,
	// worker.visibility_timeout and worker.error_visibility_timeout.
	MaxRetries      int
	Visibility      time.Duration
	ErrorVisibility time.Duration
	// InactivityTimeout is worker.inactivity_timeout; zero is
	// InactivityTimeoutDefault.
	InactivityTimeout time.Duration
	// RedisFailClosed sets redis.fail_open to false (sqs backend): while
	// Redis is away the gateway answers 503 and the workers spill.
	RedisFailClosed bool
	// Drain bounds the wait for every accepted message to end after the
	// load.
	Drain time.Duration
	// Baseline asks for a second run of each mode with only the quiet
	// tenants, the reference of the latency ratios. A scenario with an
	// outage takes its reference from before the outage instead.
	Baseline bool
}

// Quiet returns the ids of the quiet tenants.
func (s Scenario) Quiet() []string {
	var ids []string
	for _, t := range s.Tenants {
		if t.Role == RoleQuiet {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// Tenant returns the tenant with the given id.
func (s Scenario) Tenant(id string) (Tenant, bool) {
	i := slices.IndexFunc(s.Tenants, func(t Tenant) bool { return t.ID == id })
	if i < 0 {
		return Tenant{}, false
	}
	return s.Tenants[i], true
}

// WithoutOthers returns the scenario with its quiet tenants only, sending
// no poison, for the baseline run.
func (s Scenario) WithoutOthers() Scenario {
	b := s
	b.Tenants = slices.DeleteFunc(slices.Clone(s.Tenants), func(t Tenant) bool { return t.Role != RoleQuiet })
	for i := range b.Tenants {
		b.Tenants[i].PoisonEvery = 0
	}
	return b
}

func (s Scenario) validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if s.Name == "" {
		bad("no name")
	}
	if len(s.Tenants) == 0 {
		bad("no tenants")
	}
	seen := map[string]bool{}
	for _, t := range s.Tenants {
		if t.ID == "" || seen[t.ID] {
			bad("tenant id %q empty or repeated", t.ID)
		}
		seen[t.ID] = true
		if t.Rate <= 0 || t.Work < 0 || t.PoisonEvery < 0 {
			bad("tenant %s: rate %v must be positive, work %v and poison_every %d not negative", t.ID, t.Rate, t.Work, t.PoisonEvery)
		}
	}
	if s.Duration <= 0 || s.Warmup < 0 || s.Warmup >= s.Duration {
		bad("duration %v must be positive and warmup %v shorter", s.Duration, s.Warmup)
	}
	if s.Outage.For < 0 || s.Outage.For > 0 && (s.Outage.At <= s.Warmup || s.Outage.At+s.Outage.For >= s.Duration) {
		bad("outage %v at %v must start after the warmup and end before the load does", s.Outage.For, s.Outage.At)
	}
	if s.Workers < 1 || s.Connections < 1 || s.Connections > 100 {
		bad("workers %d must be at least 1, connections %d 1–100", s.Workers, s.Connections)
	}
	if s.Limits.ProcessRate <= 0 || s.Limits.ProcessBurst < 1 || s.Limits.Concurrency < 1 {
		bad("full mode limits %+v must be positive", s.Limits)
	}
	if s.SoftBacklog < 0 || s.MaxBacklog < 1 || s.SoftBacklog > s.MaxBacklog {
		bad("backlogs soft %d, max %d: want 0 ≤ soft ≤ max, max ≥ 1", s.SoftBacklog, s.MaxBacklog)
	}
	if s.MaxRetries < 1 || s.Visibility <= 0 || s.ErrorVisibility < 0 || s.Drain <= 0 || s.BacklogAge < 0 {
		bad("max retries %d, error visibility %v, drain %v, backlog age %v out of range", s.MaxRetries, s.ErrorVisibility, s.Drain, s.BacklogAge)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: scenario %s: %s", ErrInvalidOptions, s.Name, strings.Join(problems, "; "))
	}
	return nil
}

// Scenario names.
const (
	ScenarioNoisy  = "noisy"
	ScenarioOutage = "outage"
	ScenarioSlow   = "slow"
	ScenarioPoison = "poison"
)

// ScenarioNames are the scenarios in the order reports show them.
var ScenarioNames = []string{ScenarioNoisy, ScenarioOutage, ScenarioSlow, ScenarioPoison}

// NewScenario returns the named scenario at its full length, or, with
// short, the CI smoke version: the same shape in a few seconds at lower
// rates.
func NewScenario(name string, short bool) (Scenario, error) {
	switch name {
	case ScenarioNoisy:
		return noisy(short), nil
	case ScenarioOutage:
		return outage(short), nil
	case ScenarioSlow:
		return slow(short), nil
	case ScenarioPoison:
		return poison(short), nil
	}
	return Scenario{}, fmt.Errorf("%w: unknown scenario %q (want %s)", ErrInvalidOptions, name, strings.Join(ScenarioNames, ", "))
}

// quietTenants returns n quiet tenants quiet-1 … quiet-n.
func quietTenants(n int, rate float64, work time.Duration) []Tenant {
	ts := make([]Tenant, n)
	for i := range ts {
		ts[i] = Tenant{ID: fmt.Sprintf("quiet-%d", i+1), Role: RoleQuiet, Rate: rate, Work: work}
	}
	return ts
}

// base holds what the scenarios share: one worker with aws-sqsd's default
// of 50 connections; in full mode each tenant may start 40 messages/s and
// hold 10 at once.
func base() Scenario {
	return Scenario{
		Workers:         1,
		Connections:     50,
		Limits:          Limits{ProcessRate: 40, ProcessBurst: 40, Concurrency: 10},
		BacklogAge:      10 * time.Second,
		SoftBacklog:     500,
		MaxBacklog:      2000,
		MaxRetries:      3,
		Visibility:      30 * time.Second,
		ErrorVisibility: 2 * time.Second,
		Duration:        60 * time.Second,
		Warmup:          10 * time.Second,
		Drain:           2 * time.Minute,
	}
}

// noisy: seven quiet tenants at 5 messages/s and one at 100 times that,
// 500/s, two and a half times what the workers can do.
func noisy(short bool) Scenario {
	s := base()
	s.Name, s.Title = ScenarioNoisy, "Noisy neighbour: one tenant at 100× the others' rate"
	s.Tenants = append(quietTenants(7, 5, 200*time.Millisecond),
		Tenant{ID: "noisy", Role: RoleNoisy, Rate: 500, Work: 200 * time.Millisecond})
	s.Baseline = true
	if short {
		s.Tenants = append(quietTenants(3, 4, 100*time.Millisecond),
			Tenant{ID: "noisy", Role: RoleNoisy, Rate: 150, Work: 100 * time.Millisecond})
		s.Connections = 20
		s.SoftBacklog, s.MaxBacklog = 50, 150
		s.Duration, s.Warmup, s.Drain = 6*time.Second, time.Second, 40*time.Second
		s.Baseline = false
	}
	return s
}

// outage: eight tenants at 5 messages/s each; after 20 s every worker
// stops for 60 s while the gateway keeps accepting, then starts again.
func outage(short bool) Scenario {
	s := base()
	s.Name, s.Title = ScenarioOutage, "A 60 s consumer outage, then recovery"
	s.Tenants = quietTenants(8, 5, 200*time.Millisecond)
	s.Duration, s.Warmup = 140*time.Second, 5*time.Second
	s.Outage = Outage{At: 20 * time.Second, For: 60 * time.Second}
	if short {
		s.Title = "A consumer outage, then recovery"
		s.Tenants = quietTenants(4, 4, 100*time.Millisecond)
		s.Connections = 20
		s.BacklogAge = 2 * time.Second
		s.Duration, s.Warmup, s.Drain = 14*time.Second, time.Second, 40*time.Second
		s.Outage = Outage{At: 4 * time.Second, For: 5 * time.Second}
		// A worker stopped with receives open may leave a message
		// invisible until its visibility timeout (see the package
		// documentation): keep that short here.
		s.Visibility = 4 * time.Second
	}
	return s
}

// slow: eight tenants at 10 messages/s; one tenant's messages take 10
// times as long (1 s instead of 100 ms). The seven quiet tenants need 7
// of the worker's 15 connections (Little's law), the slow tenant 10 on its
// own: together more than there are. In full mode its concurrency of 4
// leaves the others theirs.
func slow(short bool) Scenario {
	s := base()
	s.Name, s.Title = ScenarioSlow, "A slow tenant: 10× the processing time"
	s.Tenants = append(quietTenants(7, 10, 100*time.Millisecond),
		Tenant{ID: "slow", Role: RoleSlow, Rate: 10, Work: time.Second})
	s.Connections = 15
	s.Limits.Concurrency = 4
	s.SoftBacklog, s.MaxBacklog = 200, 500
	s.Baseline = true
	if short {
		s.Tenants = append(quietTenants(3, 5, 50*time.Millisecond),
			Tenant{ID: "slow", Role: RoleSlow, Rate: 5, Work: 500 * time.Millisecond})
		s.Connections = 20
		s.Limits.Concurrency = 2
		s.SoftBacklog, s.MaxBacklog = 20, 60
		s.Duration, s.Warmup, s.Drain = 6*time.Second, time.Second, 40*time.Second
		s.Baseline = false
	}
	return s
}

// poison: eight tenants at 10 messages/s; every message of one tenant
// and every 25th of the others always fails, and goes to the dead-letter
// queue after worker.max_retries attempts.
func poison(short bool) Scenario {
	s := base()
	s.Name, s.Title = ScenarioPoison, "Poison messages: always failing, dead-lettered after 3 attempts"
	s.Tenants = quietTenants(7, 10, 50*time.Millisecond)
	for i := range s.Tenants {
		s.Tenants[i].PoisonEvery = 25
	}
	s.Tenants = append(s.Tenants, Tenant{ID: "poison", Role: RolePoison, Rate: 10, Work: 50 * time.Millisecond, PoisonEvery: 1})
	s.Connections = 20
	s.Baseline = true
	if short {
		s.Tenants = quietTenants(3, 5, 20*time.Millisecond)
		for i := range s.Tenants {
			s.Tenants[i].PoisonEvery = 5
		}
		s.Tenants = append(s.Tenants, Tenant{ID: "poison", Role: RolePoison, Rate: 5, Work: 20 * time.Millisecond, PoisonEvery: 1})
		s.Connections = 20
		s.ErrorVisibility = time.Second
		s.Duration, s.Warmup, s.Drain = 6*time.Second, time.Second, 40*time.Second
		s.Baseline = false
	}
	return s
}
