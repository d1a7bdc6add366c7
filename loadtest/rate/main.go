// Command rate is an open-loop load generator for the gateway benchmark:
// it sends POST /v1/messages at a constant rate, whatever the answers'
// latency (so a slow server cannot slow the load down and hide its own
// latency), and prints the latency percentiles and the answers by status.
// It is lighter than k6, which on a 2-core machine would compete with the
// server it measures.
//
//	go run ./loadtest/rate -url http://127.0.0.1:8080 -keys k1,k2 -rate 5000 -duration 20s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "base URL of the gateway")
	keys := flag.String("keys", "", "comma-separated API keys; requests take them in turn")
	rate := flag.Int("rate", 1000, "requests per second")
	duration := flag.Duration("duration", 20*time.Second, "how long to send")
	maxInFlight := flag.Int("max-in-flight", 2000, "requests outstanding at once; past it a tick is counted as dropped")
	flag.Parse()
	ks := strings.Split(*keys, ",")
	if *keys == "" || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "rate: -keys and a positive -rate are required")
		os.Exit(2)
	}
	body := []byte(`{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: *maxInFlight, MaxIdleConnsPerHost: *maxInFlight, IdleConnTimeout: 30 * time.Second},
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		statuses  = map[string]int{}
		wg        sync.WaitGroup
		slots     = make(chan struct{}, *maxInFlight)
		dropped   int
	)
	interval := time.Second / time.Duration(*rate)
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case slots <- struct{}{}:
		default:
			dropped++
			continue
		}
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			defer func() { <-slots }()
			req, _ := http.NewRequest(http.MethodPost, *url+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			res, err := client.Do(req)
			lat := time.Since(t0)
			status := "error"
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				status = fmt.Sprint(res.StatusCode)
			}
			mu.Lock()
			latencies = append(latencies, lat)
			statuses[status]++
			mu.Unlock()
		}(ks[i%len(ks)])
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	fmt.Printf("sent %d in %.1fs (%.0f/s, target %d/s), dropped %d; statuses %v\n",
		len(latencies), elapsed.Seconds(), float64(len(latencies))/elapsed.Seconds(), *rate, dropped, statuses)
	fmt.Printf("latency p50 %v p95 %v p99 %v max %v\n",
		pct(0.50).Round(10*time.Microsecond), pct(0.95).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond))
}
