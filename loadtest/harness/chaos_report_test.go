package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteChaosReport(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sends, deliveries := chaosFixture(start)
	f, err := NewFault(FaultSQSStall, true)
	if err != nil {
		t.Fatal(err)
	}
	// The report marks a fault the short test does not hold to its
	// expectations; the stall is held to them, so lift that here.
	f.Expect.Enforced = false
	r := &ChaosResult{Fault: f, Start: start, Drained: true, LoadAvg: [2]string{"1.00", "2.00"}}
	r.analyse(sends, deliveries, []MemSample{{At: time.Second, Role: "gateway", RSS: 30 << 20, HWM: 31 << 20}})
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadChaosResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Lost != 1 || back.RetriedDuplicates != 1 || back.Fault.Name != FaultSQSStall || len(back.Checks) != len(r.Checks) {
		t.Errorf("read back %+v", back)
	}
	for _, name := range []string{"messages.csv", "deliveries.csv", "memory.csv"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(string(data), "\n"); lines < 2 {
			t.Errorf("%s: %d lines", name, lines)
		}
	}

	report, err := WriteChaosReport(dir, []*ChaosResult{r}, Environment{Command: "go run ./loadtest/chaos -short", Commit: "abc1234", Date: start})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"at commit abc1234",
		"| sqs-stall | 5 | 4 | 1 | 1 | 1 of 2 | 3 | 300 ms / 2.00 s | 30 MiB (31 MiB) | – | 1 | 1 | 1.00–2.00 | **FAIL** (2 of 3), not enforced |",
		"| sqs-stall | accepted messages lost | ≤ 0 | 1 of 5 | **FAIL** | yes |",
		"| sqs-stall | slowest 503 | ≤ 3.50 s | 2.00 s (3 answers) | pass | no |",
	} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	var all []ChaosResult
	data, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &all); err != nil || len(all) != 1 || all[0].Accepted != 5 {
		t.Errorf("chaos.json: %v, %+v", err, all)
	}
}
