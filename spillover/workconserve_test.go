package spillover_test

import (
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/tenant"
)

// How close to its limits a tenant with work waiting runs, measured on
// the SQS emulator and Redis with two workers:
//
//	go test ./spillover -run TestWorkConserve -workconserve -v
//
// Tenant "conc" has concurrency 2 and 3 s jobs; tenant "rate" has a
// process_rate of 2 a second and 50 ms jobs. Both have more backlog than
// the window measured, so that work waits throughout. The application
// counts, per tenant, the requests in progress at once and the requests
// started in every sliding window: neither may exceed the limit. The
// figures are in BENCHMARKS.md ("Work-conserving limits").
var (
	workConserve       = flag.Bool("workconserve", false, "measure how much of its limits a tenant with work waiting uses (about three minutes)")
	workConserveWindow = flag.Duration("workconserve.window", 60*time.Second, "the window measured, after a warm-up of 5 s")
	workConserveBurst  = flag.Int("workconserve.burst", 2, "process_burst of the rate-limited tenant")
	workConserveSlots  = flag.Int("workconserve.connections", 50, "worker.connections of each worker")
)

func TestWorkConserve(t *testing.T) {
	if !*workConserve {
		t.Skip("a measurement of minutes: run with -workconserve")
	}
	const (
		concurrency = 2
		concJob     = 3 * time.Second
		rate        = 2.0
		rateJob     = 50 * time.Millisecond
		warmUp      = 5 * time.Second
	)
	window := *workConserveWindow
	burst := *workConserveBurst
	w := newWorld(t, "sqs", true, map[string]tenant.Limits{
		"conc": limits(100000, 100000, concurrency),
		"rate": limits(rate, burst, 1000),
	})
	w.app.setHold("conc", concJob)
	w.app.setHold("rate", rateJob)
	// Enough work to last the warm-up, the window and 15 s more at the
	// limits.
	busy := warmUp + window + 15*time.Second
	conc := ids("conc", int(busy/concJob)*concurrency)
	rt := ids("rate", int(busy.Seconds()*rate))
	now := time.Now()
	for i, q := range w.names.Live {
		w.send(q, "conc", now, conc[i*len(conc)/2:(i+1)*len(conc)/2]...)
		w.send(q, "rate", now, rt[i*len(rt)/2:(i+1)*len(rt)/2]...)
	}
	opts := workerOptions{connections: *workConserveSlots}
	started := time.Now()
	a, b := w.startWorker(opts), w.startWorker(opts)
	w.app.waitFor(t, busy*4, "every message processed", allDone(conc, rt))
	from, to := started.Add(warmUp), started.Add(warmUp+window)

	w.app.mu.Lock()
	peak := w.app.peak["conc"]
	var concRuns, rateRuns []delivery
	for _, d := range w.app.deliveries {
		switch d.tenant {
		case "conc":
			concRuns = append(concRuns, d)
		case "rate":
			rateRuns = append(rateRuns, d)
		}
	}
	w.app.mu.Unlock()

	// Concurrency: the slot-seconds busy in the window, of those allowed.
	var busySeconds float64
	var lastConc time.Time
	for _, d := range concRuns {
		s, e := maxTime(d.start, from), minTime(d.end, to)
		if e.After(s) {
			busySeconds += e.Sub(s).Seconds()
		}
		lastConc = maxTime(lastConc, d.start)
	}
	concUse := busySeconds / (concurrency * window.Seconds())

	// Rate: the requests started in the window, of those allowed, and the
	// most started in any sliding 1 s and 10 s, against what the bucket
	// allows: burst + rate × window.
	var starts []time.Time
	for _, d := range rateRuns {
		starts = append(starts, d.start)
	}
	slices.SortFunc(starts, time.Time.Compare)
	inWindow := 0
	for _, s := range starts {
		if !s.Before(from) && s.Before(to) {
			inWindow++
		}
	}
	rateUse := float64(inWindow) / (rate * window.Seconds())
	most1, most10 := mostIn(starts, time.Second), mostIn(starts, 10*time.Second)
	bound1, bound10 := burst+int(rate), burst+int(rate*10)

	if !lastConc.After(to) || !starts[len(starts)-1].After(to) {
		t.Fatalf("a tenant ran out of work in the window (last starts: conc %v, rate %v after the window's end): more backlog needed",
			lastConc.Sub(to), starts[len(starts)-1].Sub(to))
	}
	spilled := func(tenantID string) float64 {
		return a.metric(t, "fairq_worker_tenant_spilled_total", "tenant", tenantID) + b.metric(t, "fairq_worker_tenant_spilled_total", "tenant", tenantID)
	}
	rows := []string{
		fmt.Sprintf("| concurrency %d, %v jobs | %.1f of %.0f slot-seconds busy: **%.2f** | %d at once (limit %d) | %.2f |",
			concurrency, concJob, busySeconds, concurrency*window.Seconds(), concUse, peak, concurrency, spilled("conc")/float64(len(conc))),
		fmt.Sprintf("| process_rate %v (burst %d), %v jobs | %d of %.0f started: **%.2f** | %d in 1 s (limit %d), %d in 10 s (limit %d) | %.2f |",
			rate, burst, rateJob, inWindow, rate*window.Seconds(), rateUse, most1, bound1, most10, bound10, spilled("rate")/float64(len(rt))),
	}
	t.Logf("two workers of %d slots, window %v after %v:\n| tenant | used in the window | most at the application | spills per message |\n|---|---|---|---|\n%s",
		*workConserveSlots, window, warmUp, strings.Join(rows, "\n"))

	if peak > concurrency {
		t.Errorf("%d of tenant conc ran at once, over its concurrency of %d", peak, concurrency)
	}
	if most1 > bound1 || most10 > bound10 {
		t.Errorf("tenant rate started %d requests in 1 s and %d in 10 s, over its limit's %d and %d", most1, most10, bound1, bound10)
	}
	if concUse < 0.9 {
		t.Errorf("tenant conc kept %.2f of its concurrency busy, want at least 0.9", concUse)
	}
	if rateUse < 0.9 {
		t.Errorf("tenant rate ran at %.2f of its process_rate, want at least 0.9", rateUse)
	}
	w.account(t, slices.Concat(conc, rt), 0, a, b)
}

// mostIn returns the most of the sorted times that fall in any window
// [t, t+d).
func mostIn(sorted []time.Time, d time.Duration) int {
	most := 0
	for i, s := range sorted {
		j := sort.Search(len(sorted), func(j int) bool { return !sorted[j].Before(s.Add(d)) })
		most = max(most, j-i)
	}
	return most
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
