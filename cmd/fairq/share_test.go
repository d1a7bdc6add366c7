package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
)

// TestWorkersShareQueues: two `fairq worker` commands on one Redis and the
// SQS emulator, once each knows of the other, with
// worker.watchers_per_queue: 1, split the eight live queues between them,
// each queue watched once; with 0, each watches all eight. (Rendezvous
// hashing may give one of two workers all eight, once in 128 pairs of
// ids: the split is checked by the sum, not by each one's share.)
func TestWorkersShareQueues(t *testing.T) {
	for _, tt := range []struct {
		k        int
		wantEach func(a, b float64) bool
		want     string
	}{
		{1, func(a, b float64) bool { return a+b == 8 }, "8 between them"},
		{0, func(a, b float64) bool { return a == 8 && b == 8 }, "8 each"},
	} {
		t.Run(fmt.Sprintf("watchers_per_queue=%d", tt.k), func(t *testing.T) {
			url, _ := app(t, func(int) int { return http.StatusOK })
			base, _ := sqsConfig(t, fmt.Sprintf("redis: {addr: %q}\nworker: {push_url: %q, watchers_per_queue: %d}\n",
				testenv.RedisAddr(t), url, tt.k))
			if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
				t.Fatalf("queues create: %d %s", code, stderr)
			}
			a, b := freeAddr(t), freeAddr(t)
			startRole(t, "worker", base, a)
			startRole(t, "worker", base, b)
			waitHTTP(t, "http://"+a+"/healthz", http.StatusOK, 20*time.Second)
			waitHTTP(t, "http://"+b+"/healthz", http.StatusOK, 20*time.Second)
			// Each learns of the other at its next heartbeat (5 s).
			deadline := time.Now().Add(30 * time.Second)
			for {
				fa, fb := scrape(t, a, "fairq_fleet_workers"), scrape(t, b, "fairq_fleet_workers")
				wa, wb := scrape(t, a, "fairq_worker_queues_watched"), scrape(t, b, "fairq_worker_queues_watched")
				if fa == 2 && fb == 2 && tt.wantEach(wa, wb) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the workers know of %v and %v workers and watch %v and %v live queues, want 2 each and %s", fa, fb, wa, wb, tt.want)
				}
				time.Sleep(100 * time.Millisecond) // polling the metrics, not synchronising goroutines
			}
			for _, addr := range []string{a, b} {
				if got := scrape(t, addr, "fairq_worker_watching_all_queues"); got != 0 {
					t.Errorf("worker at %s: fairq_worker_watching_all_queues = %v, want 0", addr, got)
				}
			}
		})
	}
}

// scrape returns the value of a metric without labels on the /metrics of
// the server at addr, or -1 when it is absent.
func scrape(t *testing.T, addr, name string) float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	return -1
}
