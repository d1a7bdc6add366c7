package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Environment describes where and how the experiment ran, for the report.
type Environment struct {
	// Command is the command line that ran it.
	Command string
	// Machine describes the machine: CPUs, OS, Go version.
	Machine string
	// Version is fairq's version (`fairq version`).
	Version string
	// Commit is the source's commit, when known (the chaos report names
	// it).
	Commit string
	Date   time.Time
}

// WriteReport writes report.md and one chart per scenario,
// <scenario>.png, into dir, and returns the report's text.
func WriteReport(dir string, rs []*ScenarioResult, env Environment) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fairq fairness experiment\n\n")
	fmt.Fprintf(&b, "Run on %s with `%s`; %s, %s.\n\n", env.Date.UTC().Format("2006-01-02 15:04 MST"), env.Command, env.Version, env.Machine)
	fmt.Fprintf(&b, "Latency is enqueue-to-start: from the gateway's acceptance (X-Fairq-Enqueued-At) to the start of the message's first delivery to the application. "+
		"Quiet tenants' figures pool all their messages sent after the warmup. Goodput counts messages whose first success ended in that window. "+
		"A mode marked ⚠ ran while other work on the machine held the harness up (its sends left more than %v late at p99).\n\n"+
		"Each chart shows, for each mode, every tenant's p95 latency by time of sending (the quiet tenants in colour, the misbehaving tenant wide and pale beneath them, "+
		"the quiet tenants' baseline dashed) and, below, the messages in each kind of queue through the load and the drain after it. "+
		"At the end of a run the harness redrives the dead-letter queue so that the sink can name each dead letter: "+
		"where there are any, the dead-letter queue empties into the live queues there.\n\n", DisturbedLate)
	fmt.Fprintf(&b, "## Done when\n\n")
	WriteCriteria(&b, Criteria(rs))
	for _, sr := range rs {
		if len(sr.modes()) == 0 {
			continue
		}
		chart := sr.Scenario.Name + ".png"
		f, err := os.Create(filepath.Join(dir, chart))
		if err != nil {
			return nil, err
		}
		err = sr.WriteChart(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("chart of %s: %w", sr.Scenario.Name, err)
		}
		sr.WriteMarkdown(&b, chart)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), b.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// BinaryVersion asks a fairq binary for its version (`fairq version`), on
// one line.
func BinaryVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "fairq (version unknown)"
	}
	return strings.Join(strings.Split(string(bytes.TrimSpace(out)), "\n"), ", ")
}
