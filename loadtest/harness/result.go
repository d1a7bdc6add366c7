package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/sharding"
)

// Result is what happened in one run.
type Result struct {
	Scenario Scenario `json:"scenario"`
	Mode     Mode     `json:"mode"`
	Backend  string   `json:"backend"`
	Baseline bool     `json:"baseline"`
	// Redis is the topology of a fleet's Redis (RedisSingle or
	// RedisCluster), Gateways its gateway processes; both empty outside
	// ModeFleet.
	Redis    string `json:"redis,omitempty"`
	Gateways int    `json:"gateways,omitempty"`
	// AppProcess and ClientsProcess record that the application and the
	// load ran in processes of their own (Options.App, Options.Clients),
	// not in the harness's.
	AppProcess     bool `json:"app_process,omitempty"`
	ClientsProcess bool `json:"clients_process,omitempty"`
	// Burn is the CPU, in cores, that a burn process was asked to burn
	// over the load (Options.Burn): a contention control. What it burnt is
	// the burner's in CPUUse.
	Burn float64 `json:"burn,omitempty"`
	// GatewayAccepted counts the messages each gateway accepted, in the
	// order of the generator's turns; empty outside ModeFleet.
	GatewayAccepted []int `json:"gateway_accepted,omitempty"`
	// Start is when the load began; times below are measured from it.
	Start time.Time `json:"start"`
	// OutageStart is when the workers were sent SIGTERM, OutageEnd when
	// the harness began to start them again, WorkersReady when they
	// answered /healthz. Zero without an outage.
	OutageStart  time.Time `json:"outage_start,omitzero"`
	OutageEnd    time.Time `json:"outage_end,omitzero"`
	WorkersReady time.Time `json:"workers_ready,omitzero"`
	// Sends are the enqueue requests; Skipped counts those not sent
	// because too many were open (the generator fell behind).
	Sends   []Send `json:"-"`
	Skipped int64  `json:"skipped"`
	// Late summarises how late the sends left (Send.Late): a harness
	// held up by an overloaded machine shows here.
	Late Quantiles `json:"late"`
	// LoadAvg is the machine's 1-minute load average at the start and at
	// the end of the load (Linux; empty elsewhere).
	LoadAvg [2]string `json:"load_avg"`
	// Deliveries are the pushes the sink received.
	Deliveries []Delivery `json:"-"`
	// Drained reports whether every queue emptied within Scenario.Drain
	// after the load; DrainedAt is when the wait ended; Leftover counts
	// the messages still queued then.
	Drained   bool      `json:"drained"`
	DrainedAt time.Time `json:"drained_at"`
	Leftover  int       `json:"leftover"`
	// Depths samples the queues' depths every second from the start of
	// the load to the end of the drain.
	Depths []DepthSample `json:"-"`
	// CPU samples the machine's CPU time every second over the same
	// span (Linux; none elsewhere).
	CPU []CPUSample `json:"-"`
	// DLQDepth is the dead-letter queue's depth after the drain;
	// Redriven how many the redrive moved back.
	DLQDepth int `json:"dlq_depth"`
	Redriven int `json:"redriven"`

	// Filled by analyse.
	Accounting Accounting    `json:"accounting"`
	Messages   []Message     `json:"-"`
	Tenants    []TenantStats `json:"tenants"`
	// Quiet pools the quiet tenants' messages.
	Quiet TenantStats `json:"quiet"`
	// QuietJudged is the quiet tenants' p95 that the noisy-neighbour
	// latency criteria judge: Quiet's, less the messages sent in a second
	// of steal (StealLeaveOut).
	QuietJudged Judged `json:"quiet_judged"`
	// Jain is Jain's fairness index of the quiet tenants' goodput: 1 when
	// all got the same, 1/n when one got everything.
	Jain float64 `json:"jain"`
	// Recovery describes the outage's aftermath; nil without one.
	Recovery *Recovery `json:"recovery,omitempty"`
	// LimitsSeen is what the application saw of the per-tenant worker
	// limits, in the modes that have them; nil in the others.
	LimitsSeen *LimitsSeen `json:"limits_seen,omitempty"`
	// Steal is the hypervisor's share of the machine's CPU time; nil
	// where it was not sampled.
	Steal *Steal `json:"steal,omitempty"`
	// CPUUse is the CPU time the run's processes used over the load;
	// nil where it was not read (no /proc).
	CPUUse *CPUUse `json:"cpu_use,omitempty"`
}

// Steal is the share of the machine's CPU time that the hypervisor gave
// to others while this machine had work to run, over the windows a run's
// latency is judged in; -1 for a window with too few samples. On a
// shared host it comes in bursts, and a p95 of a few milliseconds moves
// with it: a run whose windows differ in steal compared its latencies
// on different machines.
type Steal struct {
	// Load is the share over the load, from Scenario.Warmup.
	Load float64 `json:"load"`
	// Before and Fresh, with an outage (0 without), are the shares over
	// the windows that Recovery's Baseline and FreshP95 measure: sends
	// from the warmup to the outage, and from FreshAfter after the
	// restart to the end of the load.
	Before float64 `json:"before"`
	Fresh  float64 `json:"fresh"`
}

// DepthSample is the messages in each kind of queue (visible, in flight
// and delayed) at one time.
type DepthSample struct {
	At                           time.Duration // since Result.Start
	Live, Overflow, Backlog, DLQ int
}

// Outcome is how a message ended.
type Outcome string

const (
	// OutcomeProcessed: the sink answered 2xx to a delivery.
	OutcomeProcessed Outcome = "processed"
	// OutcomeDeadLettered: it was in the dead-letter queue at the end.
	OutcomeDeadLettered Outcome = "dead-lettered"
	// OutcomeBoth: processed, and a copy was in the dead-letter queue.
	OutcomeBoth Outcome = "processed+dead-lettered"
	// OutcomeLost: accepted, and neither processed nor dead-lettered.
	OutcomeLost Outcome = "lost"
)

// Message is one accepted message's story.
type Message struct {
	Seq    int64
	Tenant string
	Poison bool
	// Sent is when it was sent, since Result.Start.
	Sent time.Duration
	// Latency is from the gateway's acceptance (X-Fairq-Enqueued-At) to
	// the start of its first delivery; -1 if it was never delivered.
	Latency time.Duration
	// Done is when its first successful delivery ended, since
	// Result.Start; -1 if none.
	Done       time.Duration
	Deliveries int
	Outcome    Outcome
}

// Accounting balances accepted messages against their ends.
type Accounting struct {
	Sent     int `json:"sent"`
	Accepted int `json:"accepted"`
	// Rejected counts the other answers by status and problem code.
	Rejected map[string]int `json:"rejected,omitempty"`
	// Processed, DeadLettered, Both and Lost partition Accepted by
	// Outcome.
	Processed    int `json:"processed"`
	DeadLettered int `json:"dead_lettered"`
	Both         int `json:"processed_and_dead_lettered"`
	Lost         int `json:"lost"`
	// Duplicates counts successful deliveries beyond a message's first.
	Duplicates int `json:"duplicates"`
	// Unacknowledged counts messages delivered whose send the harness
	// did not see accepted (its answer was an error or never came).
	Unacknowledged int `json:"unacknowledged"`
	// PoisonSent and PoisonDeadLettered count the poison messages
	// accepted and those that ended in the dead-letter queue;
	// GoodDeadLettered the other messages that did.
	PoisonAccepted     int `json:"poison_accepted"`
	PoisonDeadLettered int `json:"poison_dead_lettered"`
	GoodDeadLettered   int `json:"good_dead_lettered"`
	// LostSeqs lists up to 20 lost messages, to look for in the logs.
	LostSeqs []int64 `json:"lost_seqs,omitempty"`
}

// Balanced reports whether every accepted message was processed or
// dead-lettered exactly as the scenario meant: none lost, every poison
// message in the dead-letter queue and no other.
func (a Accounting) Balanced() bool {
	return a.Lost == 0 && a.Both == 0 && a.Processed+a.DeadLettered == a.Accepted &&
		a.PoisonDeadLettered == a.PoisonAccepted && a.GoodDeadLettered == 0
}

// Quantiles summarise latencies.
type Quantiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P95 time.Duration `json:"p95"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// TenantStats are one tenant's figures over the measured window (sends
// from Scenario.Warmup to the end of the load).
type TenantStats struct {
	ID    string `json:"id"`
	Role  Role   `json:"role"`
	Shard string `json:"shard"` // its live queues in the mode's pool
	// Offered is the rate it sent at, Accepted the rate the gateway
	// took, Goodput the rate of its messages whose first success ended
	// in the window; all messages per second.
	Offered  float64 `json:"offered"`
	Accepted float64 `json:"accepted"`
	Goodput  float64 `json:"goodput"`
	// Latency is enqueue-to-start of its messages sent in the window.
	Latency Quantiles `json:"latency"`
}

// Recovery describes the outage's aftermath. Durations are since the
// workers were started again (Result.OutageEnd).
type Recovery struct {
	// Baseline is the p95 of messages sent before the outage (after the
	// warmup), Before.P95; Threshold is what counts as served at baseline
	// latency: RecoveryFactor times it.
	Baseline  time.Duration `json:"baseline_p95"`
	Threshold time.Duration `json:"threshold"`
	// Before and Fresh judge the windows that Baseline and FreshP95
	// measure, the messages sent in a second of steal left out
	// (StealLeaveOut).
	Before Judged `json:"before"`
	Fresh  Judged `json:"fresh"`
	// RecoveredAfter is the start of the first RecoveryWindow of send
	// time after the restart (in steps of a second) whose messages' p95
	// is within Threshold: from about then on, new messages are served
	// at baseline latency. -1 if no window of the load is.
	RecoveredAfter time.Duration `json:"recovered_after"`
	// FreshP95 is the p95 of messages sent from FreshAfter after the
	// restart to the end of the load, Fresh.P95; -1 if none was kept.
	FreshP95 time.Duration `json:"fresh_p95"`
	// BacklogCleared is when the last message sent during the outage
	// started; BacklogClearedInLoad says whether that was before the load
	// ended (the backlog drained under load) or only after.
	BacklogCleared       time.Duration `json:"backlog_cleared"`
	BacklogClearedInLoad bool          `json:"backlog_cleared_in_load"`
	// Buckets are the p95 of each second of send time after the restart.
	Buckets []time.Duration `json:"buckets"`
}

// RecoveryFactor is how far above the pre-outage p95 a p95 after the
// restart may be and still count as baseline latency: the tolerance of the
// noisy-neighbour criterion.
const RecoveryFactor = 1.2

// RecoveryWindow is the span of send time whose p95 RecoveredAfter judges.
const RecoveryWindow = 5 * time.Second

// FreshAfter is the Done-when bound: new messages at baseline latency
// within this long of the workers' restart.
const FreshAfter = 5 * time.Second

// DisturbedLate is how late the harness's own sends may leave (p99) before
// a run counts as disturbed: the machine was too busy for its timings to
// be fairq's alone.
const DisturbedLate = 100 * time.Millisecond

// Disturbed reports whether the run's sends left late: other work on the
// machine held up the harness, and likely fairq with it.
func (r *Result) Disturbed() bool { return r.Late.P99 > DisturbedLate }

// since returns t - r.Start.
func (r *Result) since(t time.Time) time.Duration { return t.Sub(r.Start) }

// analyse fills Accounting, Messages, Tenants, Quiet, Jain and Recovery.
func (r *Result) analyse() {
	sc := r.Scenario
	a := Accounting{Sent: len(r.Sends), Rejected: map[string]int{}}
	bySeq := make(map[int64][]Delivery)
	for _, d := range r.Deliveries {
		bySeq[d.Seq] = append(bySeq[d.Seq], d)
	}
	accepted := make(map[int64]bool, len(r.Sends))
	lates := make([]time.Duration, 0, len(r.Sends))
	for _, s := range r.Sends {
		lates = append(lates, s.Late)
	}
	r.Late = quantiles(lates)
	r.Messages = r.Messages[:0]
	for _, s := range r.Sends {
		if !s.Accepted() {
			a.Rejected[rejection(s)]++
			continue
		}
		a.Accepted++
		accepted[s.Seq] = true
		m := Message{Seq: s.Seq, Tenant: s.Tenant, Poison: s.Poison, Sent: r.since(s.At), Latency: -1, Done: -1}
		ds := bySeq[s.Seq]
		slices.SortFunc(ds, func(x, y Delivery) int { return x.Start.Compare(y.Start) })
		m.Deliveries = len(ds)
		processed, dead, oks := false, false, 0
		for _, d := range ds {
			if d.Redriven {
				dead = true
				continue
			}
			if d.OK() {
				oks++
				if !processed {
					processed = true
					m.Done = r.since(d.End)
				}
			}
		}
		if oks > 1 {
			a.Duplicates += oks - 1
		}
		if len(ds) > 0 && !ds[0].EnqueuedAt.IsZero() {
			m.Latency = max(0, ds[0].Start.Sub(ds[0].EnqueuedAt))
		}
		switch {
		case processed && dead:
			m.Outcome = OutcomeBoth
			a.Both++
		case processed:
			m.Outcome = OutcomeProcessed
			a.Processed++
		case dead:
			m.Outcome = OutcomeDeadLettered
			a.DeadLettered++
		default:
			m.Outcome = OutcomeLost
			a.Lost++
			if len(a.LostSeqs) < 20 {
				a.LostSeqs = append(a.LostSeqs, s.Seq)
			}
		}
		if s.Poison {
			a.PoisonAccepted++
			if dead {
				a.PoisonDeadLettered++
			}
		} else if dead {
			a.GoodDeadLettered++
		}
		r.Messages = append(r.Messages, m)
	}
	for seq := range bySeq {
		if !accepted[seq] {
			a.Unacknowledged++
		}
	}
	r.Accounting = a

	from, to := sc.Warmup, sc.Duration
	window := (to - from).Seconds()
	queues, shardSize := r.Mode.pool()
	pool, _ := sharding.NewPool(queues, shardSize) // the modes' pools are valid
	r.Tenants = r.Tenants[:0]
	var quietLat []time.Duration
	var quietGood []float64
	r.Quiet = TenantStats{ID: "quiet tenants", Role: RoleQuiet}
	for _, t := range sc.Tenants {
		st := TenantStats{ID: t.ID, Role: t.Role, Shard: pool.Shard(t.ID).String()}
		var lat []time.Duration
		sent, acc, good := 0, 0, 0
		for _, s := range r.Sends {
			if s.Tenant == t.ID && in(r.since(s.At), from, to) {
				sent++
				if s.Accepted() {
					acc++
				}
			}
		}
		for _, m := range r.Messages {
			if m.Tenant != t.ID {
				continue
			}
			if in(m.Sent, from, to) && m.Latency >= 0 {
				lat = append(lat, m.Latency)
			}
			if m.Done >= 0 && in(m.Done, from, to) {
				good++
			}
		}
		st.Offered, st.Accepted, st.Goodput = float64(sent)/window, float64(acc)/window, float64(good)/window
		st.Latency = quantiles(lat)
		r.Tenants = append(r.Tenants, st)
		if t.Role == RoleQuiet {
			quietLat = append(quietLat, lat...)
			quietGood = append(quietGood, st.Goodput)
			r.Quiet.Offered += st.Offered
			r.Quiet.Accepted += st.Accepted
			r.Quiet.Goodput += st.Goodput
		}
	}
	r.Quiet.Latency = quantiles(quietLat)
	r.QuietJudged = r.quietJudged()
	r.Jain = jain(quietGood)
	if sc.Outage.For > 0 && !r.OutageEnd.IsZero() {
		r.Recovery = r.recovery()
	}
	r.Steal = r.steal()
}

// stealNote tells the run's Steal, "" where it was not sampled: "CPU
// steal 0.4%" or, with an outage, "CPU steal 0.4% before the outage, 3.1%
// from 5s after the restart".
func (r *Result) stealNote() string {
	s := r.Steal
	if s == nil {
		return ""
	}
	pct := func(x float64) string {
		if x < 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", 100*x)
	}
	if r.Recovery != nil {
		return fmt.Sprintf("CPU steal %s before the outage, %s from %v after the restart", pct(s.Before), pct(s.Fresh), FreshAfter)
	}
	return "CPU steal " + pct(s.Load)
}

// steal measures the hypervisor's share of the CPU over the windows the
// run is judged in; nil without samples.
func (r *Result) steal() *Steal {
	if len(r.CPU) == 0 {
		return nil
	}
	sc := r.Scenario
	s := &Steal{Load: stealShare(r.CPU, sc.Warmup, sc.Duration)}
	if sc.Outage.For > 0 && !r.OutageEnd.IsZero() {
		s.Before = stealShare(r.CPU, sc.Warmup, r.since(r.OutageStart))
		s.Fresh = stealShare(r.CPU, r.since(r.OutageEnd)+FreshAfter, sc.Duration)
	}
	return s
}

// quietJudged judges the quiet tenants' messages sent from the warmup to
// the end of the load.
func (r *Result) quietJudged() Judged {
	sc := r.Scenario
	quiet := make(map[string]bool)
	for _, t := range sc.Tenants {
		quiet[t.ID] = t.Role == RoleQuiet
	}
	left := stolen(r.CPU)
	var lat []time.Duration
	var out []bool
	for _, m := range r.Messages {
		if quiet[m.Tenant] && in(m.Sent, sc.Warmup, sc.Duration) && m.Latency >= 0 {
			lat = append(lat, m.Latency)
			out = append(out, left(m.Sent))
		}
	}
	return judge(lat, out)
}

// recovery measures the outage's aftermath.
func (r *Result) recovery() *Recovery {
	sc := r.Scenario
	restart := r.since(r.OutageEnd)
	left := stolen(r.CPU)
	var before, fresh []time.Duration
	var beforeLeft, freshLeft []bool
	// The workers may be back only after the load ended (stopping them
	// took longer than the outage): then no bucket.
	buckets := make([][]time.Duration, max(0, int(math.Ceil((sc.Duration-restart).Seconds()))))
	rec := &Recovery{BacklogCleared: -1}
	outageFrom := r.since(r.OutageStart)
	for _, m := range r.Messages {
		if m.Latency < 0 {
			continue
		}
		switch {
		case in(m.Sent, sc.Warmup, outageFrom):
			before = append(before, m.Latency)
			beforeLeft = append(beforeLeft, left(m.Sent))
		case m.Sent >= restart:
			if i := int((m.Sent - restart) / time.Second); i < len(buckets) {
				buckets[i] = append(buckets[i], m.Latency)
			}
			if m.Sent >= restart+FreshAfter {
				fresh = append(fresh, m.Latency)
				freshLeft = append(freshLeft, left(m.Sent))
			}
		}
		if in(m.Sent, outageFrom, restart) {
			started := m.Sent + m.Latency - restart // near enough: Sent is the request's start
			rec.BacklogCleared = max(rec.BacklogCleared, started)
		}
	}
	rec.Before, rec.Fresh = judge(before, beforeLeft), judge(fresh, freshLeft)
	rec.Baseline = rec.Before.P95
	rec.Threshold = time.Duration(RecoveryFactor * float64(rec.Baseline))
	rec.FreshP95 = -1
	if rec.Fresh.Kept > 0 {
		rec.FreshP95 = rec.Fresh.P95
	}
	for _, b := range buckets {
		rec.Buckets = append(rec.Buckets, quantiles(b).P95)
	}
	rec.RecoveredAfter = -1
	span := int(RecoveryWindow / time.Second)
	for i := 0; i+span <= len(buckets); i++ {
		var w []time.Duration
		for _, b := range buckets[i : i+span] {
			w = append(w, b...)
		}
		if len(w) > 0 && quantiles(w).P95 <= rec.Threshold {
			rec.RecoveredAfter = time.Duration(i) * time.Second
			break
		}
	}
	rec.BacklogClearedInLoad = rec.BacklogCleared >= 0 && restart+rec.BacklogCleared <= sc.Duration
	return rec
}

// rejection names a refused send: "429 backlog_full", "transport".
func rejection(s Send) string {
	if s.Status == 0 {
		return "transport error"
	}
	if s.Code == "" {
		return strconv.Itoa(s.Status)
	}
	return strconv.Itoa(s.Status) + " " + s.Code
}

// in reports whether from ≤ d < to.
func in(d, from, to time.Duration) bool { return d >= from && d < to }

// quantiles returns the nearest-rank quantiles of ds (sorted in place).
func quantiles(ds []time.Duration) Quantiles {
	if len(ds) == 0 {
		return Quantiles{}
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Quantiles{N: len(ds), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ds[len(ds)-1]}
}

// jain returns Jain's fairness index (Σx)²/(n·Σx²); 1 for no values or
// all zero.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// write saves the run's records under dir: messages.csv (one line per
// accepted message), queues.csv (the depths), cpu.csv (the CPU samples)
// and result.json (everything else).
func (r *Result) write(dir string) error {
	f, err := os.Create(filepath.Join(dir, "messages.csv"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "seq,tenant,poison,sent_ms,latency_ms,done_ms,deliveries,outcome")
	for _, m := range r.Messages {
		fmt.Fprintf(w, "%d,%s,%t,%.1f,%.1f,%.1f,%d,%s\n", m.Seq, m.Tenant, m.Poison, ms(m.Sent), ms(m.Latency), ms(m.Done), m.Deliveries, m.Outcome)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var q bytes.Buffer
	fmt.Fprintln(&q, "t_s,live,overflow,backlog,dlq")
	for _, d := range r.Depths {
		fmt.Fprintf(&q, "%.1f,%d,%d,%d,%d\n", d.At.Seconds(), d.Live, d.Overflow, d.Backlog, d.DLQ)
	}
	if err := os.WriteFile(filepath.Join(dir, "queues.csv"), q.Bytes(), 0o644); err != nil {
		return err
	}
	var c bytes.Buffer
	fmt.Fprintln(&c, "t_s,steal,total")
	for _, s := range r.CPU {
		fmt.Fprintf(&c, "%.3f,%d,%d\n", s.At.Seconds(), s.Steal, s.Total)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.csv"), c.Bytes(), 0o644); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "result.json"), append(data, '\n'), 0o644)
}

// ms returns d in milliseconds; negative durations (none) stay -1.
func ms(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d) / float64(time.Millisecond)
}

// LoadResult reads back a run written under dir (result.json,
// messages.csv, queues.csv and cpu.csv), enough to draw and report it
// again; its Sends and Deliveries are not kept.
func LoadResult(dir string) (*Result, error) {
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	r := &Result{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	f, err := os.Open(filepath.Join(dir, "messages.csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for line := 2; sc.Scan(); line++ {
		var m Message
		var sent, lat, done float64
		var outcome string
		var tenant []byte
		fields := bytes.Split(sc.Bytes(), []byte(","))
		if len(fields) != 8 {
			return nil, fmt.Errorf("%s: messages.csv line %d: %d fields, want 8", dir, line, len(fields))
		}
		tenant = fields[1]
		_, err := fmt.Sscanf(string(bytes.Join([][]byte{fields[0], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7]}, []byte(" "))),
			"%d %t %g %g %g %d %s", &m.Seq, &m.Poison, &sent, &lat, &done, &m.Deliveries, &outcome)
		if err != nil {
			return nil, fmt.Errorf("%s: messages.csv line %d: %w", dir, line, err)
		}
		m.Tenant, m.Outcome = string(tenant), Outcome(outcome)
		m.Sent, m.Latency, m.Done = fromMS(sent), fromMS(lat), fromMS(done)
		r.Messages = append(r.Messages, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	err = eachRow(dir, "cpu.csv", func(fields string) error {
		var c CPUSample
		var at float64
		if _, err := fmt.Sscanf(fields, "%g %d %d", &at, &c.Steal, &c.Total); err != nil {
			return err
		}
		c.At = time.Duration(at * float64(time.Second))
		r.CPU = append(r.CPU, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.QuietJudged = r.quietJudged() // as this release judges it
	if r.Scenario.Outage.For > 0 && !r.OutageEnd.IsZero() {
		r.Recovery = r.recovery() // as this release measures it
	}
	err = eachRow(dir, "queues.csv", func(fields string) error {
		var d DepthSample
		var at float64
		if _, err := fmt.Sscanf(fields, "%g %d %d %d %d", &at, &d.Live, &d.Overflow, &d.Backlog, &d.DLQ); err != nil {
			return err
		}
		d.At = time.Duration(at * float64(time.Second))
		r.Depths = append(r.Depths, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// eachRow calls row with each line of the CSV file dir/name after its
// header, commas made spaces for fmt.Sscanf; a missing file (a run
// written before it was) has none.
func eachRow(dir, name string, row func(fields string) error) error {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == 0 || line == "" {
			continue
		}
		if err := row(strings.ReplaceAll(line, ",", " ")); err != nil {
			return fmt.Errorf("%s: %s line %d: %w", dir, name, i+1, err)
		}
	}
	return nil
}

func fromMS(v float64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v * float64(time.Millisecond))
}
