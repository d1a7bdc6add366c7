package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ChaosResult is what happened in one chaos run.
type ChaosResult struct {
	Fault Fault `json:"fault"`
	// Start is when the load began; durations below are since then.
	Start time.Time `json:"start"`
	// FaultStart and FaultEnd bracket the fault: from its injection to
	// its end (the restarted process ready, the service back).
	FaultStart time.Duration `json:"fault_start"`
	FaultEnd   time.Duration `json:"fault_end"`
	// LoadAvg is the machine's 1-minute load average at the start and the
	// end of the load.
	LoadAvg [2]string `json:"load_avg"`
	// Drained reports whether every queue emptied within Fault.Drain;
	// Leftover counts the messages still queued then. DLQDepth is the
	// dead-letter queue's depth after the drain, redriven so that the
	// sink could name them.
	Drained  bool `json:"drained"`
	Leftover int  `json:"leftover"`
	DLQDepth int  `json:"dlq_depth"`
	// Skipped counts messages the client did not send because it had too
	// many open.
	Skipped int64 `json:"skipped"`

	// Filled by analyse.

	// Sent counts messages; Accepted those answered 202 (or a replay of
	// one); Delivered the accepted ones the application answered 2xx at
	// least once; Lost the others. DeadLettered counts the accepted
	// messages that went through the dead-letter queue.
	Sent         int `json:"sent"`
	Accepted     int `json:"accepted"`
	Delivered    int `json:"delivered"`
	Lost         int `json:"lost"`
	DeadLettered int `json:"dead_lettered"`
	// Refused counts the messages not accepted by their last answer
	// ("503 unavailable", "transport error"): the careful client gave up.
	Refused map[string]int `json:"refused,omitempty"`
	// Replayed counts messages accepted by a replay (200,
	// Idempotent-Replayed) after an earlier attempt's answer was lost.
	Replayed int `json:"replayed"`
	// Duplicates counts 2xx deliveries beyond each message's first,
	// by the harness's own number (lt-seq). Retried counts the accepted
	// messages whose first send was answered 503 or failed in transport;
	// RetriedDuplicates the duplicates among them.
	Duplicates        int `json:"duplicates"`
	Retried           int `json:"retried"`
	RetriedDuplicates int `json:"retried_duplicates"`
	// Unacknowledged counts messages delivered that the client never saw
	// accepted.
	Unacknowledged int `json:"unacknowledged"`
	// FailedPushes counts the deliveries the application did not answer
	// 2xx (it failed, or hung until the worker gave up on it).
	FailedPushes int `json:"failed_pushes"`
	// Answers counts every attempt's answer by status ("202", "503",
	// "transport"); Answers5xx the 5xx among them; Latency503 is how long
	// the 503s took.
	Answers    map[string]int `json:"answers"`
	Answers5xx int            `json:"answers_5xx"`
	Latency503 Quantiles      `json:"latency_503"`
	// SlowestAnswer is the longest any attempt waited for its answer,
	// whatever it was.
	SlowestAnswer time.Duration `json:"slowest_answer"`
	// SplitMsgid counts messages that reached the application under more
	// than one X-Aws-Sqsd-Msgid, SplitFirstReceived under more than one
	// X-Aws-Sqsd-First-Received-At; ForeignMsgid those delivered at least
	// once with a Msgid other than the id of their 202.
	SplitMsgid         int `json:"split_msgid"`
	SplitFirstReceived int `json:"split_first_received"`
	ForeignMsgid       int `json:"foreign_msgid"`
	// Memory is each process's peak by role ("gateway", "worker-1"): the
	// largest VmRSS and VmHWM sampled over the run.
	Memory map[string]MemPeak `json:"memory"`
	// LostSeqs lists up to 20 lost messages, to look for in the logs.
	LostSeqs []int64 `json:"lost_seqs,omitempty"`

	// SlowBody is the slow-body attack's figures; Trials restart-send's
	// rounds.
	SlowBody *SlowBody      `json:"slow_body,omitempty"`
	Trials   []RestartTrial `json:"trials,omitempty"`

	// Checks are the fault's expectations against what was measured.
	Checks []Check `json:"checks"`

	messages   []chaosMessage
	deliveries []Delivery
	samples    []MemSample
}

// Check is one expectation against what was measured.
type Check struct {
	Name     string `json:"name"`
	Bound    string `json:"bound"`
	Measured string `json:"measured"`
	Pass     bool   `json:"pass"`
	// Always marks the checks the short test asserts even where the
	// fault's expectations are not enforced.
	Always bool `json:"always,omitempty"`
}

// Pass reports whether every check passed.
func (r *ChaosResult) Pass() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Asserted returns the checks the short test asserts: all of them when
// the fault's expectations are enforced, else those marked Always.
func (r *ChaosResult) Asserted() []Check {
	var out []Check
	for _, c := range r.Checks {
		if r.Fault.Expect.Enforced || c.Always {
			out = append(out, c)
		}
	}
	return out
}

// chaosMessage is one message's story, for messages.csv.
type chaosMessage struct {
	seq        int64
	tenant     string
	accepted   bool
	id         string
	attempts   int
	first      string // the first attempt's answer
	last       string // the last attempt's answer
	sentAt     time.Duration
	oks        int // 2xx deliveries
	deliveries int
	msgids     int
	firstRecvs int
}

// analyse accounts for every message from the sends and the deliveries,
// reads the memory peaks from samples, and evaluates the checks.
func (r *ChaosResult) analyse(sends []Send, deliveries []Delivery, samples []MemSample) {
	bySeq := make(map[int64][]Delivery)
	for _, d := range deliveries {
		bySeq[d.Seq] = append(bySeq[d.Seq], d)
		if !d.OK() {
			r.FailedPushes++
		}
	}
	r.Answers = map[string]int{}
	r.Refused = map[string]int{}
	r.Sent = len(sends)
	var lat503 []time.Duration
	accepted := make(map[int64]bool, len(sends))
	r.messages = r.messages[:0]
	for _, s := range sends {
		for _, a := range s.Attempts {
			r.Answers[answerName(a.Status)]++
			r.SlowestAnswer = max(r.SlowestAnswer, a.Took)
			if a.Status >= 500 {
				r.Answers5xx++
			}
			if a.Status == http.StatusServiceUnavailable {
				lat503 = append(lat503, a.Took)
			}
		}
		ds := bySeq[s.Seq]
		m := chaosMessage{seq: s.Seq, tenant: s.Tenant, accepted: s.Accepted(), id: s.ID, attempts: len(s.Attempts),
			sentAt: s.At.Sub(r.Start), deliveries: len(ds)}
		if len(s.Attempts) > 0 {
			m.first, m.last = answerName(s.Attempts[0].Status), answerName(s.Attempts[len(s.Attempts)-1].Status)
		}
		msgids, firstRecvs := map[string]bool{}, map[string]bool{}
		dead, foreign := false, false
		for _, d := range ds {
			if d.OK() {
				m.oks++
			}
			dead = dead || d.Redriven
			if d.MsgID != "" {
				msgids[d.MsgID] = true
				foreign = foreign || d.MsgID != s.ID
			}
			if d.FirstReceivedAt != "" {
				firstRecvs[d.FirstReceivedAt] = true
			}
		}
		m.msgids, m.firstRecvs = len(msgids), len(firstRecvs)
		r.messages = append(r.messages, m)
		if !m.accepted {
			r.Refused[rejection(s)]++
			continue
		}
		r.Accepted++
		accepted[s.Seq] = true
		if s.Replayed {
			r.Replayed++
		}
		if dead {
			r.DeadLettered++
		}
		if m.oks > 0 {
			r.Delivered++
		} else {
			r.Lost++
			if len(r.LostSeqs) < 20 {
				r.LostSeqs = append(r.LostSeqs, s.Seq)
			}
		}
		dups := max(m.oks-1, 0)
		r.Duplicates += dups
		if s.Retried() {
			r.Retried++
			r.RetriedDuplicates += dups
		}
		if m.msgids > 1 {
			r.SplitMsgid++
		}
		if m.firstRecvs > 1 {
			r.SplitFirstReceived++
		}
		if foreign {
			r.ForeignMsgid++
		}
	}
	for seq := range bySeq {
		if !accepted[seq] {
			r.Unacknowledged++
		}
	}
	r.Latency503 = quantiles(lat503)

	r.deliveries, r.samples = deliveries, samples
	r.Memory = peaks(samples, 0, 0)
	if sb := r.SlowBody; sb != nil {
		sb.RSSMax = peaks(samples, sb.Opening, sb.Closed+memEvery)["gateway"].RSS
		sb.RSSMaxAfter = peaks(samples, sb.Closed, sb.Closed+r.Fault.After+memEvery)["gateway"].RSS
		var before, during []time.Duration
		for _, s := range sends {
			if len(s.Attempts) == 0 {
				continue
			}
			switch at := s.At.Sub(r.Start); {
			case at < sb.Opening:
				before = append(before, s.Attempts[0].Took)
			case at < sb.Closed:
				during = append(during, s.Attempts[0].Took)
			}
		}
		sb.Before, sb.Others = quantiles(before), quantiles(during)
	}
	r.Checks = r.check()
}

// answerName names an attempt's answer by its status.
func answerName(status int) string {
	if status == 0 {
		return "transport"
	}
	return strconv.Itoa(status)
}

// check evaluates the fault's expectations.
func (r *ChaosResult) check() []Check {
	x := r.Fault.Expect
	cs := []Check{{
		Name: "accepted messages lost", Bound: fmt.Sprintf("≤ %d", x.MaxLost), Always: true,
		Measured: fmt.Sprintf("%d of %d", r.Lost, r.Accepted), Pass: r.Lost <= x.MaxLost && r.Drained,
	}}
	if !r.Drained {
		cs[0].Measured += fmt.Sprintf(" (not drained: %d left)", r.Leftover)
	}
	if x.MaxRetriedDuplicates != nil {
		cs = append(cs, Check{Name: "duplicates of messages first answered 503 or cut in transport",
			Bound:    fmt.Sprintf("≤ %d", *x.MaxRetriedDuplicates),
			Measured: fmt.Sprintf("%d (of %d such messages)", r.RetriedDuplicates, r.Retried),
			Pass:     r.RetriedDuplicates <= *x.MaxRetriedDuplicates})
	}
	if x.Max503Latency > 0 {
		cs = append(cs, Check{Name: "slowest 503", Bound: "≤ " + fmtDur(x.Max503Latency),
			Measured: fmt.Sprintf("%s (%d answers)", fmtDur(r.Latency503.Max), r.Latency503.N),
			Pass:     r.Latency503.Max <= x.Max503Latency})
	}
	if sb := r.SlowBody; sb != nil {
		if x.MaxRSS > 0 {
			cs = append(cs, Check{Name: fmt.Sprintf("gateway RSS with %d slow connections", sb.Opened),
				Bound: "< " + fmtBytes(x.MaxRSS), Measured: fmtBytes(sb.RSSMax) + abortedNote(sb),
				Pass: sb.RSSMax < x.MaxRSS && !sb.Aborted})
		}
		if x.MaxRSSAfter > 0 {
			ratio := float64(sb.RSSAfter) / float64(max(sb.RSSBefore, 1))
			measured := fmt.Sprintf("%s, %.2f×", fmtBytes(sb.RSSAfter), ratio)
			if sb.Killed {
				measured = fmt.Sprintf("the gateway was killed at %s", fmtBytes(sb.KilledAt))
			}
			cs = append(cs, Check{Name: fmt.Sprintf("gateway RSS %s after the connections closed", fmtDur(r.Fault.After)),
				Bound:    fmt.Sprintf("≤ %g× before (%s)", x.MaxRSSAfter, fmtBytes(sb.RSSBefore)),
				Measured: measured, Pass: ratio <= x.MaxRSSAfter && !sb.Killed})
		}
		if x.MaxOtherP99 > 0 {
			cs = append(cs, Check{Name: "other tenants' p99 send latency during the attack", Bound: "< " + fmtDur(x.MaxOtherP99),
				Measured: fmt.Sprintf("%s (p50 %s, %d sends)", fmtDur(sb.Others.P99), fmtDur(sb.Others.P50), sb.Others.N),
				Pass:     sb.Others.N > 0 && sb.Others.P99 < x.MaxOtherP99})
		}
	}
	if x.MaxDeliveryDelay > 0 {
		worst, late := time.Duration(0), 0
		for _, t := range r.Trials {
			if t.Delay < 0 || t.Delay > x.MaxDeliveryDelay {
				late++
			}
			if t.Delay < 0 {
				worst = -1
			} else if worst >= 0 {
				worst = max(worst, t.Delay)
			}
		}
		measured := fmt.Sprintf("%d of %d later; slowest %s", late, len(r.Trials), fmtDur(worst))
		if worst < 0 {
			measured = fmt.Sprintf("%d of %d later; some never within %s", late, len(r.Trials), fmtDur(r.Fault.Deliver))
		}
		cs = append(cs, Check{Name: "each message after a restart delivered within", Bound: "≤ " + fmtDur(x.MaxDeliveryDelay),
			Measured: measured, Pass: late == 0 && len(r.Trials) > 0})
	}
	return cs
}

// abortedNote says that the attack was cut short, if it was.
func abortedNote(sb *SlowBody) string {
	switch {
	case sb.Killed:
		return fmt.Sprintf(" (attack cut short; the gateway killed at %s)", fmtBytes(sb.KilledAt))
	case sb.Aborted:
		return " (attack cut short at that size)"
	}
	return ""
}

// fmtBytes prints a size in MiB.
func fmtBytes(n int64) string {
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// write saves the run's records under dir: result.json, messages.csv
// (one line per message), deliveries.csv (one line per push the
// application received, with the Msgid and First-Received-At it saw) and
// memory.csv (every sample).
func (r *ChaosResult) write(dir string) error {
	var b strings.Builder
	b.WriteString("seq,tenant,accepted,id,attempts,first_answer,last_answer,sent_ms,deliveries,ok_deliveries,msgids,first_received_ats\n")
	for _, m := range r.messages {
		fmt.Fprintf(&b, "%d,%s,%t,%s,%d,%s,%s,%.1f,%d,%d,%d,%d\n", m.seq, m.tenant, m.accepted, m.id, m.attempts, m.first, m.last,
			ms(m.sentAt), m.deliveries, m.oks, m.msgids, m.firstRecvs)
	}
	if err := os.WriteFile(filepath.Join(dir, "messages.csv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	err := writeCSV(filepath.Join(dir, "deliveries.csv"), "seq,msgid,first_received_at,receive_count,start_ms,took_ms,status,redriven", func(w io.Writer) {
		for _, d := range r.deliveries {
			fmt.Fprintf(w, "%d,%s,%s,%d,%.1f,%.1f,%d,%t\n", d.Seq, d.MsgID, d.FirstReceivedAt, d.ReceiveCount,
				ms(d.Start.Sub(r.Start)), ms(d.End.Sub(d.Start)), d.Status, d.Redriven)
		}
	})
	if err != nil {
		return err
	}
	err = writeCSV(filepath.Join(dir, "memory.csv"), "t_s,role,rss_bytes,hwm_bytes", func(w io.Writer) {
		for _, s := range r.samples {
			fmt.Fprintf(w, "%.2f,%s,%d,%d\n", s.At.Seconds(), s.Role, s.RSS, s.HWM)
		}
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "result.json"), append(data, '\n'), 0o644)
}

// writeCSV writes a file of the header line and what rows writes.
func writeCSV(path, header string, rows func(io.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, header)
	rows(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LoadChaosResult reads back the result.json of a chaos run written under
// dir, enough to report it again.
func LoadChaosResult(dir string) (*ChaosResult, error) {
	data, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, err
	}
	r := &ChaosResult{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return r, nil
}
