package harness

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FleetResult gathers a scenario's fleet run on one Redis topology and its
// baseline (the quiet tenants alone on the same fleet), if it has one, run
// before it and, if BaselineAfter is set, again after it.
type FleetResult struct {
	Scenario Scenario
	// Redis is RedisSingle or RedisCluster.
	Redis    string
	Run      *Result
	Baseline *Result
	// BaselineAfter is the baseline run again after Run: on a shared
	// machine the same run's p95 drifts from one minute to the next, and
	// a baseline on each side of the run shares the drift out between
	// them rather than leave it all to the noisy tenant.
	BaselineAfter *Result
	// Control is the contention control, if it ran: the baseline once
	// more, beside a burn process burning about the CPU the run added
	// (ControlCores). It is not judged: the report sets its p95 beside the
	// run's, to tell how much of the quiet tenants' slowdown the machine's
	// busier cores cause on their own.
	Control *Result
}

// ControlCores returns the CPU, in cores, that fr's contention control is
// to burn: what the run's processes used over the load beyond the mean of
// the baselines', the clients' apart (they run at idle priority, where the
// burn process runs at normal priority), to two decimals; 0 where a run's
// CPU use was not read or the run added none.
func ControlCores(fr *FleetResult) float64 {
	bs := fr.baselines()
	if fr.Run == nil || fr.Run.CPUUse == nil || fr.Run.CPUUse.Seconds <= 0 || len(bs) == 0 {
		return 0
	}
	busy := func(u *CPUUse) float64 {
		var sum float64
		for role, s := range u.ByRole {
			if role != roleClients {
				sum += s
			}
		}
		return sum / u.Seconds
	}
	var base float64
	for _, b := range bs {
		if b.CPUUse == nil || b.CPUUse.Seconds <= 0 {
			return 0
		}
		base += busy(b.CPUUse) / float64(len(bs))
	}
	return max(0, math.Round(100*(busy(fr.Run.CPUUse)-base))/100)
}

// runs returns the runs of fr in the order they ran.
func (fr *FleetResult) runs() []*Result {
	rs := []*Result{fr.Run}
	if fr.Baseline != nil {
		rs = []*Result{fr.Baseline, fr.Run}
	}
	for _, r := range []*Result{fr.BaselineAfter, fr.Control} {
		if r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// baselines returns the baselines that ran, the one before the run first.
func (fr *FleetResult) baselines() []*Result {
	var bs []*Result
	for _, b := range []*Result{fr.Baseline, fr.BaselineAfter} {
		if b != nil {
			bs = append(bs, b)
		}
	}
	return bs
}

// quietJudged returns the quiet tenants' judged latencies of runs rs.
func quietJudged(rs []*Result) []Judged {
	js := make([]Judged, len(rs))
	for i, r := range rs {
		js[i] = r.QuietJudged
	}
	return js
}

// baselineP95 returns the p95 tenant id's is compared with in the
// tenants' table: the mean of the baselines', and false when no baseline
// ran or none had the tenant. (The latency criterion judges the quiet
// tenants' QuietJudged.)
func (fr *FleetResult) baselineP95(id string) (time.Duration, bool) {
	var sum time.Duration
	n := 0
	for _, b := range fr.baselines() {
		for _, t := range b.Tenants {
			if t.ID == id {
				sum += t.Latency.P95
				n++
			}
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / time.Duration(n), true
}

// runKind names a run of a FleetResult in the report.
func (fr *FleetResult) runKind(r *Result) string {
	switch r {
	case fr.Baseline:
		return "baseline"
	case fr.BaselineAfter:
		return "baseline after"
	case fr.Control:
		return "control"
	}
	return "run"
}

// FleetChecks are the criteria a fleet run is held to:
//
//   - concurrency: no tenant ever had more pushes in progress at the
//     application than its concurrency, counted by the sink over the pushes
//     of every worker;
//   - rate: a tenant held back by its process_rate (RateBound) starts
//     messages within RateTolerance of it, its process_burst allowed on
//     top (withinRate);
//   - latency: the quiet tenants' p95 within NoisyFullBound times their
//     baseline (the quiet tenants alone on the same fleet; for an outage,
//     the messages sent before it against those sent from FreshAfter after
//     the restart);
//   - nothing lost: every accepted message delivered at least once, in the
//     run and its baseline.
func FleetChecks(fr *FleetResult) []Criterion {
	r, sc := fr.Run, fr.Run.Scenario
	var cs []Criterion

	name := fmt.Sprintf("Concurrency: no tenant above %d pushes in progress at the application at once, over the %d workers", sc.Limits.Concurrency, sc.Workers)
	if ls := r.LimitsSeen; ls != nil && len(ls.MaxInFlight) > 0 {
		id, most := peakTenant(ls.MaxInFlight)
		var over []string
		for _, t := range sc.Tenants {
			if n := ls.MaxInFlight[t.ID]; n > int64(sc.Limits.Concurrency) {
				over = append(over, fmt.Sprintf("%s %d", t.ID, n))
			}
		}
		m := fmt.Sprintf("most at once: %d (%s)", most, id)
		if len(over) > 0 {
			m += "; above the limit: " + strings.Join(over, ", ")
		}
		cs = append(cs, Criterion{Name: name, Pass: len(over) == 0, Measured: m})
	} else {
		cs = append(cs, Criterion{Name: name, Missing: true, Measured: "not measured"})
	}

	name = fmt.Sprintf("Rate: a rate-bound tenant's pushes within %.0f%% of its process_rate (%s/s), its process_burst (%d) allowed on top", 100*RateTolerance, num(sc.Limits.ProcessRate), sc.Limits.ProcessBurst)
	if ls := r.LimitsSeen; ls != nil && len(ls.Rates) > 0 {
		pass := true
		var ms []string
		for _, rb := range ls.Rates {
			pass = pass && withinRate(rb, sc.Limits)
			ms = append(ms, fmt.Sprintf("%s %.1f/s over %d s", rb.Tenant, rb.Rate, rb.Seconds))
		}
		cs = append(cs, Criterion{Name: name, Pass: pass, Measured: strings.Join(ms, "; ")})
	} else {
		cs = append(cs, Criterion{Name: name, Missing: true, Measured: "no tenant was rate-bound"})
	}

	switch {
	case sc.Outage.For > 0:
		name = fmt.Sprintf("Latency: quiet tenants' p95 from %v after the restart ≤ %g× before the outage", FreshAfter, RecoveryFactor)
		if rc := r.Recovery; rc != nil {
			cs = append(cs, latencyCriterion(name, vsText(rc.FreshP95, rc.Baseline), []Judged{rc.Fresh}, []Judged{rc.Before}, fresh(rc)))
		} else {
			cs = append(cs, Criterion{Name: name, Missing: true, Measured: "no outage measured"})
		}
	case sc.Baseline:
		name = fmt.Sprintf("Latency: quiet tenants' p95 ≤ %g× their baseline (the quiet tenants alone on the same fleet; with a baseline on each side of the run, the mean of the two)", NoisyFullBound)
		if bs := fr.baselines(); len(bs) > 0 {
			want := quietJudged(bs)
			got, base := r.QuietJudged.P95, meanJudged(want, false)
			x := float64(got) / float64(max(base, time.Microsecond))
			m := fmt.Sprintf("%s vs %s", fmtDur(got), fmtDur(base))
			if len(want) == 2 {
				m += fmt.Sprintf(" (before %s, after %s)", fmtDur(want[0].P95), fmtDur(want[1].P95))
			}
			cs = append(cs, latencyCriterion(name, m+": "+fmtRatio(x), []Judged{r.QuietJudged}, want, x <= NoisyFullBound))
		} else {
			cs = append(cs, Criterion{Name: name, Missing: true, Measured: "baseline not run"})
		}
	}

	pass := true
	var ms []string
	for _, run := range fr.runs() {
		a := run.Accounting
		pass = pass && a.Lost == 0 && run.Drained && a.Accepted > 0
		m := fmt.Sprintf("%s: %d accepted, %d delivered, %d lost, %d duplicates", fr.runKind(run), a.Accepted, a.Processed+a.DeadLettered+a.Both, a.Lost, a.Duplicates)
		if !run.Drained {
			m += fmt.Sprintf(", %d still queued after %v", run.Leftover, run.Scenario.Drain)
		}
		ms = append(ms, m)
	}
	cs = append(cs, Criterion{Name: "Nothing lost: every accepted (202) message delivered at least once", Pass: pass, Measured: strings.Join(ms, "; ")})
	return cs
}

// WriteFleetReport writes fleet.md into dir, a section per fleet run with
// its FleetChecks, and returns its text.
func WriteFleetReport(dir string, frs []*FleetResult, env Environment) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fairq fairness experiment: a fleet of %d gateways and %d workers\n\n", FleetGateways, FleetWorkers)
	fmt.Fprintf(&b, "Run on %s with `%s`; %s, %s.\n\n", env.Date.UTC().Format("2006-01-02 15:04 MST"), env.Command, env.Version, env.Machine)
	fmt.Fprintf(&b, "Every fairq process is separate: %d `fairq gateway` processes, the load sent to each in turn, and %d `fairq worker` processes "+
		"pushing to one application, on the fauxqs SQS emulator and one Redis, a single node or a %d-master Redis Cluster. "+
		"The application counts each tenant's pushes in progress across all the workers. A tenant is rate-bound in a second when at its start at least "+
		"process_rate of its accepted messages waited for their first push and at its end one still did; the first second of each such stretch "+
		"(when process_burst may be spent), the warmup and the outage are left out. "+
		"The latency criteria leave out the messages sent in a second in which the hypervisor took %.0f%% of the CPU or more (CPU steal), "+
		"and are not judged where that is more than %.0f%% of a window's.\n\n", FleetGateways, FleetWorkers, clusterMasters, 100*StealLeaveOut, 100*LeftOutMost)
	for _, fr := range frs {
		writeFleetRun(&b, fr)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.md"), b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// clusterMasters is the number of masters of a fleet run's Redis Cluster.
const clusterMasters = 3

// wherePartsRan says where a run's load was sent from and its pushes
// answered.
func wherePartsRan(r *Result) string {
	clients, app := "the harness's process", "the harness's process"
	if r.ClientsProcess {
		clients = "a clients process of its own under SCHED_IDLE (the cores the fleet leaves idle)"
	}
	if r.AppProcess {
		app = "an application process of its own"
	}
	return "The load was sent from " + clients + "; the pushes were answered by " + app + "."
}

// controlText tells what fr's contention control measured, or nothing
// when it did not run.
func controlText(fr *FleetResult) string {
	c := fr.Control
	bs := fr.baselines()
	if c == nil || len(bs) == 0 {
		return ""
	}
	burnt := "–"
	if u := c.CPUUse; u != nil && u.Seconds > 0 {
		burnt = fmt.Sprintf("%.2f", u.ByRole[roleBurner]/u.Seconds)
	}
	base := max(meanJudged(quietJudged(bs), false), time.Microsecond)
	return fmt.Sprintf("Contention control: the quiet tenants alone once more, beside a process burning %.2f cores (it burnt %s) in bursts of at most %v at normal priority, "+
		"the CPU the run's processes used beyond the baselines' (the clients' apart), sharing nothing with fairq but the cores: their p95 was %s, %s the baselines' %s, "+
		"where the run with the noisy tenant had %s, %s.",
		c.Burn, burnt, burstMax, fmtDur(c.QuietJudged.P95), fmtRatio(float64(c.QuietJudged.P95)/float64(base)), fmtDur(base),
		fmtDur(fr.Run.QuietJudged.P95), fmtRatio(float64(fr.Run.QuietJudged.P95)/float64(base)))
}

// writeFleetRun writes one fleet run's section: its setup, its checks
// (met or not met), and each tenant's figures.
func writeFleetRun(w io.Writer, fr *FleetResult) {
	r := fr.Run
	sc := r.Scenario
	topo := "one Redis node"
	if fr.Redis == RedisCluster {
		topo = fmt.Sprintf("a %d-master Redis Cluster", clusterMasters)
	}
	fmt.Fprintf(w, "### %s, %s\n\n", sc.Title, topo)
	fmt.Fprintf(w, "%s %s\n\n", setupText(sc, r.Backend, r.Gateways), wherePartsRan(r))
	var split []string
	for i, n := range r.GatewayAccepted {
		split = append(split, fmt.Sprintf("gateway %d: %d", i+1, n))
	}
	fmt.Fprintf(w, "Accepted by gateway: %s. ", strings.Join(split, ", "))
	for _, run := range fr.runs() {
		kind := fr.runKind(run)
		fmt.Fprintf(w, "%s%s: sends late by p99 %s, load average %s → %s", strings.ToUpper(kind[:1]), kind[1:], fmtDur(run.Late.P99), orDash(run.LoadAvg[0]), orDash(run.LoadAvg[1]))
		if s := run.stealNote(); s != "" {
			fmt.Fprintf(w, ", %s", s)
		}
		if s := run.CPUUse.text(); s != "" {
			fmt.Fprintf(w, "; %s", s)
		}
		fmt.Fprint(w, ". ")
	}
	if b, a := fr.Baseline, fr.BaselineAfter; b != nil && a != nil {
		fmt.Fprintf(w, "The quiet tenants' p95, alone both times, was %s after the run and %s before it: %s, the machine's drift over the experiment.",
			fmtDur(a.Quiet.Latency.P95), fmtDur(b.Quiet.Latency.P95), fmtRatio(float64(a.Quiet.Latency.P95)/float64(max(b.Quiet.Latency.P95, time.Microsecond))))
	}
	if s := controlText(fr); s != "" {
		fmt.Fprint(w, " "+s)
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintln(w, "| criterion | measured | result |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range FleetChecks(fr) {
		verdict := "met"
		switch {
		case c.Missing:
			verdict = "not measured"
		case !c.Pass:
			verdict = "**not met**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, c.Measured, verdict)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| tenant | role | offered / accepted / goodput (msg/s) | p95 | baseline p95 | most in progress at once | rate-bound: pushes/s over seconds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, t := range r.Tenants {
		base := "–"
		if p95, ok := fr.baselineP95(t.ID); ok {
			base = fmtDur(p95)
		}
		peak, rate := "–", "–"
		if ls := r.LimitsSeen; ls != nil {
			peak = fmt.Sprint(ls.MaxInFlight[t.ID])
			for _, rb := range ls.Rates {
				if rb.Tenant == t.ID {
					rate = fmt.Sprintf("%.1f over %d s", rb.Rate, rb.Seconds)
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %.1f / %.1f / %.1f | %s | %s | %s | %s |\n", t.ID, t.Role, t.Offered, t.Accepted, t.Goodput,
			fmtDur(t.Latency.P95), base, peak, rate)
	}
	fmt.Fprintln(w)
	if len(r.Accounting.Rejected) > 0 {
		var rej []string
		for _, k := range sortedKeys(r.Accounting.Rejected) {
			rej = append(rej, fmt.Sprintf("%d × %s", r.Accounting.Rejected[k], k))
		}
		fmt.Fprintf(w, "Refused at the front door: %s.\n\n", strings.Join(rej, ", "))
	}
}
