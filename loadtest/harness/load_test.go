package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestGenerator(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // tenant → lt-seq values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body enqueueBody
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tenant := map[string]string{"Bearer key-a": "a", "Bearer key-b": "b"}[r.Header.Get("Authorization")]
		if tenant == "" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"code":"unauthorized"}`)
			return
		}
		mu.Lock()
		seen[tenant] = append(seen[tenant], body.Attributes[AttrSeq]+"/"+body.Attributes[AttrKind])
		mu.Unlock()
		if tenant == "b" {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"code":"backlog_full"}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"id":"m-%s"}`, body.Attributes[AttrSeq])
	}))
	defer srv.Close()

	g := newGenerator(srv.URL, map[string]string{"a": "key-a", "b": "key-b"}, []Tenant{
		{ID: "a", Rate: 50, PoisonEvery: 2},
		{ID: "b", Rate: 25},
	})
	g.run(t.Context(), time.Now(), 200*time.Millisecond)
	sends, skipped := g.results()
	if skipped != 0 {
		t.Errorf("skipped %d", skipped)
	}
	count := map[string]int{}
	var seqs []int64
	for _, s := range sends {
		count[s.Tenant]++
		seqs = append(seqs, s.Seq)
		switch s.Tenant {
		case "a":
			if !s.Accepted() || s.ID != fmt.Sprintf("m-%d", s.Seq) {
				t.Errorf("send %+v: want 202 with its id", s)
			}
		case "b":
			if s.Status != http.StatusTooManyRequests || s.Code != "backlog_full" || s.Poison {
				t.Errorf("send %+v: want 429 backlog_full", s)
			}
		}
	}
	// A constant rate for 200 ms: messages due at 0, 20, …, 180 ms for a,
	// at 20, 60, 100, 140, 180 ms for b (its start offset half a period).
	if count["a"] != 10 || count["b"] != 5 {
		t.Errorf("sent %v, want a: 10, b: 5", count)
	}
	slices.Sort(seqs)
	if len(slices.Compact(seqs)) != len(sends) {
		t.Errorf("message numbers repeat: %v", seqs)
	}
	poison := 0
	for _, v := range seen["a"] {
		if strings.HasSuffix(v, "/"+kindPoison) {
			poison++
		}
	}
	if poison != 5 {
		t.Errorf("%d poison messages of a, want every second of 10: %v", poison, seen["a"])
	}
}

func TestCarefulGenerator(t *testing.T) {
	// A gateway that loses the answer of a message's first attempt (it
	// hangs up), answers the second 503 with Retry-After, and replays the
	// first acceptance to the third; and answers tenant "down" 503 always.
	var mu sync.Mutex
	attempts := map[string][]string{} // Idempotency-Key → lt-seq of each attempt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body enqueueBody
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		attempts[key] = append(attempts[key], body.Attributes[AttrSeq])
		n := len(attempts[key])
		mu.Unlock()
		if r.Header.Get("Authorization") == "Bearer key-down" {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"code":"unavailable"}`)
			return
		}
		switch n {
		case 1:
			panic(http.ErrAbortHandler) // the connection is cut: a transport error
		case 2:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"code":"unavailable"}`)
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			fmt.Fprintf(w, `{"id":"first-%s"}`, body.Attributes[AttrSeq])
		}
	}))
	defer srv.Close()

	g := newGenerator(srv.URL, map[string]string{"up": "key-up", "down": "key-down"}, nil)
	g.beCareful(retryPolicy{For: 300 * time.Millisecond, Backoff: 5 * time.Millisecond}, 10)
	up := g.send(t.Context(), "up", false)
	down := g.send(t.Context(), "down", false)

	if !up.Accepted() || !up.Replayed || up.ID != fmt.Sprintf("first-%d", up.Seq) {
		t.Errorf("up: %+v: want accepted by a replay, with the first id", up)
	}
	var statuses []int
	for _, a := range up.Attempts {
		statuses = append(statuses, a.Status)
	}
	if !slices.Equal(statuses, []int{0, 503, 200}) || !up.Retried() {
		t.Errorf("up: attempts answered %v, retried %t; want [0 503 200], retried", statuses, up.Retried())
	}
	mu.Lock()
	defer mu.Unlock()
	if up.Key == "" || up.Key == down.Key || len(attempts[up.Key]) != 3 {
		t.Errorf("keys %q and %q; attempts %v: want one key per message, the same on each attempt", up.Key, down.Key, attempts)
	}
	for _, seq := range attempts[up.Key] {
		if seq != fmt.Sprint(up.Seq) {
			t.Errorf("an attempt of message %d carried lt-seq %s", up.Seq, seq)
		}
	}
	if down.Accepted() || down.Status != http.StatusServiceUnavailable || len(down.Attempts) < 2 || down.Took > time.Second {
		t.Errorf("down: status %d after %d attempts in %v: want 503 after retrying for about 300 ms", down.Status, len(down.Attempts), down.Took)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		a    Attempt
		want bool
	}{
		{Attempt{Status: 0, Code: "transport"}, true},
		{Attempt{Status: 503, Code: "unavailable"}, true},
		{Attempt{Status: 429, Code: "rate_limited"}, true},
		{Attempt{Status: 409, Code: "idempotency_key_in_progress"}, true},
		{Attempt{Status: 409, Code: "conflict"}, false},
		{Attempt{Status: 422, Code: "idempotency_key_reused"}, false},
		{Attempt{Status: 500, Code: "internal"}, false},
		{Attempt{Status: 202}, false},
	}
	for _, tt := range tests {
		if got := retryable(tt.a); got != tt.want {
			t.Errorf("retryable(%d %s) = %t, want %t", tt.a.Status, tt.a.Code, got, tt.want)
		}
	}
}

// TestGeneratorPoisson: with poisson set, a tenant's sends keep their mean
// rate, but their gaps vary as a Poisson process's do (a coefficient of
// variation near 1), where evenly spaced sends have gaps that all match.
func TestGeneratorPoisson(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	for _, poisson := range []bool{true, false} {
		g := newGenerator(srv.URL, map[string]string{"a": "key-a"}, []Tenant{{ID: "a", Rate: 500}})
		g.poisson = poisson
		g.run(t.Context(), time.Now(), time.Second)
		sends, _ := g.results()
		// 500 expected; a Poisson count has a standard deviation of 22.
		if len(sends) < 400 || len(sends) > 600 {
			t.Errorf("poisson %t: %d sends in a second at 500 a second", poisson, len(sends))
		}
		due := make([]time.Time, len(sends))
		for i, s := range sends {
			due[i] = s.At.Add(-s.Late)
		}
		slices.SortFunc(due, func(a, b time.Time) int { return a.Compare(b) })
		var sum, sq float64
		for i := 1; i < len(due); i++ {
			gap := due[i].Sub(due[i-1]).Seconds()
			sum, sq = sum+gap, sq+gap*gap
		}
		n := float64(len(due) - 1)
		mean := sum / n
		cv := math.Sqrt(max(sq/n-mean*mean, 0)) / mean
		if poisson && (cv < 0.8 || cv > 1.2) || !poisson && cv > 0.05 {
			t.Errorf("poisson %t: the gaps' coefficient of variation is %.2f", poisson, cv)
		}
		g.client.CloseIdleConnections()
	}
}
