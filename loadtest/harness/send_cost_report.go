package harness

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// SendCostRow is one send window's figures over its runs: the median of
// each, so that a run disturbed by other work on the machine moves none.
type SendCostRow struct {
	Window time.Duration
	// Runs counts the runs the medians are of; LeftOut those left out as
	// disturbed (SendCost.Disturbed).
	Runs, LeftOut int
	// SendPerMessage and PerMessage are SendMessageBatch calls and every
	// SQS request per accepted message (SendCost).
	SendPerMessage float64
	PerMessage     float64
	// SteadyPerMessage is PerMessage during the load, after its warmup
	// (SendCost.SteadyPerMessage).
	SteadyPerMessage float64
	// P50 and P99 are the 202 answer's latency.
	P50, P99 time.Duration
	// AddedP99 is the p99 less that of the run without a window of the
	// same round, the median over the rounds where both were kept;
	// HasAdded is false when there is no such round.
	AddedP99 time.Duration
	HasAdded bool
	// LoadAvg is the lowest and highest load average seen by its runs;
	// both 0 when none was read.
	LoadAvg [2]float64
}

// SummariseSendCost groups runs by window, in the order the windows first
// appear, leaving out the disturbed ones.
func SummariseSendCost(runs []SendCost) []SendCostRow {
	var windows []time.Duration
	by := map[time.Duration][]SendCost{}
	leftOut := map[time.Duration]int{}
	base := map[int]SendCost{} // the run without a window, by round
	for _, r := range runs {
		if _, ok := by[r.Window]; !ok {
			windows = append(windows, r.Window)
			by[r.Window] = nil
		}
		if r.Disturbed() {
			leftOut[r.Window]++
			continue
		}
		by[r.Window] = append(by[r.Window], r)
		if r.Window == 0 {
			base[r.Round] = r
		}
	}
	rows := make([]SendCostRow, 0, len(windows))
	for _, w := range windows {
		rows = append(rows, summarise(w, by[w], leftOut[w], base))
	}
	return rows
}

// summarise is the row of window w's runs.
func summarise(w time.Duration, rs []SendCost, leftOut int, base map[int]SendCost) SendCostRow {
	row := SendCostRow{Window: w, Runs: len(rs), LeftOut: leftOut}
	var send, total, steady []float64
	var p50, p99, added []time.Duration
	loadSeen := false
	for _, r := range rs {
		send, total = append(send, r.SendPerMessage()), append(total, r.PerMessage())
		steady = append(steady, r.SteadyPerMessage())
		p50, p99 = append(p50, r.Latency.P50), append(p99, r.Latency.P99)
		if b, ok := base[r.Round]; ok {
			added = append(added, r.Latency.P99-b.Latency.P99)
		}
		for _, l := range r.LoadAvg {
			v, err := strconv.ParseFloat(l, 64)
			if err != nil {
				continue
			}
			if !loadSeen || v < row.LoadAvg[0] {
				row.LoadAvg[0] = v
			}
			row.LoadAvg[1], loadSeen = max(row.LoadAvg[1], v), true
		}
	}
	row.SendPerMessage, row.PerMessage, row.SteadyPerMessage = median(send), median(total), median(steady)
	row.P50, row.P99 = median(p50), median(p99)
	if len(added) > 0 {
		row.AddedP99, row.HasAdded = median(added), true
	}
	return row
}

// millis returns d in milliseconds, negative ones too.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the middle value of xs, the mean of the two middle ones
// for an even count, and zero for none.
func median[T time.Duration | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// WriteSendCostTable writes rows as a markdown table.
func WriteSendCostTable(w io.Writer, rows []SendCostRow) {
	fmt.Fprintln(w, "| send_window | SendMessageBatch per message | SQS requests per message, end to end: whole run | during the load | 202 latency p50 | p99 | p99 added vs 0 | runs (left out) | load average |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		added := "—"
		if r.HasAdded && r.Window != 0 {
			added = fmt.Sprintf("%+.1f ms", millis(r.AddedP99))
		}
		fmt.Fprintf(w, "| %v | %.3f | %.3f | %.3f | %.1f ms | %.1f ms | %s | %d (%d) | %.1f–%.1f |\n",
			r.Window, r.SendPerMessage, r.PerMessage, r.SteadyPerMessage, millis(r.P50), millis(r.P99), added, r.Runs, r.LeftOut, r.LoadAvg[0], r.LoadAvg[1])
	}
}
