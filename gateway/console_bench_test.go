package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fairq/fairq/console"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/tenant"
)

// consoleBenchTenants is how many tenants the console benchmarks register.
const consoleBenchTenants = 100

// consoleBench is a gateway with 100 active tenants, an overview whose
// queues have their full 15 minutes of history (90 points each), and a
// console session: what one open console polls.
func consoleBench(b *testing.B) (*fixture, *http.Cookie) {
	b.Helper()
	specs := make([]tenant.Spec, consoleBenchTenants)
	for i := range specs {
		specs[i] = tenant.Spec{ID: fmt.Sprintf("tenant-%03d", i)}
	}
	reg, err := tenant.New(tenant.Config{Tenants: specs})
	if err != nil {
		b.Fatal(err)
	}
	activity := overview.NewRecorder(overview.RecorderConfig{Slots: 50})
	for i, s := range specs {
		// A minute of traffic of every kind, so that each row has rates
		// by reason and an age percentile.
		activity.Accepted(s.ID, 60+i)
		activity.Refused(s.ID, "rate_limited", i%3)
		activity.Spilled(s.ID, "concurrency")
		for j := range 5 {
			activity.Started(s.ID, time.Duration(j+i)*100*time.Millisecond, true)()
		}
	}
	var col *overview.Collector
	var clk *clock // the fixture's, once it is made
	f := setup(b, withAdmin, func(c *gateway.Config) {
		c.Tenants = reg
		c.Activity = activity
		// A point every millisecond for 90 ms: the 90 points of 15
		// minutes at one every 10 s.
		col, err = overview.New(overview.Config{Depths: c.Backend, Names: c.Names, Tenants: reg, Local: activity,
			Shard: func(string) []int { return []int{0, 1} }, Instance: "g", Role: "dev",
			SampleEvery: time.Millisecond, History: 90 * time.Millisecond, Now: func() time.Time { return clk.Now() }})
		if err != nil {
			b.Fatal(err)
		}
		c.Overview = col
	})
	clk = f.clock
	if err := col.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	for d := time.Millisecond; ; d *= 2 {
		f.clock.Advance(time.Second)
		doc, err := col.Document(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(doc.Queues[0].History) == 90 {
			break
		}
		time.Sleep(d) // the sampler runs on a real ticker
	}
	if err := col.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	return f, f.consoleSession(b)
}

// benchmarkConsolePoll serves GET path as the console's script asks for
// it, session and header included. With rebuild, the clock moves a second
// before each request, so that every request builds the document anew, as
// each poll of a lone console does.
func benchmarkConsolePoll(b *testing.B, path string, rebuild bool) {
	f, ck := consoleBench(b)
	req := httptest.NewRequest("GET", "http://fairq.example"+path, nil)
	req.AddCookie(ck)
	req.Header.Set(console.HeaderConsole, "1")
	var size int
	b.ReportAllocs()
	for b.Loop() {
		if rebuild {
			f.clock.Advance(time.Second)
		}
		w := httptest.NewRecorder()
		f.srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/poll")
}

// BenchmarkConsolePoll is the console's poll of every second: the
// overview without the queues' histories, built anew.
func BenchmarkConsolePoll(b *testing.B) {
	benchmarkConsolePoll(b, "/admin/v1/overview?history=false", true)
}

// BenchmarkConsolePollHistory is its poll of every 10 s: with the
// histories.
func BenchmarkConsolePollHistory(b *testing.B) { benchmarkConsolePoll(b, "/admin/v1/overview", true) }

// BenchmarkConsolePollShared is the poll of a second console within the
// same second: the document is built already, only served.
func BenchmarkConsolePollShared(b *testing.B) {
	benchmarkConsolePoll(b, "/admin/v1/overview?history=false", false)
}
