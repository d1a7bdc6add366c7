package consumer_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
)

// appRecord is one line of testapp/app.mjs's output.
type appRecord struct {
	Path            string            `json:"path"`
	Msgid           string            `json:"msgid"`
	Queue           string            `json:"queue"`
	ReceiveCount    int               `json:"receive_count"`
	FirstReceivedAt string            `json:"first_received_at"`
	Task            string            `json:"task"`
	ScheduledAt     string            `json:"scheduled_at"`
	Attrs           map[string]string `json:"attrs"`
	Body            string            `json:"body"`
	Status          int               `json:"status"`
	Problems        []string          `json:"problems"`
}

// startSQSDApp runs testapp/app.mjs, an application written only to the
// aws-sqsd contract, and returns its URL and its records.
func startSQSDApp(t *testing.T) (string, <-chan appRecord) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv(testenv.RequireEnv) == "1" {
			t.Fatalf("node is not installed (%s=1)", testenv.RequireEnv)
		}
		t.Skip("node is not installed: the aws-sqsd test application needs it")
	}
	cmd := exec.Command(node, filepath.Join("..", "testapp", "app.mjs"))
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // the app exits when its stdin closes
		for range lines {
		}
		cmd.Wait()
	})
	first := recv(t, lines, 10*time.Second, "the app's first line")
	port, ok := strings.CutPrefix(first, "listening on ")
	if !ok {
		t.Fatalf("app said %q, want listening on <port>", first)
	}
	records := make(chan appRecord, 100)
	go func() {
		defer close(records)
		for line := range lines {
			var r appRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Errorf("app printed %q: %v", line, err)
				continue
			}
			records <- r
		}
	}()
	return "http://127.0.0.1:" + port + "/", records
}

// TestSQSDApp: an application written only to the documented aws-sqsd
// contract runs unchanged behind the worker: jobs, a retry driven by the
// receive count, and a periodic task.
func TestSQSDApp(t *testing.T) {
	url, records := startSQSDApp(t)
	b, names := setup(t, "memory")
	id1 := send(t, b, names.Live[0], msg{body: `{"id":1}`, tenant: "acme", attrs: map[string]string{"priority": "high"}})
	id2 := send(t, b, names.Live[1], msg{body: `{"id":2,"fail_until":2}`, tenant: "acme"})
	task := envelope.Task{Name: "cleanup", Path: "/scheduled", ScheduledAt: time.Date(2025, 6, 1, 3, 0, 0, 0, time.UTC)}
	send(t, b, names.Live[0], msg{body: "cleanup", attrs: map[string]string{envelope.AttrTask: task.Encode()}})
	w := start(t, consumer.Config{
		Backend: b, Names: names,
		Handler:     newPush(t, consumer.PushConfig{URL: url, Version: "test"}),
		BackoffBase: 100 * time.Millisecond,
	})
	var got []appRecord
	for range 4 {
		got = append(got, recv(t, records, 20*time.Second, "request to the app"))
	}
	stop(t, w)
	for _, r := range got {
		if len(r.Problems) > 0 {
			t.Errorf("the app found the request to %s against the contract: %v", r.Path, r.Problems)
		}
	}
	type seen struct {
		Path, Msgid, Task, ScheduledAt, Body string
		Count, Status                        int
		Attrs                                map[string]string
	}
	var short []seen
	for _, r := range got {
		short = append(short, seen{r.Path, r.Msgid, r.Task, r.ScheduledAt, r.Body, r.ReceiveCount, r.Status, r.Attrs})
	}
	sort.Slice(short, func(i, j int) bool {
		a, b := short[i], short[j]
		return a.Path+a.Body+string(rune('0'+a.Count)) < b.Path+b.Body+string(rune('0'+b.Count))
	})
	want := []seen{
		{Path: "/scheduled", Task: "cleanup", ScheduledAt: "2025-06-01T03:00:00Z", Count: 1, Status: 200, Attrs: map[string]string{}},
		{Path: "/", Msgid: id1, Body: `{"id":1}`, Count: 1, Status: 200, Attrs: map[string]string{"priority": "high"}},
		{Path: "/", Msgid: id2, Body: `{"id":2,"fail_until":2}`, Count: 1, Status: 500, Attrs: map[string]string{}},
		{Path: "/", Msgid: id2, Body: `{"id":2,"fail_until":2}`, Count: 2, Status: 200, Attrs: map[string]string{}},
	}
	opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Msgid" }, cmp.Ignore())
	if diff := cmp.Diff(want, short, opt); diff != "" {
		t.Errorf("what the app saw (-want +got):\n%s", diff)
	}
	for _, q := range names.All() {
		if n := depth(t, b, q); n != 0 {
			t.Errorf("%s holds %d messages, want 0", q, n)
		}
	}
}
