package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// WriteChaosReport writes report.md and chaos.json (every run's result)
// into dir and returns the report's text.
func WriteChaosReport(dir string, rs []*ChaosResult, env Environment) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fairq chaos suite\n\n")
	commit := ""
	if env.Commit != "" {
		commit = fmt.Sprintf(" at commit %s", env.Commit)
	}
	fmt.Fprintf(&b, "Run on %s with `%s`; %s%s, %s.\n\n", env.Date.UTC().Format("2006-01-02 15:04 MST"), env.Command, env.Version, commit, env.Machine)
	writeChaosIntro(&b)
	WriteChaosTable(&b, rs)
	fmt.Fprintf(&b, "## Expectations\n\n")
	WriteChaosChecks(&b, rs)
	for _, r := range rs {
		writeChaosRun(&b, r)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "chaos.json"), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeChaosIntro(w io.Writer) {
	fmt.Fprint(w, "Each fault is a run of its own on fresh processes (redis-server, the fauxqs SQS emulator, "+
		"a `fairq gateway`, its `fairq worker`s and the application, the harness's sink) and a fresh queue prefix. "+
		"The load comes from a careful client: every message carries an Idempotency-Key of its own, and a 503, 429 "+
		"or transport error is answered by sending the same message with the same key again, after Retry-After or "+
		"a short backoff, for up to 30 s; a 200 replay counts as accepted.\n\n"+
		"*Accepted*: answered 202 or replayed. *Delivered*: the application answered 2xx at least once. "+
		"*Lost*: accepted and never delivered once the system drained (a dead letter is redriven at the end "+
		"so that it counts as delivered, and is counted as dead-lettered). "+
		"*Duplicates*: 2xx deliveries beyond a message's first, by the harness's own number (attribute lt-seq), "+
		"not by X-Aws-Sqsd-Msgid; *of 503'd/cut*: those of messages whose first send was answered 503 or failed "+
		"in transport. *5xx*: answers, every attempt counted. *RSS*: the largest VmRSS sampled every "+
		"200 ms (VmHWM, the kernel's own peak, in brackets). *>1 Msgid* and *>1 First-Received-At*: messages that "+
		"reached the application under more than one X-Aws-Sqsd-Msgid or X-Aws-Sqsd-First-Received-At.\n\n"+
		"The emulator keeps nothing across a real restart, so the SQS outage (sqs-down) cuts and refuses the "+
		"connections to it through a proxy while it keeps its queues, which is what a restart of SQS itself "+
		"would look like to fairq. Redis is taken away through a proxy too.\n\n")
}

// WriteChaosTable writes the summary table: a line per fault.
func WriteChaosTable(w io.Writer, rs []*ChaosResult) {
	fmt.Fprintln(w, "| fault | accepted | delivered | lost | duplicates | of 503'd/cut | 5xx | 503 p50 / max | gateway RSS max (HWM) | worker RSS max (HWM) | >1 Msgid | >1 First-Received-At | load avg | expectations |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		lat := "–"
		if r.Latency503.N > 0 {
			lat = fmtDur(r.Latency503.P50) + " / " + fmtDur(r.Latency503.Max)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d of %d | %d | %s | %s | %s | %d | %d | %s | %s |\n",
			r.Fault.Name, r.Accepted, r.Delivered, r.Lost, r.Duplicates, r.RetriedDuplicates, r.Retried, r.Answers5xx, lat,
			fmtPeak(r.Memory["gateway"]), fmtPeak(r.workerPeak()), r.SplitMsgid, r.SplitFirstReceived,
			r.LoadAvg[0]+"–"+r.LoadAvg[1], verdict(r))
	}
	fmt.Fprintln(w)
}

// verdict is "pass", or "FAIL" with the number of checks failed.
func verdict(r *ChaosResult) string {
	failed := 0
	for _, c := range r.Checks {
		if !c.Pass {
			failed++
		}
	}
	v := "pass"
	if failed > 0 {
		v = fmt.Sprintf("**FAIL** (%d of %d)", failed, len(r.Checks))
	}
	if !r.Fault.Expect.Enforced {
		v += ", not enforced"
	}
	return v
}

// workerPeak is the largest peak among the workers.
func (r *ChaosResult) workerPeak() MemPeak {
	var p MemPeak
	for role, m := range r.Memory {
		if strings.HasPrefix(role, "worker-") {
			p.RSS, p.HWM = max(p.RSS, m.RSS), max(p.HWM, m.HWM)
		}
	}
	return p
}

func fmtPeak(p MemPeak) string {
	if p.RSS == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s)", fmtBytes(p.RSS), fmtBytes(p.HWM))
}

// WriteChaosChecks writes every fault's checks.
func WriteChaosChecks(w io.Writer, rs []*ChaosResult) {
	fmt.Fprintln(w, "| fault | expectation | bound | measured | result | enforced by the short test |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rs {
		for _, c := range r.Checks {
			v := "pass"
			if !c.Pass {
				v = "**FAIL**"
			}
			enforced := "no"
			if r.Fault.Expect.Enforced || c.Always {
				enforced = "yes"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Fault.Name, c.Name, c.Bound, c.Measured, v, enforced)
		}
	}
	fmt.Fprintln(w)
}

// writeChaosRun writes one fault's section.
func writeChaosRun(w io.Writer, r *ChaosResult) {
	f := r.Fault
	fmt.Fprintf(w, "## %s: %s\n\n", f.Name, f.Title)
	if f.Repeat > 0 {
		fmt.Fprintf(w, "One worker (%d slots), visibility_timeout %s. %d rounds: SIGTERM the worker, start it again at once, "+
			"send one message %s after the start began, wait up to %s for its delivery.\n\n",
			f.Connections, fmtDur(f.Visibility), f.Repeat, fmtDur(f.SendAfter), fmtDur(f.Deliver))
	} else {
		fmt.Fprintf(w, "Load: %d tenants, %s messages/s in all, %s of work per message, for %s. "+
			"%d workers of %d slots; visibility_timeout %s, error_visibility_timeout %s, inactivity_timeout %s, backlog_age %s, redis.fail_open %t. "+
			"Fault from %s to %s into the load.\n\n",
			f.Tenants, num(f.Rate), fmtDur(f.Work), fmtDur(f.Duration), f.Workers, f.Connections,
			fmtDur(f.Visibility), fmtDur(f.ErrorVisibility), fmtDur(f.Inactivity), fmtDur(f.BacklogAge), !f.FailClosed,
			fmtDur(r.FaultStart), fmtDur(r.FaultEnd))
	}
	fmt.Fprintf(w, "Sent %d, accepted %d (%d by a replay), delivered %d, lost %d, dead-lettered %d; "+
		"%d duplicate deliveries, %d of them of the %d messages first answered 503 or cut in transport; "+
		"%d delivered that the client never saw accepted; %d pushes not answered 2xx by the application.",
		r.Sent, r.Accepted, r.Replayed, r.Delivered, r.Lost, r.DeadLettered,
		r.Duplicates, r.RetriedDuplicates, r.Retried, r.Unacknowledged, r.FailedPushes)
	if !r.Drained {
		fmt.Fprintf(w, " **The queues did not drain within %s: %d messages left.**", fmtDur(f.Drain), r.Leftover)
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, " %d messages not sent: the client had too many open.", r.Skipped)
	}
	if len(r.LostSeqs) > 0 {
		fmt.Fprintf(w, " Lost: %v.", r.LostSeqs)
	}
	fmt.Fprintf(w, "\n\nAnswers, every attempt: %s.", fmtCounts(r.Answers))
	if len(r.Refused) > 0 {
		fmt.Fprintf(w, " Given up on (last answer): %s.", fmtCounts(r.Refused))
	}
	fmt.Fprintf(w, " The slowest answer took %s.", fmtDur(r.SlowestAnswer))
	if r.Latency503.N > 0 {
		fmt.Fprintf(w, " The 503s took p50 %s, p99 %s, max %s.", fmtDur(r.Latency503.P50), fmtDur(r.Latency503.P99), fmtDur(r.Latency503.Max))
	}
	fmt.Fprintf(w, " Messages delivered under more than one Msgid: %d; more than one First-Received-At: %d; "+
		"with a Msgid other than their 202's id: %d.\n\n", r.SplitMsgid, r.SplitFirstReceived, r.ForeignMsgid)
	roles := make([]string, 0, len(r.Memory))
	for role := range r.Memory {
		roles = append(roles, role)
	}
	slices.Sort(roles)
	var mem []string
	for _, role := range roles {
		mem = append(mem, role+" "+fmtPeak(r.Memory[role]))
	}
	fmt.Fprintf(w, "Peak memory, VmRSS (VmHWM): %s.\n\n", strings.Join(mem, ", "))
	if sb := r.SlowBody; sb != nil {
		fmt.Fprintf(w, "%d connections opened in %s and held until %s; the gateway answered or closed %d of them before that",
			sb.Opened, fmtDur(sb.Holding-sb.Opening), fmtDur(sb.Closed), sb.Answered)
		if sb.Status != "" {
			fmt.Fprintf(w, " (first answer: `%s`)", sb.Status)
		}
		if sb.Aborted {
			fmt.Fprintf(w, "; **the attack was cut short when the gateway's RSS passed %s**", fmtBytes(f.AbortRSS))
		}
		if sb.Killed {
			fmt.Fprintf(w, "; **the gateway was killed when its RSS reached %s (bound %s) and started again, to spare the machine**",
				fmtBytes(sb.KilledAt), fmtBytes(f.KillRSS))
		}
		fmt.Fprintf(w, ".\n\n| gateway RSS before | max during | max after the close | %s after | VmHWM then | others' p50 / p99 before | during |\n|---|---|---|---|---|---|---|\n", fmtDur(f.After))
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s / %s | %s / %s |\n\n", fmtBytes(sb.RSSBefore), fmtBytes(sb.RSSMax), fmtBytes(sb.RSSMaxAfter),
			fmtBytes(sb.RSSAfter), fmtBytes(sb.HWMAfter), fmtDur(sb.Before.P50), fmtDur(sb.Before.P99), fmtDur(sb.Others.P50), fmtDur(sb.Others.P99))
	}
	if len(r.Trials) > 0 {
		fmt.Fprintln(w, "| round | worker restart | accepted | send to delivery | Receive-Count |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for i, t := range r.Trials {
			delay := fmtDur(t.Delay)
			if t.Delay < 0 {
				delay = "not within " + fmtDur(f.Deliver)
			}
			fmt.Fprintf(w, "| %d | %s | %t | %s | %d |\n", i+1, fmtDur(t.Restart), t.Accepted, delay, t.ReceiveCount)
		}
		fmt.Fprintln(w)
	}
}

// fmtCounts prints counts by name, the largest first.
func fmtCounts(m map[string]int) string {
	ks := sortedKeys(m)
	slices.SortStableFunc(ks, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
