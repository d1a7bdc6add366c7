package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// tenantTableMax is the largest number of quiet tenants whose rows the
// table lists one by one; above it the table gives the overlap classes only.
const tenantTableMax = 40

// Overlap classes of a quiet tenant with the noisy ones, under a strategy.
const (
	classNone    = "none"
	classPartial = "some"
	classWhole   = "whole"
)

func (l Latency) class() string {
	switch {
	case l.Whole:
		return classWhole
	case l.Common > 0:
		return classPartial
	}
	return classNone
}

// quiet returns the latencies of the quiet tenants, which come first.
func (r StrategyResult) quiet() []Latency {
	if i := slices.IndexFunc(r.Tenants, func(l Latency) bool { return l.Noisy }); i >= 0 {
		return r.Tenants[:i]
	}
	return r.Tenants
}

// noisy returns the latencies of the noisy tenants.
func (r StrategyResult) noisy() []Latency { return r.Tenants[len(r.quiet()):] }

// noisyP99 is the worst p99 of the noisy tenants.
func (r StrategyResult) noisyP99() float64 {
	return maxOf(field(r.noisy(), func(l Latency) float64 { return l.P99 }))
}

// theNoisy names the noisy tenants in text: "the noisy tenant" or "the
// noisy tenants", and the possessive.
func (c Config) theNoisy() (name, possessive string) {
	if c.Noisy == 1 {
		return "the noisy tenant", "the noisy tenant's"
	}
	return "the noisy tenants", "the noisy tenants'"
}

// ratMax is the longest exact fraction the table prints; longer ones (with
// several noisy tenants the denominator is C(N,k) to their number) are
// given as a percentage only.
const ratMax = 24

// WriteTable writes the result for people: the experiment, the overlap
// odds, one row per strategy, and the quiet tenants by overlap class (and
// one by one when there are few).
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	noisy := r.Tenants[len(r.Tenants)-1]
	theNoisy, theNoisys := c.theNoisy()
	each := ""
	if c.Noisy > 1 {
		each = " each"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fairq-sim: seed %d, N=%d queues, shards of k=%d; %d quiet tenants at %s msg/s, %d noisy at %s msg/s%s (%s×)\n",
		c.Seed, c.Queues, c.ShardSize, c.Quiet, num(c.QuietRate), c.Noisy, num(noisy.Rate), each, num(c.NoisyFactor))
	fmt.Fprintf(&b, "consumers: %d slots × %s mean %s service = %s msg/s (%s× the quiet total); %s of sending, then drained; depth poll every %s\n\n",
		r.Workers, c.Service, c.ServiceDist, num(float64(r.Workers)/c.Service.Seconds()), num(c.Capacity), c.Duration, c.Poll)

	fmt.Fprintf(&b, "Queues a quiet tenant's shard has in common with %s:\n", theNoisys)
	tw := tabwriter.NewWriter(&b, 2, 8, 3, ' ', 0)
	fmt.Fprintf(tw, "  in common\texact probability\texpected of %d\tobserved", c.Quiet)
	if r.PairsSampled > 0 {
		fmt.Fprintf(tw, "\tshare of %s random id pairs", thousands(r.PairsSampled))
	}
	fmt.Fprintln(tw)
	for _, o := range r.Odds {
		f, _ := o.Exact.Float64()
		label := strconv.Itoa(o.J)
		if o.J == c.ShardSize {
			label += " (whole shard)"
		}
		exact := pct(f)
		if rs := o.Exact.RatString(); len(rs) <= ratMax {
			exact = rs + " = " + exact
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d", label, exact, expected(o.Expected), o.Observed)
		if r.PairsSampled > 0 {
			fmt.Fprintf(tw, "\t%s", pct(o.PairShare))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush() // into a strings.Builder: it cannot fail

	fmt.Fprintf(&b, "\nLatency from send to end of service; a quiet tenant is hurt when its p99 is over %s× its p99 without %s.\n", num(c.Hurt), theNoisy)
	tw = tabwriter.NewWriter(&b, 2, 8, 3, ' ', 0)
	fmt.Fprintf(tw, "strategy\tmessages\tquiet p50\tquiet p99 (median, worst)\tbaseline p99\tquiet hurt (expected)\tquiet p99, 1st → 2nd half\tnoisy p99\n")
	for _, run := range r.Runs {
		q := run.quiet()
		exp, _ := run.ExpectedHurt.Float64()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s, %s\t%s\t%d of %d (%s)\t%s → %s\t%s\n",
			run.Strategy.Title(), thousands(run.Messages),
			dur(median(field(q, func(l Latency) float64 { return l.P50 }))),
			dur(median(field(q, func(l Latency) float64 { return l.P99 }))),
			dur(maxOf(field(q, func(l Latency) float64 { return l.P99 }))),
			dur(median(field(q, func(l Latency) float64 { return l.BaselineP99 }))),
			run.QuietHurt, c.Quiet, expected(exp*float64(c.Quiet)),
			dur(median(field(q, func(l Latency) float64 { return l.P99FirstHalf }))),
			dur(median(field(q, func(l Latency) float64 { return l.P99SecondHalf }))),
			dur(run.noisyP99()))
	}
	_ = tw.Flush() // into a strings.Builder: it cannot fail

	fmt.Fprintf(&b, "\nQuiet tenants by queues in common with %s: p99 ÷ baseline p99 (median, worst), hurt\n", theNoisy)
	tw = tabwriter.NewWriter(&b, 2, 8, 3, ' ', 0)
	fmt.Fprintf(tw, "strategy\tnone in common\tsome in common\twhole shard in common\n")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s", run.Strategy.Title())
		for _, class := range []string{classNone, classPartial, classWhole} {
			var ratios []float64
			hurt := 0
			for _, l := range run.quiet() {
				if l.class() == class {
					ratios = append(ratios, l.P99/l.BaselineP99)
					if l.Hurt {
						hurt++
					}
				}
			}
			if len(ratios) == 0 {
				fmt.Fprintf(tw, "\t-")
				continue
			}
			fmt.Fprintf(tw, "\t%d: %s, %s; %d hurt", len(ratios), ratio(median(ratios)), ratio(maxOf(ratios)), hurt)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush() // into a strings.Builder: it cannot fail

	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if c.Quiet <= tenantTableMax {
		return r.writeTenants(w)
	}
	return nil
}

// writeTenants lists every quiet tenant's p99 ratio under each strategy.
func (r *Result) writeTenants(w io.Writer) error {
	var shards, queues []string
	for _, t := range r.Tenants[r.Config.Quiet:] {
		shards, queues = append(shards, t.Shard.String()), append(queues, strconv.Itoa(t.Queue))
	}
	if r.Config.Noisy == 1 {
		fmt.Fprintf(w, "\nEach quiet tenant's p99 ÷ its baseline p99, with (queues in common); the noisy tenant's shard is %s, its hash queue %s\n", shards[0], queues[0])
	} else {
		fmt.Fprintf(w, "\nEach quiet tenant's p99 ÷ its baseline p99, with (queues in common); the noisy tenants' shards are %s, their hash queues %s\n",
			strings.Join(shards, " "), strings.Join(queues, " "))
	}
	tw := tabwriter.NewWriter(w, 2, 8, 3, ' ', 0)
	fmt.Fprintf(tw, "tenant\tshard\thash queue")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "\t%s", run.Strategy)
	}
	fmt.Fprintln(tw)
	for i, t := range r.Tenants[:r.Config.Quiet] {
		fmt.Fprintf(tw, "%s\t%s\t%d", t.ID, t.Shard, t.Queue)
		for _, run := range r.Runs {
			l := run.Tenants[i]
			mark := ""
			if l.Hurt {
				mark = " hurt"
			}
			fmt.Fprintf(tw, "\t%s (%d)%s", ratio(l.P99/l.BaselineP99), l.Common, mark)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// WriteTenantsCSV writes one row per strategy and tenant; times in seconds.
func (r *Result) WriteTenantsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"strategy", "tenant", "noisy", "rate", "shard", "hash_queue", "common", "whole", "messages",
		"p50_s", "p99_s", "max_s", "p99_first_half_s", "p99_second_half_s", "baseline_p50_s", "baseline_p99_s", "p99_ratio", "hurt"})
	for _, run := range r.Runs {
		for i, t := range r.Tenants {
			l := run.Tenants[i]
			ratio := ""
			if !t.Noisy {
				ratio = f64(l.P99 / l.BaselineP99)
			}
			cw.Write([]string{run.Strategy.String(), t.ID, strconv.FormatBool(t.Noisy), f64(t.Rate), t.Shard.String(), strconv.Itoa(t.Queue),
				strconv.Itoa(l.Common), strconv.FormatBool(l.Whole), strconv.Itoa(l.Messages),
				f64(l.P50), f64(l.P99), f64(l.Max), f64(l.P99FirstHalf), f64(l.P99SecondHalf),
				optional(!t.Noisy, l.BaselineP50), optional(!t.Noisy, l.BaselineP99), ratio, strconv.FormatBool(l.Hurt)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteSummaryCSV writes one row per strategy; times in seconds.
func (r *Result) WriteSummaryCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"strategy", "queues", "shard_size", "quiet", "messages", "quiet_hurt", "quiet_whole", "expected_hurt", "expected_hurt_share",
		"quiet_p50_median_s", "quiet_p99_median_s", "quiet_p99_max_s", "baseline_p99_median_s",
		"quiet_p99_first_half_median_s", "quiet_p99_second_half_median_s", "noisy_p99_s"})
	c := r.Config
	for _, run := range r.Runs {
		q := run.quiet()
		exp, _ := run.ExpectedHurt.Float64()
		cw.Write([]string{run.Strategy.String(), strconv.Itoa(c.Queues), strconv.Itoa(c.ShardSize), strconv.Itoa(c.Quiet),
			strconv.Itoa(run.Messages), strconv.Itoa(run.QuietHurt), strconv.Itoa(run.QuietWhole), run.ExpectedHurt.RatString(), f64(exp),
			f64(median(field(q, func(l Latency) float64 { return l.P50 }))),
			f64(median(field(q, func(l Latency) float64 { return l.P99 }))),
			f64(maxOf(field(q, func(l Latency) float64 { return l.P99 }))),
			f64(median(field(q, func(l Latency) float64 { return l.BaselineP99 }))),
			f64(median(field(q, func(l Latency) float64 { return l.P99FirstHalf }))),
			f64(median(field(q, func(l Latency) float64 { return l.P99SecondHalf }))),
			f64(run.noisyP99())})
	}
	cw.Flush()
	return cw.Error()
}

// WriteWindowsCSV writes, per strategy and window of sending time, the
// median quiet tenant's p99 with and without the noisy tenants.
func (r *Result) WriteWindowsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"strategy", "window_start_s", "window_end_s", "quiet_p99_median_s", "baseline_quiet_p99_median_s"})
	step := r.Config.Duration.Seconds() / float64(r.Config.Windows)
	for _, run := range r.Runs {
		for i := range run.WindowP99 {
			cw.Write([]string{run.Strategy.String(), f64(float64(i) * step), f64(float64(i+1) * step), f64(run.WindowP99[i]), f64(run.BaselineWindowP99[i])})
		}
	}
	cw.Flush()
	return cw.Error()
}

func field(ls []Latency, f func(Latency) float64) []float64 {
	out := make([]float64, len(ls))
	for i, l := range ls {
		out[i] = f(l)
	}
	return out
}

func maxOf(xs []float64) float64 {
	m := math.NaN()
	for _, x := range xs {
		if !(x <= m) {
			m = x
		}
	}
	return m
}

func f64(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

func optional(ok bool, x float64) string {
	if !ok {
		return ""
	}
	return f64(x)
}

// num formats a rate or a factor without needless digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

func pct(x float64) string {
	switch {
	case x == 0:
		return "0%"
	case x < 0.001:
		return fmt.Sprintf("%.3f%%", 100*x)
	}
	return fmt.Sprintf("%.2f%%", 100*x)
}

// expected formats an expected count: one decimal, or two significant
// digits below one.
func expected(x float64) string {
	if x < 1 && x > 0 {
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

func ratio(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// dur formats seconds as a duration of three significant digits.
func dur(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.0fms", s*1000)
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.1fmin", s/60)
}

func thousands(n int) string { return digitGroups(strconv.Itoa(n)) }

// digitGroups puts a comma between groups of three digits of a whole
// number.
func digitGroups(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
