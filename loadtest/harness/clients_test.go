package harness

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestClientsProcess offers a load from a clients process, as a fleet run
// does, to a stand-in gateway that accepts one tenant's messages and
// refuses the other's, and reads back every send.
func TestClientsProcess(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("Authorization") == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") == "Bearer key-b" {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"code":"backlog_full"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"id":"m-1"}`))
	}))
	defer gw.Close()
	root, err := ModuleRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := BuildClients(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClientsConfig{URLs: []string{gw.URL}, Keys: map[string]string{"a": "key-a", "b": "key-b"},
		Tenants:  []Tenant{{ID: "a", Rate: 20}, {ID: "b", Rate: 10}},
		Start:    time.Now().Add(clientsLead),
		Duration: time.Second}
	sends, skipped, cpu, err := offerFromProcess(t.Context(), bin, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]map[int]int{"a": {}, "b": {}}
	for _, s := range sends {
		count[s.Tenant][s.Status]++
		if s.At.Before(cfg.Start) {
			t.Errorf("send %d at %v, before the load's start %v", s.Seq, s.At, cfg.Start)
		}
		if s.Status == http.StatusAccepted && s.ID != "m-1" {
			t.Errorf("send %d: accepted as %q, want m-1", s.Seq, s.ID)
		}
	}
	if count["a"][http.StatusAccepted] != 20 || count["b"][http.StatusTooManyRequests] != 10 || len(sends) != 30 || skipped != 0 {
		t.Errorf("sends %v (%d in all), %d skipped; want a: 20 accepted, b: 10 refused, none skipped", count, len(sends), skipped)
	}
	if _, err := os.Stat(filepath.Join(dir, "clients.log")); err != nil {
		t.Error(err)
	}
	// Its CPU time, read from its resource usage once it exited: it ran
	// 30 requests and read its configuration, which takes some.
	if runtime.GOOS == "linux" && cpu <= 0 {
		t.Errorf("clients process CPU time %v, want some", cpu)
	}
}

func TestReadSendsRefusesATruncatedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sends.jsonl")
	for _, tt := range []struct{ name, data string }{
		{"empty", ""},
		{"cut in a line", `{"Seq":1,"Tenant":"a"}` + "\n" + `{"Seq":2,"Ten`},
		{"no last line", `{"Seq":1,"Tenant":"a"}` + "\n" + `{"Seq":2,"Tenant":"a","Attempts":"x"}` + "\n"},
	} {
		if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
			t.Fatal(err)
		}
		if sends, _, err := readSends(path); err == nil {
			t.Errorf("%s: read %d sends, want an error", tt.name, len(sends))
		}
	}
}
