package harness

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FleetResult gathers a scenario's fleet run on one Redis topology and its
// baseline (the quiet tenants alone on the same fleet), if it has one.
type FleetResult struct {
	Scenario Scenario
	// Redis is RedisSingle or RedisCluster.
	Redis    string
	Run      *Result
	Baseline *Result
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
			cs = append(cs, Criterion{Name: name, Pass: fresh(rc),
				Measured: fmt.Sprintf("%s vs %s: %s", fmtDur(rc.FreshP95), fmtDur(rc.Baseline), fmtRatio(float64(rc.FreshP95)/float64(max(rc.Baseline, time.Microsecond))))})
		} else {
			cs = append(cs, Criterion{Name: name, Missing: true, Measured: "no outage measured"})
		}
	case sc.Baseline:
		name = fmt.Sprintf("Latency: quiet tenants' p95 ≤ %g× their baseline (the quiet tenants alone on the same fleet)", NoisyFullBound)
		if b := fr.Baseline; b != nil {
			x := float64(r.Quiet.Latency.P95) / float64(max(b.Quiet.Latency.P95, time.Microsecond))
			cs = append(cs, Criterion{Name: name, Pass: x <= NoisyFullBound,
				Measured: fmt.Sprintf("%s vs %s: %s", fmtDur(r.Quiet.Latency.P95), fmtDur(b.Quiet.Latency.P95), fmtRatio(x))})
		} else {
			cs = append(cs, Criterion{Name: name, Missing: true, Measured: "baseline not run"})
		}
	}

	pass := true
	var ms []string
	for _, run := range []*Result{fr.Baseline, r} {
		if run == nil {
			continue
		}
		a := run.Accounting
		pass = pass && a.Lost == 0 && run.Drained && a.Accepted > 0
		kind := "run"
		if run.Baseline {
			kind = "baseline"
		}
		m := fmt.Sprintf("%s: %d accepted, %d delivered, %d lost, %d duplicates", kind, a.Accepted, a.Processed+a.DeadLettered+a.Both, a.Lost, a.Duplicates)
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
		"(when process_burst may be spent), the warmup and the outage are left out.\n\n", FleetGateways, FleetWorkers, clusterMasters)
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

// writeFleetRun writes one fleet run's section: its setup, its checks
// (met or not met), and each tenant's figures.
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
	for _, run := range []*Result{fr.Baseline, r} {
		if run == nil {
			continue
		}
		kind := "Run"
		if run.Baseline {
			kind = "Baseline"
		}
		fmt.Fprintf(w, "%s: sends late by p99 %s, load average %s → %s. ", kind, fmtDur(run.Late.P99), orDash(run.LoadAvg[0]), orDash(run.LoadAvg[1]))
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
		if fr.Baseline != nil {
			for _, bt := range fr.Baseline.Tenants {
				if bt.ID == t.ID {
					base = fmtDur(bt.Latency.P95)
				}
			}
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
