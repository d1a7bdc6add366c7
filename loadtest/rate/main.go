// Command rate is an open-loop load generator for the gateway benchmark:
// it sends POST /v1/messages on a fixed schedule, one request every
// 1/rate seconds, whatever the answers' latency, and prints the latency
// percentiles and the answers by status.
//
// Each request's latency counts from the moment the schedule said it was
// due, not from when it went out, so a server that falls behind cannot
// hide its queueing by slowing the load down (coordinated omission, which
// wrk2 corrects the same way). Requests go over a fixed pool of keep-alive
// connections (-conns); a connection takes the next request due as soon
// as it is free. If every connection is busy, requests wait for one and
// that wait is part of their latency; "late" counts the requests that went
// out more than a millisecond after they were due, the sign that the
// server (or the connections) could not keep up.
//
// It speaks HTTP/1.1 directly on each connection: a request prepared once
// per key, a response read for its status line, Content-Length and body.
// That is all a 202 from the gateway or the baseline needs, and it costs a
// fraction of net/http's client per request, which matters on a 2-core
// machine where the generator competes with the server it measures. The
// same generator measures both servers in the same run.
//
//	go run ./loadtest/rate -url http://127.0.0.1:8080 -keys k1,k2 -rate 5000 -duration 20s
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:8080", "base URL of the gateway")
	keys := flag.String("keys", "", "comma-separated API keys; requests take them in turn")
	flag.IntVar(&cfg.rate, "rate", 1000, "requests per second")
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long to send")
	flag.IntVar(&cfg.conns, "conns", 128, "keep-alive connections")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "longest wait for an answer; past it the connection is closed and the request counted as an error")
	flag.Parse()
	if *keys != "" {
		cfg.keys = strings.Split(*keys, ",")
	}
	res, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rate:", err)
		os.Exit(2)
	}
	res.print(os.Stdout, cfg.rate)
}

type config struct {
	url      string
	keys     []string
	rate     int
	duration time.Duration
	conns    int
	timeout  time.Duration
}

// body is the message every request sends.
const body = `{"body":{"order":42,"note":"load test"},"attributes":{"kind":"bench"}}`

// result is what a run measured.
type result struct {
	latencies []time.Duration // sorted
	statuses  map[string]int
	late      int // sent more than lateAfter after they were due
	elapsed   time.Duration
}

// lateAfter is how far behind its schedule a request may go out and still
// count as on time.
const lateAfter = time.Millisecond

func (r result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
}

func (r result) print(w io.Writer, rate int) {
	fmt.Fprintf(w, "sent %d in %.1fs (%.0f/s, target %d/s), late %d (%.1f%%); statuses %v\n",
		len(r.latencies), r.elapsed.Seconds(), float64(len(r.latencies))/r.elapsed.Seconds(), rate,
		r.late, 100*float64(r.late)/float64(max(len(r.latencies), 1)), r.statuses)
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	fmt.Fprintf(w, "latency p50 %v p95 %v p99 %v max %v\n",
		round(r.pct(0.50)), round(r.pct(0.95)), round(r.pct(0.99)), round(r.pct(1)))
}

// run sends cfg.rate requests a second for cfg.duration and waits for
// their answers.
func run(ctx context.Context, cfg config) (result, error) {
	switch {
	case len(cfg.keys) == 0:
		return result{}, errors.New("-keys is required")
	case cfg.rate <= 0 || cfg.conns <= 0 || cfg.duration <= 0 || cfg.timeout <= 0:
		return result{}, errors.New("-rate, -conns, -duration and -timeout must be positive")
	}
	u, err := url.Parse(cfg.url)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return result{}, fmt.Errorf("-url %q: want http://host:port", cfg.url)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	reqs := make([][]byte, len(cfg.keys))
	for i, k := range cfg.keys {
		reqs[i] = []byte("POST " + strings.TrimSuffix(u.Path, "/") + "/v1/messages HTTP/1.1\r\n" +
			"Host: " + u.Host + "\r\n" +
			"Authorization: Bearer " + k + "\r\n" +
			"Content-Type: application/json\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}

	interval := time.Second / time.Duration(cfg.rate)
	total := int64(cfg.duration / interval)
	var next atomic.Int64 // the next request of the schedule to send
	start := time.Now()
	workers := make([]worker, cfg.conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		w.addr, w.timeout, w.statuses = addr, cfg.timeout, map[string]int{}
		w.lat = make([]time.Duration, 0, total/int64(cfg.conns)+16)
		wg.Go(func() {
			defer w.close()
			t := time.NewTimer(time.Hour)
			defer t.Stop()
			for {
				n := next.Add(1) - 1
				if n >= total || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(n) * interval)
				if d := time.Until(due); d > 0 {
					t.Reset(d)
					select {
					case <-t.C:
					case <-ctx.Done():
						return
					}
				} else if -d > lateAfter {
					w.late++
				}
				w.statuses[w.do(reqs[n%int64(len(reqs))])]++
				w.lat = append(w.lat, time.Since(due))
			}
		})
	}
	wg.Wait()
	res := result{statuses: map[string]int{}, elapsed: time.Since(start)}
	for i := range workers {
		res.latencies = append(res.latencies, workers[i].lat...)
		res.late += workers[i].late
		for s, n := range workers[i].statuses {
			res.statuses[s] += n
		}
	}
	slices.Sort(res.latencies)
	return res, nil
}

// worker is one keep-alive connection and what it measured.
type worker struct {
	addr     string
	timeout  time.Duration
	conn     net.Conn
	r        *bufio.Reader
	lat      []time.Duration
	statuses map[string]int
	late     int
}

// do sends one request and reads its answer, connecting first if need
// be; it returns the status, or "error". After an error the connection
// is closed, and the next request opens another.
func (w *worker) do(req []byte) string {
	if w.conn == nil {
		c, err := net.DialTimeout("tcp", w.addr, w.timeout)
		if err != nil {
			return "error"
		}
		w.conn = c
		if w.r == nil {
			w.r = bufio.NewReaderSize(c, 4<<10)
		} else {
			w.r.Reset(c)
		}
	}
	_ = w.conn.SetDeadline(time.Now().Add(w.timeout))
	status, keep, err := w.exchange(req)
	if err != nil || !keep {
		w.close()
	}
	if err != nil {
		return "error"
	}
	return status
}

func (w *worker) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// exchange writes req and reads one response: it returns the status code
// and whether the connection may carry another request.
func (w *worker) exchange(req []byte) (status string, keep bool, err error) {
	if _, err := w.conn.Write(req); err != nil {
		return "", false, err
	}
	return readResponse(w.r)
}

// readResponse reads an HTTP/1.1 response with a Content-Length (or no
// body) and discards its body.
func readResponse(r *bufio.Reader) (status string, keep bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return "", false, err
	}
	// HTTP/1.1 202 Accepted
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return "", false, fmt.Errorf("malformed status line %q", line)
	}
	status = statusText(line[9:12])
	length, keep := -1, true
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return "", false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return "", false, fmt.Errorf("malformed header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return "", false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return "", false, fmt.Errorf("Transfer-Encoding %q: not supported", value)
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		}
	}
	if length < 0 {
		if status == "204" || status == "304" || status[0] == '1' {
			return status, keep, nil
		}
		return "", false, errors.New("answer without Content-Length: not supported")
	}
	if _, err := r.Discard(length); err != nil {
		return "", false, err
	}
	return status, keep, nil
}

// statusText returns the status code as a string without allocating for
// the usual ones.
func statusText(b []byte) string {
	switch string(b) {
	case "200":
		return "200"
	case "202":
		return "202"
	case "429":
		return "429"
	case "503":
		return "503"
	}
	return string(b)
}
