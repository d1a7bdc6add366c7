package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantStatus string
		wantKeep   bool
		wantErr    bool
		wantRest   string // what the reader holds after the response
	}{
		{"202 with a body", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}NEXT", "202", true, false, "NEXT"},
		{"connection close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\ncontent-length: 0\r\n\r\n", "503", false, false, ""},
		{"no body", "HTTP/1.1 204 No Content\r\n\r\nNEXT", "204", true, false, "NEXT"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "", false, true, ""},
		{"no length", "HTTP/1.1 200 OK\r\n\r\nbody", "", false, true, ""},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "", false, true, ""},
		{"not http", "SSH-2.0-OpenSSH\r\n", "", false, true, ""},
		{"cut short", "HTTP/1.1 202 Accepted\r\nContent-Length: 10\r\n\r\n{}", "", false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			status, keep, err := readResponse(r)
			if (err != nil) != tt.wantErr || status != tt.wantStatus || keep != tt.wantKeep {
				t.Fatalf("readResponse = %q, %v, %v; want %q, %v, error %v", status, keep, err, tt.wantStatus, tt.wantKeep, tt.wantErr)
			}
			if rest, _ := io.ReadAll(r); !tt.wantErr && string(rest) != tt.wantRest {
				t.Errorf("left %q unread, want %q", rest, tt.wantRest)
			}
		})
	}
}

func TestRun(t *testing.T) {
	var seen atomic.Int64
	var badKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		if r.URL.Path != "/v1/messages" || string(b) != body || (auth != "Bearer k1" && auth != "Bearer k2") {
			badKey.Store(true)
		}
		if seen.Add(1)%10 == 0 {
			w.Header().Set("Connection", "close") // the worker must reconnect
		}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"id":"x"}`)
	}))
	defer srv.Close()
	res, err := run(context.Background(), config{url: srv.URL, keys: []string{"k1", "k2"}, rate: 2000, duration: 100 * time.Millisecond, conns: 4, timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"202": 200}, res.statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(res.latencies) != 200 || badKey.Load() {
		t.Errorf("%d latencies for 200 requests; a malformed request: %v", len(res.latencies), badKey.Load())
	}
}

// TestRunCountsFromTheSchedule: a server slower than the schedule makes the
// requests queue, and their latency includes the wait.
func TestRunCountsFromTheSchedule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond) // the server's work, not synchronisation
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	// 20 requests due over 20 ms on one connection, served one at a
	// time in at least 100 ms: the last waits at least 80 ms.
	res, err := run(context.Background(), config{url: srv.URL, keys: []string{"k"}, rate: 1000, duration: 20 * time.Millisecond, conns: 1, timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.pct(1); got < 80*time.Millisecond {
		t.Errorf("max latency %v, want at least 80ms: the wait for the connection is not counted", got)
	}
	if res.late < 10 {
		t.Errorf("%d requests late, want most of 20", res.late)
	}
}

func TestRunRefuses(t *testing.T) {
	ok := config{url: "http://127.0.0.1:1", keys: []string{"k"}, rate: 1, duration: time.Second, conns: 1, timeout: time.Second}
	for name, mod := range map[string]func(*config){
		"no keys":    func(c *config) { c.keys = nil },
		"zero rate":  func(c *config) { c.rate = 0 },
		"zero conns": func(c *config) { c.conns = 0 },
		"https":      func(c *config) { c.url = "https://127.0.0.1:1" },
		"no host":    func(c *config) { c.url = "http://" },
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			mod(&c)
			if _, err := run(context.Background(), c); err == nil {
				t.Error("no error")
			}
		})
	}
}
