package harness

import (
	"encoding/json"
	"fmt"
	"io"
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
