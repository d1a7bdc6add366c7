package harness

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Done-when bounds of the experiment.
const (
	// NoisyFullBound: quiet tenants' p95 in full mode at most this times
	// their baseline.
	NoisyFullBound = 1.2
	// NoisySingleBound: in single-queue mode at least this times worse.
	NoisySingleBound = 5.0
	// JainBound: Jain's index over the quiet tenants' goodput, full mode.
	JainBound = 0.95
)

// Criterion is one Done-when check of the experiment.
type Criterion struct {
	Name     string
	Measured string
	// Pass is false when the check failed; Missing when its runs were not
	// made.
	Pass, Missing bool
}

// Criteria evaluates the Done-when checks over the scenarios run.
func Criteria(rs []*ScenarioResult) []Criterion {
	var cs []Criterion
	find := func(name string) *ScenarioResult {
		for _, r := range rs {
			if r.Scenario.Name == name {
				return r
			}
		}
		return nil
	}
	missing := func(name string) Criterion { return Criterion{Name: name, Missing: true, Measured: "not run"} }

	noisy := find(ScenarioNoisy)
	noisyLatency := func(name string, m Mode, pass func(x float64) bool) Criterion {
		if noisy == nil || noisy.Runs[m] == nil || noisy.Baselines[m] == nil {
			return missing(name)
		}
		r, b := noisy.Runs[m].QuietJudged, noisy.Baselines[m].QuietJudged
		return latencyCriterion(name, vsText(r.P95, b.P95), []Judged{r}, []Judged{b}, pass(float64(r.P95)/float64(max(b.P95, time.Microsecond))))
	}
	cs = append(cs, noisyLatency(fmt.Sprintf("Noisy neighbour: quiet tenants' p95 in full mode ≤ %g× their baseline", NoisyFullBound), ModeFull,
		func(x float64) bool { return x <= NoisyFullBound }))
	cs = append(cs, noisyLatency(fmt.Sprintf("Noisy neighbour: single-queue mode ≥ %g× worse than its baseline", NoisySingleBound), ModeSingle,
		func(x float64) bool { return x >= NoisySingleBound }))
	name := fmt.Sprintf("Noisy neighbour: Jain's index over quiet tenants' goodput ≥ %g in full mode", JainBound)
	if noisy != nil && noisy.Runs[ModeFull] != nil {
		j := noisy.Runs[ModeFull].Jain
		cs = append(cs, Criterion{Name: name, Pass: j >= JainBound, Measured: fmt.Sprintf("%.3f", j)})
	} else {
		cs = append(cs, missing(name))
	}

	out := find(ScenarioOutage)
	rec := func(m Mode) *Result {
		if out == nil || out.Runs[m] == nil || out.Runs[m].Recovery == nil {
			return nil
		}
		return out.Runs[m]
	}
	name = fmt.Sprintf("Outage: full mode serves new messages at baseline latency within %v of recovery", FreshAfter)
	if r := rec(ModeFull); r != nil {
		cs = append(cs, recoveryCriterion(name, r.Recovery, fresh(r.Recovery)))
	} else {
		cs = append(cs, missing(name))
	}
	name = "Outage: full mode drains the backlog behind the new messages while the load goes on"
	if r := rec(ModeFull); r != nil {
		rc := r.Recovery
		cs = append(cs, Criterion{Name: name, Pass: rc.BacklogClearedInLoad, Measured: backlogText(r)})
	} else {
		cs = append(cs, missing(name))
	}
	name = "Outage: single-queue mode does not"
	if r := rec(ModeSingle); r != nil {
		cs = append(cs, recoveryCriterion(name, r.Recovery, !fresh(r.Recovery)))
	} else {
		cs = append(cs, missing(name))
	}

	lost, runs, balanced := 0, 0, true
	var dups []string
	for _, sr := range rs {
		for _, r := range sr.all() {
			runs++
			lost += r.Accounting.Lost
			balanced = balanced && r.Accounting.Balanced() && r.Drained
			if r.Accounting.Duplicates > 0 {
				dups = append(dups, fmt.Sprintf("%d in %s/%s", r.Accounting.Duplicates, sr.Scenario.Name, r.Mode))
			}
		}
	}
	d := "no duplicates"
	if len(dups) > 0 {
		d = "duplicates: " + strings.Join(dups, ", ")
	}
	cs = append(cs, Criterion{Name: "Accounting: every accepted message processed or dead-lettered, lost = 0, in every run",
		Pass: balanced && runs > 0, Missing: runs == 0, Measured: fmt.Sprintf("%d runs, %d lost; %s", runs, lost, d)})
	return cs
}

// fresh reports whether messages sent from FreshAfter after the restart
// were served at baseline latency: their p95 within the threshold.
func fresh(rc *Recovery) bool { return rc.FreshP95 >= 0 && rc.FreshP95 <= rc.Threshold }

// latencyCriterion returns criterion name, met by pass, judged by the p95
// of the windows got against that of the windows want and told by head.
// A window with too many messages left out (Judged.Void) leaves it not
// judged. What was left out is told, and the ratio with it.
func latencyCriterion(name, head string, got, want []Judged, pass bool) Criterion {
	all, baseAll := meanJudged(got, true), meanJudged(want, true)
	with := "with every message: " + vsText(all, baseAll)
	js := append(slices.Clone(got), want...)
	for _, j := range js {
		if j.Kept+j.LeftOut == 0 {
			return Criterion{Name: name, Missing: true, Measured: "not judged: a window has no messages; " + with}
		}
		if j.Void() {
			return Criterion{Name: name, Missing: true, Measured: fmt.Sprintf("not judged: %d of %d messages of a window sent in seconds of ≥%.0f%% CPU steal, more than %.0f%%; %s",
				j.LeftOut, j.Kept+j.LeftOut, 100*StealLeaveOut, 100*LeftOutMost, with)}
		}
	}
	if n := leftOutNote(js...); n != "" {
		head += fmt.Sprintf(" (%s; %s)", n, with)
	}
	return Criterion{Name: name, Pass: pass, Measured: head}
}

// recoveryCriterion returns criterion name of an outage's latency, met
// by pass, told by recoveryText.
func recoveryCriterion(name string, rc *Recovery, pass bool) Criterion {
	return latencyCriterion(name, recoveryText(rc), []Judged{rc.Fresh}, []Judged{rc.Before}, pass)
}

// meanJudged returns the mean of the windows' p95s: of every message
// when all is set, otherwise of the messages kept.
func meanJudged(js []Judged, all bool) time.Duration {
	var sum time.Duration
	for _, j := range js {
		if all {
			sum += j.All
		} else {
			sum += j.P95
		}
	}
	return sum / time.Duration(max(len(js), 1))
}

// vsText compares a p95 with its reference: "4.4 ms vs 4.0 ms: 1.10×".
func vsText(got, want time.Duration) string {
	return fmt.Sprintf("%s vs %s: %s", fmtDur(got), fmtDur(want), fmtRatio(float64(got)/float64(max(want, time.Microsecond))))
}

func recoveryText(rc *Recovery) string {
	text := fmt.Sprintf("p95 of messages sent from %v after the restart to the end of the load: %s, %s the %s before the outage",
		FreshAfter, fmtDur(rc.FreshP95), fmtRatio(float64(rc.FreshP95)/float64(max(rc.Baseline, time.Microsecond))), fmtDur(rc.Baseline))
	if rc.RecoveredAfter < 0 {
		return text + fmt.Sprintf("; no %v of send time after the restart at baseline (p95 ≤ %s)", RecoveryWindow, fmtDur(rc.Threshold))
	}
	return text + fmt.Sprintf("; the first %v of send time at baseline (p95 ≤ %s) began %v after the restart", RecoveryWindow, fmtDur(rc.Threshold), rc.RecoveredAfter)
}

func backlogText(r *Result) string {
	rc := r.Recovery
	load := r.Scenario.Duration - r.since(r.OutageEnd)
	if rc.BacklogCleared < 0 {
		return "no message sent during the outage was delivered"
	}
	if rc.BacklogClearedInLoad {
		return fmt.Sprintf("the last message sent during the outage started %s after the restart, under load", fmtDur(rc.BacklogCleared))
	}
	return fmt.Sprintf("the last message sent during the outage started %s after the restart, %s after the load ended",
		fmtDur(rc.BacklogCleared), fmtDur(rc.BacklogCleared-load))
}

// all returns the runs, baselines first, in mode order.
func (s *ScenarioResult) all() []*Result {
	var rs []*Result
	for _, m := range Modes {
		if b := s.Baselines[m]; b != nil {
			rs = append(rs, b)
		}
		if r := s.Runs[m]; r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// modes returns the modes run, in order.
func (s *ScenarioResult) modes() []Mode {
	var ms []Mode
	for _, m := range Modes {
		if s.Runs[m] != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// baselineP95 returns the quiet tenants' reference p95 in mode m: the
// baseline run's, or for an outage the p95 before it; false if none.
func (s *ScenarioResult) baselineP95(m Mode) (time.Duration, bool) {
	if b := s.Baselines[m]; b != nil {
		return b.Quiet.Latency.P95, true
	}
	if r := s.Runs[m]; r != nil && r.Recovery != nil {
		return r.Recovery.Baseline, true
	}
	return 0, false
}

// WriteMarkdown writes the scenario's section of the report: its setup,
// one row per mode, the tenants one by one, and the chart's file name.
func (s *ScenarioResult) WriteMarkdown(w io.Writer, chart string) {
	sc := s.Scenario
	ms := s.modes()
	if len(ms) == 0 {
		return
	}
	first := s.Runs[ms[0]]
	fmt.Fprintf(w, "### %s\n\n", sc.Title)
	fmt.Fprintf(w, "%s\n\n", setupText(sc, first.Backend, 1))
	fmt.Fprintln(w, "| mode | quiet p50 | quiet p95 | quiet p99 | baseline p95 | p95 ÷ baseline | worst quiet tenant p95 | others: accepted/s, p95 | Jain (quiet goodput) | accepted | processed | dead-lettered | lost | duplicates |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range ms {
		r := s.Runs[m]
		q := r.Quiet.Latency
		base, ratio := "–", "–"
		if b, ok := s.baselineP95(m); ok {
			base, ratio = fmtDur(b), fmtRatio(float64(q.P95)/float64(max(b, time.Microsecond)))
		}
		worst := slices.MaxFunc(quietStats(r), func(a, b TenantStats) int { return int(a.Latency.P95 - b.Latency.P95) })
		var others []string
		for _, t := range r.Tenants {
			if t.Role != RoleQuiet {
				others = append(others, fmt.Sprintf("%s: %.0f/s, %s", t.ID, t.Accepted, fmtDur(t.Latency.P95)))
			}
		}
		if len(others) == 0 {
			others = []string{"–"}
		}
		a := r.Accounting
		title := m.Title()
		if r.Disturbed() {
			title += " ⚠"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s (%s) | %s | %.3f | %d | %d | %d | %d | %d |\n",
			title, fmtDur(q.P50), fmtDur(q.P95), fmtDur(q.P99), base, ratio, fmtDur(worst.Latency.P95), worst.ID,
			strings.Join(others, "; "), r.Jain, a.Accepted, a.Processed, a.DeadLettered, a.Lost, a.Duplicates)
	}
	fmt.Fprintln(w)
	if sc.Outage.For > 0 {
		fmt.Fprintf(w, "| mode | p95 before the outage | new messages at baseline latency (first %v of send time with p95 ≤ %g× before) | p95 of messages sent ≥ %v after the restart | messages sent during the outage all started |\n",
			RecoveryWindow, RecoveryFactor, FreshAfter)
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, m := range ms {
			rc := s.Runs[m].Recovery
			if rc == nil {
				continue
			}
			after := "not by the end of the load"
			if rc.RecoveredAfter >= 0 {
				after = fmt.Sprintf("from those sent %v after the restart", rc.RecoveredAfter)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.Title(), fmtDur(rc.Baseline), after, fmtDur(rc.FreshP95), backlogText(s.Runs[m]))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "![%s](%s)\n\n", sc.Title, chart)
	fmt.Fprintln(w, "<details><summary>Each tenant: shard, offered, accepted and goodput (msg/s), p95 latency</summary>")
	fmt.Fprintln(w)
	head := "| tenant | role |"
	rule := "|---|---|"
	for _, m := range ms {
		head += fmt.Sprintf(" %s: shard, offered / accepted / goodput, p95 |", m)
		rule += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for i, t := range sc.Tenants {
		row := fmt.Sprintf("| %s | %s |", t.ID, t.Role)
		for _, m := range ms {
			st := s.Runs[m].Tenants[i]
			row += fmt.Sprintf(" %s, %.1f / %.1f / %.1f, %s |", st.Shard, st.Offered, st.Accepted, st.Goodput, fmtDur(st.Latency.P95))
		}
		fmt.Fprintln(w, row)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "</details>")
	fmt.Fprintln(w)
	var notes []string
	for _, r := range s.all() {
		kind := string(r.Mode)
		if r.Baseline {
			kind += " baseline"
		}
		if len(r.Accounting.Rejected) > 0 {
			var rej []string
			for _, k := range sortedKeys(r.Accounting.Rejected) {
				rej = append(rej, fmt.Sprintf("%d × %s", r.Accounting.Rejected[k], k))
			}
			notes = append(notes, fmt.Sprintf("%s: refused at the front door: %s", kind, strings.Join(rej, ", ")))
		}
		if a := r.Accounting; a.PoisonAccepted > 0 || a.DeadLettered > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d poison messages accepted, %d of them dead-lettered; %d other messages dead-lettered; the dead-letter queue held %d",
				kind, a.PoisonAccepted, a.PoisonDeadLettered, a.GoodDeadLettered, r.DLQDepth))
		}
		if !r.Drained {
			notes = append(notes, fmt.Sprintf("%s: the queues still held %d messages %v after the load (counted as lost)", kind, r.Leftover, r.Scenario.Drain))
		}
		note := fmt.Sprintf("%s: sends late by p99 %s (max %s); load average %s → %s",
			kind, fmtDur(r.Late.P99), fmtDur(r.Late.Max), orDash(r.LoadAvg[0]), orDash(r.LoadAvg[1]))
		if s := r.stealNote(); s != "" {
			note += "; " + s
		}
		if s := r.CPUUse.text(); s != "" {
			note += "; " + s
		}
		if r.Disturbed() {
			note = "⚠ " + note + fmt.Sprintf(": disturbed (late by more than %v), other work on the machine held the harness up", DisturbedLate)
		}
		notes = append(notes, note)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
}

// setupText describes a scenario's load and system in a paragraph; gateways
// is the number of gateway processes on sqs.
func setupText(sc Scenario, backend string, gateways int) string {
	var groups []string
	for _, g := range groupTenants(sc.Tenants) {
		desc := fmt.Sprintf("%d %s tenant", g.n, g.t.Role)
		if g.n > 1 {
			desc += "s"
		}
		desc += fmt.Sprintf(" at %s msg/s, %s of work per message", num(g.t.Rate), fmtDur(g.t.Work))
		switch {
		case g.t.PoisonEvery == 1:
			desc += ", every message poison"
		case g.t.PoisonEvery > 1:
			desc += fmt.Sprintf(", every %dth message poison", g.t.PoisonEvery)
		}
		groups = append(groups, desc)
	}
	proc := "one `fairq dev` process (memory backend)"
	if backend == backendSQS {
		proc = fmt.Sprintf("a `fairq gateway` and %d `fairq worker` process(es) on the fauxqs SQS emulator with Redis", sc.Workers)
		if gateways > 1 {
			proc = fmt.Sprintf("%d `fairq gateway` and %d `fairq worker` processes on the fauxqs SQS emulator with Redis", gateways, sc.Workers)
		}
	}
	text := fmt.Sprintf("Load: %s; %v of load, the first %v left out of the statistics. System: %s, worker.connections %d, max_retries %d. "+
		"Every mode: admission unlimited in rate, backpressure soft_backlog %d / max_backlog %d per tenant. "+
		"Full mode: process_rate %s/s, process_burst %d, concurrency %d per tenant, backlog_age %v.",
		strings.Join(groups, "; "), sc.Duration, sc.Warmup, proc, sc.Connections, sc.MaxRetries,
		sc.SoftBacklog, sc.MaxBacklog, num(sc.Limits.ProcessRate), sc.Limits.ProcessBurst, sc.Limits.Concurrency, sc.BacklogAge)
	if sc.Outage.For > 0 {
		text += fmt.Sprintf(" The workers stop (SIGTERM) %v into the load and start again %v later.", sc.Outage.At, sc.Outage.For)
	}
	if sc.Baseline {
		text += " Baseline: the same mode with the quiet tenants only."
	} else if sc.Outage.For > 0 {
		text += " Baseline: the same run before the outage."
	}
	return text
}

type tenantGroup struct {
	t Tenant
	n int
}

// groupTenants groups tenants that differ only in id.
func groupTenants(ts []Tenant) []tenantGroup {
	var gs []tenantGroup
	for _, t := range ts {
		k := t
		k.ID = ""
		if len(gs) > 0 && gs[len(gs)-1].t == k {
			gs[len(gs)-1].n++
			continue
		}
		gs = append(gs, tenantGroup{t: k, n: 1})
	}
	return gs
}

func quietStats(r *Result) []TenantStats {
	var qs []TenantStats
	for _, t := range r.Tenants {
		if t.Role == RoleQuiet {
			qs = append(qs, t)
		}
	}
	if len(qs) == 0 {
		qs = append(qs, TenantStats{})
	}
	return qs
}

// WriteCriteria writes the Done-when checks as a table.
func WriteCriteria(w io.Writer, cs []Criterion) {
	fmt.Fprintln(w, "| criterion | measured | result |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range cs {
		verdict := "**pass**"
		switch {
		case c.Missing:
			verdict = "not run"
		case !c.Pass:
			verdict = "**FAIL**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, c.Measured, verdict)
	}
	fmt.Fprintln(w)
}

// fmtDur formats a latency for people: 3.2 ms, 52 ms, 1.42 s, 2.1 min.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "–"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f min", d.Minutes())
}

func fmtRatio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// num formats a rate without trailing zeros.
func num(x float64) string {
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%g", x)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
