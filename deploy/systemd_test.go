package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exposureMax is the highest `systemd-analyze security` exposure the units
// may have (0 is fully locked down, 10 unprotected; "OK" ends at 3.9).
const exposureMax = 3.0

// TestSystemdSecurity scores each unit with systemd's own analyzer, offline
// (no running systemd needed), and rejects a unit whose exposure is above
// exposureMax or whose directives systemd does not know.
func TestSystemdSecurity(t *testing.T) {
	analyze := tool(t, "systemd-analyze", "install Debian's systemd package (make deps)")
	units, _ := filepath.Glob("systemd/*.service")
	if len(units) != 2 {
		t.Fatalf("units %v, want the gateway's and the worker's", units)
	}
	for _, u := range units {
		t.Run(filepath.Base(u), func(t *testing.T) {
			score, out := exposure(t, analyze, u)
			t.Logf("%s: exposure %.1f", u, score)
			if score > exposureMax {
				t.Errorf("%s: exposure %.1f, want at most %.1f:\n%s", u, score, exposureMax, out)
			}
			if unknown := unknownDirectives(out); unknown != "" {
				t.Errorf("%s: systemd does not know: %s", u, unknown)
			}
		})
	}

	// Negative controls: the unit without its sandbox scores as exposed,
	// and a misspelt directive is reported.
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare.service")
	write(t, bare, "[Service]\nExecStart=/usr/local/bin/fairq worker --config /etc/fairq/fairq.yaml\nDynamicUser=yes\n")
	if score, out := exposure(t, analyze, bare); score <= exposureMax {
		t.Errorf("an unsandboxed unit scored %.1f: the check cannot fail\n%s", score, out)
	}
	typo := filepath.Join(dir, "typo.service")
	write(t, typo, "[Service]\nExecStart=/usr/local/bin/fairq worker --config /etc/fairq/fairq.yaml\nProtectSystm=strict\n")
	if _, out := exposure(t, analyze, typo); unknownDirectives(out) == "" {
		t.Errorf("a misspelt directive went unreported:\n%s", out)
	}
}

var overall = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

// exposure runs systemd-analyze security on a unit file and returns its
// overall exposure and the analyzer's output.
func exposure(t *testing.T, analyze, unit string) (float64, string) {
	t.Helper()
	abs, err := filepath.Abs(unit)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), analyze, "security", "--offline=true", "--no-pager", abs)
	cmd.Env = append(os.Environ(), "SYSTEMD_COLORS=0")
	out, _ := cmd.CombinedOutput() // exits non-zero above its default threshold: the score says
	m := overall.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security %s: no overall exposure in:\n%s", unit, out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return score, string(out)
}

// unknownDirectives returns the analyzer's complaints about directives it
// does not know, if any.
func unknownDirectives(out string) string {
	var bad []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, "Unknown key") || strings.Contains(line, "Unknown section") || strings.Contains(line, "Unknown lvalue") {
			bad = append(bad, strings.TrimSpace(line))
		}
	}
	return strings.Join(bad, "; ")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
