package harness

import (
	"fmt"
	"strings"
	"time"
)

// Fault names: each is one chaos run, on fresh processes and a fresh queue
// prefix.
const (
	FaultWorkerKill  = "worker-kill"  // kill -9 one of two workers mid-load, restart it
	FaultWorkerTerm  = "worker-term"  // SIGTERM one of two workers mid-load, restart it
	FaultRedisOpen   = "redis-open"   // cut Redis away and give it back, redis.fail_open: true
	FaultRedisClosed = "redis-closed" // the same with redis.fail_open: false
	FaultSQSStall    = "sqs-stall"    // SIGSTOP the SQS emulator, then SIGCONT
	FaultSQSDown     = "sqs-down"     // cut the SQS emulator away (it keeps its queues), then restore
	FaultApp500      = "app-500"      // the application answers 500 for a while
	FaultAppHang     = "app-hang"     // the application answers nothing for a while
	FaultGatewayKill = "gateway-kill" // kill -9 the gateway mid-load, restart it
	FaultSlowBody    = "slow-body"    // many connections each promise an 8 MB batch and send one byte
	FaultRestartSend = "restart-send" // restart the only worker, send one message 2 s later, repeatedly
)

// FaultNames are the faults in the order reports show them.
var FaultNames = []string{
	FaultWorkerKill, FaultWorkerTerm, FaultRedisOpen, FaultRedisClosed, FaultSQSStall, FaultSQSDown,
	FaultApp500, FaultAppHang, FaultGatewayKill, FaultSlowBody, FaultRestartSend,
}

// Expectations are what a fault's run must show. MaxLost is always
// checked; a zero duration or size, or a nil MaxRetriedDuplicates, is not
// checked.
type Expectations struct {
	// MaxLost bounds the accepted messages never delivered with a 2xx
	// answer once the system drained.
	MaxLost int `json:"max_lost"`
	// MaxRetriedDuplicates bounds the 2xx deliveries beyond the first of
	// messages whose first send was answered 503 or failed in transport.
	MaxRetriedDuplicates *int `json:"max_retried_duplicates,omitempty"`
	// Max503Latency bounds how long a 503 took to come.
	Max503Latency time.Duration `json:"max_503_latency,omitempty"`
	// MaxRSS bounds the gateway's VmRSS while the fault lasts.
	MaxRSS int64 `json:"max_rss,omitempty"`
	// MaxRSSAfter bounds the gateway's VmRSS Fault.After the fault ended,
	// as a multiple of its VmRSS just before the fault: back near idle.
	MaxRSSAfter float64 `json:"max_rss_after,omitempty"`
	// MaxDeliveryDelay bounds the time from a message's send to its first
	// delivery (restart-send).
	MaxDeliveryDelay time.Duration `json:"max_delivery_delay,omitempty"`
	// MaxOtherP99 bounds the p99 of the normal tenants' send latency
	// while the fault lasts (slow-body).
	MaxOtherP99 time.Duration `json:"max_other_p99,omitempty"`
	// Enforced makes the short test assert every expectation; without
	// it the test asserts only MaxLost, and the report still says
	// pass or FAIL for each. A fault that fairq is known to fail is not
	// enforced until it is fixed.
	Enforced bool `json:"enforced"`
}

// Fault is one chaos run: a load, a fault injected into it, and what must
// hold afterwards.
type Fault struct {
	Name  string `json:"name"`
	Title string `json:"title"`

	// The load: Tenants tenants offering Rate messages/s in all, for
	// Duration, open loop, each message taking Work at the application.
	// The generator is a careful client (RetryFor).
	Tenants  int           `json:"tenants"`
	Rate     float64       `json:"rate"`
	Work     time.Duration `json:"work"`
	Duration time.Duration `json:"duration"`
	// RetryFor bounds how long the client retries one message.
	RetryFor time.Duration `json:"retry_for"`

	// At is when the fault begins, since the start of the load; For is
	// how long it lasts (a killed process stays down that long).
	At  time.Duration `json:"at"`
	For time.Duration `json:"for"`

	// The system: Workers `fairq worker` processes of Connections slots.
	Workers         int           `json:"workers"`
	Connections     int           `json:"connections"`
	Visibility      time.Duration `json:"visibility"`
	ErrorVisibility time.Duration `json:"error_visibility"`
	Inactivity      time.Duration `json:"inactivity"`
	BacklogAge      time.Duration `json:"backlog_age"`
	// FailClosed sets redis.fail_open: false.
	FailClosed bool `json:"fail_closed"`

	// Slow-body: Attackers connections, each sending the head of a
	// batch of AttackLength bytes and one byte of it, held For; After is
	// how long the harness keeps sampling the gateway once they close.
	// AbortRSS ends the attack early if the gateway's VmRSS goes past it,
	// to spare the machine; past KillRSS, which a gateway that takes the
	// connections late can reach after the attack let go of them, the
	// gateway is killed and started again.
	Attackers    int           `json:"attackers,omitempty"`
	AttackLength int64         `json:"attack_length,omitempty"`
	After        time.Duration `json:"after,omitempty"`
	AbortRSS     int64         `json:"abort_rss,omitempty"`
	KillRSS      int64         `json:"kill_rss,omitempty"`

	// Restart-send: Repeat times, SIGTERM the worker, start it again at
	// once and send one message SendAfter later; wait at most Deliver
	// for it.
	Repeat    int           `json:"repeat,omitempty"`
	SendAfter time.Duration `json:"send_after,omitempty"`
	Deliver   time.Duration `json:"deliver,omitempty"`

	// Drain bounds the wait for every accepted message to end after the
	// load.
	Drain time.Duration `json:"drain"`

	Expect Expectations `json:"expect"`
}

// AttackLengthDefault is the Content-Length the slow-body attack
// announces: just under 8 MiB, far within what a batch of 100 messages may
// be, so that the gateway takes it for an honest request.
const AttackLengthDefault = 8388000

// Targets of the expectations.
const (
	// Max503Target: a 503 must come within this, so that a client's
	// retry can.
	Max503Target = 3500 * time.Millisecond
	// MaxRSSTarget: the gateway's resident memory under the slow-body
	// attack.
	MaxRSSTarget = 300 << 20
	// RSSAfterTarget: its memory within After of the attack's end, as a
	// multiple of the memory before it.
	RSSAfterTarget = 1.5
	// OtherP99Target: the other tenants' p99 send latency under the
	// attack.
	OtherP99Target = 50 * time.Millisecond
	// DeliveryTarget: a message sent 2 s after a worker restart is
	// delivered within this.
	DeliveryTarget = 2 * time.Second
)

// NewFault returns the named fault at its full length, or, with short,
// the version `go test` runs: the same fault in a few seconds.
func NewFault(name string, short bool) (Fault, error) {
	f := Fault{
		Name: name, Tenants: 4, Rate: 100, Work: 20 * time.Millisecond, Duration: 60 * time.Second,
		RetryFor: 30 * time.Second, At: 15 * time.Second, For: 10 * time.Second,
		Workers: 2, Connections: 50, Visibility: 30 * time.Second, ErrorVisibility: 5 * time.Second,
		Inactivity: InactivityTimeoutDefault, BacklogAge: 10 * time.Second, Drain: 3 * time.Minute,
	}
	if short {
		f.Rate, f.Duration, f.At, f.For = 40, 6*time.Second, 2*time.Second, 2*time.Second
		f.Visibility, f.ErrorVisibility, f.BacklogAge, f.Drain = 5*time.Second, 2*time.Second, 5*time.Second, 40*time.Second
	}
	zero := 0
	switch name {
	case FaultWorkerKill:
		f.Title = "kill -9 one of two workers mid-load, restart it"
		f.For = pick(short, 5*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultWorkerTerm:
		f.Title = "SIGTERM one of two workers mid-load, restart it"
		f.For = pick(short, 5*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultRedisOpen:
		f.Title = "Redis cut away and given back (redis.fail_open: true)"
		f.For = pick(short, 15*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultRedisClosed:
		f.Title = "Redis cut away and given back (redis.fail_open: false)"
		f.For = pick(short, 15*time.Second, 2*time.Second)
		f.FailClosed = true
		f.Expect.Enforced = true
	case FaultSQSStall:
		f.Title = "SQS stalls: the emulator stopped (SIGSTOP), then continued"
		f.Rate = pick(short, 250.0, 100.0)
		// Short, the stall still outlasts the gateway's send timeout
		// (3 s): its 503s, and the retries that must not duplicate.
		f.For = pick(short, 18*time.Second, 6*time.Second)
		f.Duration = max(f.Duration, f.At+f.For+2*time.Second)
		f.Expect.MaxRetriedDuplicates = &zero
		f.Expect.Max503Latency = Max503Target
		f.Expect.Enforced = true
	case FaultSQSDown:
		f.Title = "SQS unreachable: connections to the emulator cut and refused, then restored"
		f.For = pick(short, 15*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultApp500:
		f.Title = "the application answers 500 for a while"
		f.For = pick(short, 10*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultAppHang:
		f.Title = "the application hangs (no answer) for a while"
		f.For = pick(short, 10*time.Second, 2*time.Second)
		f.Inactivity = pick(short, 3*time.Second, time.Second)
		f.Expect.Enforced = true
	case FaultGatewayKill:
		f.Title = "kill -9 the gateway mid-load, restart it"
		f.For = pick(short, 5*time.Second, 2*time.Second)
		f.Expect.Enforced = true
	case FaultSlowBody:
		f.Title = "slow-body attack: connections promise an 8 MB batch and send one byte"
		f.Rate = pick(short, 50.0, 40.0)
		f.Attackers = pick(short, 1000, 200)
		f.AttackLength = AttackLengthDefault
		f.For = pick(short, 30*time.Second, 3*time.Second)
		f.After = pick(short, 60*time.Second, 5*time.Second)
		f.At = pick(short, 10*time.Second, 2*time.Second)
		f.Duration = f.At + f.For + f.After + 2*time.Second
		f.AbortRSS = pick[int64](short, 4<<30, 512<<20)
		f.KillRSS = f.AbortRSS * 3 / 2
		f.Expect.MaxRSS = MaxRSSTarget
		f.Expect.MaxRSSAfter = RSSAfterTarget
		// The short form runs beside another fault on a shared machine:
		// its latency bound is looser than the long form's.
		f.Expect.MaxOtherP99 = pick(short, OtherP99Target, 5*OtherP99Target)
		f.Expect.Enforced = true
	case FaultRestartSend:
		f.Title = "restart the only worker, send one message 2 s later"
		f.Workers, f.Tenants = 1, 1
		f.Repeat = pick(short, 10, 3)
		f.SendAfter = 2 * time.Second
		f.Deliver = f.Visibility + 15*time.Second
		f.Expect.MaxDeliveryDelay = DeliveryTarget
		f.Expect.Enforced = true
	default:
		return Fault{}, fmt.Errorf("%w: unknown fault %q (want %s)", ErrInvalidOptions, name, strings.Join(FaultNames, ", "))
	}
	return f, nil
}

// pick returns long, or short for the short form.
func pick[T any](short bool, long, shortValue T) T {
	if short {
		return shortValue
	}
	return long
}

// Validate reports what makes the fault impossible to run, if anything.
func (f Fault) Validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if f.Name == "" {
		bad("no name")
	}
	if f.Tenants < 1 || f.Rate <= 0 || f.Work < 0 || f.RetryFor <= 0 {
		bad("tenants %d, rate %v and retry_for %v must be positive, work %v not negative", f.Tenants, f.Rate, f.RetryFor, f.Work)
	}
	if f.Repeat == 0 && (f.Duration <= 0 || f.At <= 0 || f.For <= 0 || f.At+f.For > f.Duration) {
		bad("the fault (%v at %v) must lie within the load (%v)", f.For, f.At, f.Duration)
	}
	if f.Repeat < 0 || f.Repeat > 0 && (f.SendAfter <= 0 || f.Deliver <= 0) {
		bad("repeat %d, send_after %v, deliver %v", f.Repeat, f.SendAfter, f.Deliver)
	}
	if f.Attackers < 0 || f.Attackers > 0 && (f.AttackLength < 2 || f.After < 0) {
		bad("attackers %d, attack_length %d, after %v", f.Attackers, f.AttackLength, f.After)
	}
	if f.Drain <= 0 {
		bad("drain %v must be positive", f.Drain)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: fault %s: %s", ErrInvalidOptions, f.Name, strings.Join(problems, "; "))
	}
	return f.scenario().validate()
}

// attackTenant is the tenant whose key the slow-body connections carry.
const attackTenant = "attacker"

// scenario is the system and load of the fault in the harness's terms:
// full mode with limits that the load stays well under, so that the
// fault, not the limits, decides what happens.
func (f Fault) scenario() Scenario {
	sc := Scenario{
		Name: f.Name, Title: f.Title,
		Tenants:  quietTenants(f.Tenants, f.Rate/float64(f.Tenants), f.Work),
		Duration: max(f.Duration, time.Second),
		Workers:  f.Workers, Connections: f.Connections,
		Limits:      Limits{ProcessRate: 1000, ProcessBurst: 1000, Concurrency: 100},
		BacklogAge:  f.BacklogAge,
		SoftBacklog: 50_000, MaxBacklog: 100_000,
		MaxRetries: 10, Visibility: f.Visibility, ErrorVisibility: f.ErrorVisibility,
		InactivityTimeout: f.Inactivity, RedisFailClosed: f.FailClosed,
		Drain: f.Drain,
	}
	if f.Attackers > 0 {
		sc.Tenants = append(sc.Tenants, Tenant{ID: attackTenant, Role: RoleNoisy, Rate: 1})
	}
	return sc
}

// load is the tenants the generator sends for.
func (f Fault) load(sc Scenario) []Tenant {
	var ts []Tenant
	for _, t := range sc.Tenants {
		if t.ID != attackTenant {
			ts = append(ts, t)
		}
	}
	return ts
}

// needsRedisProxy and needsSQSProxy report whether the fault takes a
// service away through a proxy.
func (f Fault) needsRedisProxy() bool { return f.Name == FaultRedisOpen || f.Name == FaultRedisClosed }
func (f Fault) needsSQSProxy() bool   { return f.Name == FaultSQSDown }
