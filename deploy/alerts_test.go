package deploy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/fairq/fairq/internal/testenv"
)

const (
	alertsFile      = "prometheus/alerts.yaml"
	alertTestsFile  = "prometheus/alerts_test.yaml"
	runbookFile     = "../docs/alerts.md"
	promtoolInstall = "run `make deps`, which takes it from Debian's prometheus package"
)

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr, For string
			Labels, Annotations      map[string]string
		}
	}
}

// ruleTests is a promtool test file.
type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	}
}

var severities = []string{"critical", "warning", "info"}

// checkRules returns every problem of a rule file that promtool does not
// look for: a query that selects a metric (or label) fairq does not
// export, an alert without a severity, a summary, a description or a
// runbook section, and an alert its tests never see firing and not firing.
func checkRules(exported map[string]metric, rules, tests, runbook []byte) []error {
	var f ruleFile
	if err := yaml.Unmarshal(rules, &f); err != nil {
		return []error{err}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var alerts []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if err := checkQuery(exported, r.Expr, nil); err != nil {
				bad("rule %s: %v", name, err)
			}
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !slices.Contains(severities, r.Labels["severity"]) {
				bad("alert %s: severity %q, want one of %v", r.Alert, r.Labels["severity"], severities)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					bad("alert %s: no %s annotation", r.Alert, a)
				}
			}
			anchor := strings.ToLower(r.Alert)
			if want := "docs/alerts.md#" + anchor; r.Annotations["runbook"] != want {
				bad("alert %s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
			}
			if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(r.Alert) + `$`).Match(runbook) {
				bad("alert %s: docs/alerts.md has no section ## %s", r.Alert, r.Alert)
			}
		}
	}
	var ts ruleTests
	if err := yaml.Unmarshal(tests, &ts); err != nil {
		return append(errs, err)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range ts.Tests {
		for _, s := range tc.InputSeries {
			lbls, err := parser.NewParser(parser.Options{}).ParseMetric(s.Series)
			if err != nil {
				bad("test series %q: %v", s.Series, err)
				continue
			}
			// A series is held to the metrics as a selector of all its labels.
			sel := "{" + strings.TrimPrefix(lbls.String(), "{")
			if err := checkQuery(exported, sel, nil); err != nil {
				bad("test series: %v", err)
			}
		}
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				firing[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !firing[a] || !quiet[a] {
			bad("alert %s: its tests see it firing %v, not firing %v; want both", a, firing[a], quiet[a])
		}
	}
	return errs
}

// promtool runs promtool with args in dir and returns its output.
func promtool(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func readFiles(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// TestAlertRules: promtool accepts the rule file and its tests pass; every
// query selects metrics fairq exports; every alert has its severity,
// annotations and runbook section, and is tested firing and not firing.
func TestAlertRules(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	files := readFiles(t, alertsFile, alertTestsFile, runbookFile)
	for _, err := range checkRules(exported, files[0], files[1], files[2]) {
		t.Error(err)
	}
	bin := testenv.Tool(t, "promtool", promtoolInstall)
	out, err := promtool(t, bin, "prometheus", "check", "rules", filepath.Base(alertsFile))
	t.Logf("promtool check rules:\n%s", out)
	if err != nil {
		t.Errorf("promtool check rules: %v", err)
	}
	out, err = promtool(t, bin, "prometheus", "test", "rules", filepath.Base(alertTestsFile))
	t.Logf("promtool test rules:\n%s", out)
	if err != nil {
		t.Errorf("promtool test rules: %v", err)
	}
}

// TestAlertRulesControl: the same checks catch a broken rule file, a wrong
// expectation in the tests, a misspelt metric in a rule or a test series,
// and an alert without its runbook section.
func TestAlertRulesControl(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	files := readFiles(t, alertsFile, alertTestsFile, runbookFile)
	rules, tests, runbook := string(files[0]), string(files[1]), files[2]

	// replace returns s with the first old replaced, and fails the test if
	// there is none, so that a control cannot pass by changing nothing.
	replace := func(t *testing.T, s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("control: %q not found", old)
		}
		return strings.Replace(s, old, new, 1)
	}

	t.Run("misspelt metric", func(t *testing.T) {
		broken := replace(t, rules, "fairq_backlog_per_instance)", "fairq_backlog_per_instanse)") //nolint:misspell // the typo is the test
		errs := checkRules(exported, []byte(broken), []byte(tests), runbook)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no metric fairq_backlog_per_instanse") { //nolint:misspell // the typo is the test
			t.Errorf("checkRules of a misspelt metric: %v", errors.Join(errs...))
		}
	})
	t.Run("misspelt series in the tests", func(t *testing.T) {
		broken := replace(t, tests, "series: 'fairq_send_calls_total{", "series: 'fairq_send_call_total{")
		errs := checkRules(exported, []byte(rules), []byte(broken), runbook)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no metric fairq_send_call_total") {
			t.Errorf("checkRules of a misspelt test series: %v", errors.Join(errs...))
		}
	})
	t.Run("alert without its runbook", func(t *testing.T) {
		broken := replace(t, string(runbook), "## FairqSQSErrors\n", "## SQS errors\n")
		errs := checkRules(exported, []byte(rules), []byte(tests), []byte(broken))
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no section ## FairqSQSErrors") {
			t.Errorf("checkRules of a missing runbook section: %v", errors.Join(errs...))
		}
	})

	bin := testenv.Tool(t, "promtool", promtoolInstall)
	// run writes the rule file and the tests into a directory of their
	// own and runs promtool there.
	run := func(t *testing.T, rules, tests string, args ...string) (string, error) {
		t.Helper()
		dir := t.TempDir()
		for name, content := range map[string]string{filepath.Base(alertsFile): rules, filepath.Base(alertTestsFile): tests} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return promtool(t, bin, dir, args...)
	}
	t.Run("the copy passes", func(t *testing.T) {
		if out, err := run(t, rules, tests, "test", "rules", filepath.Base(alertTestsFile)); err != nil {
			t.Fatalf("promtool test rules on an unchanged copy: %v\n%s", err, out)
		}
	})
	t.Run("broken rule file", func(t *testing.T) {
		broken := replace(t, rules, "> 0.05", "> > 0.05")
		out, err := run(t, broken, tests, "check", "rules", filepath.Base(alertsFile))
		if err == nil || !strings.Contains(out, "parse error") {
			t.Errorf("promtool check rules accepted a broken expression (%v):\n%s", err, out)
		}
	})
	t.Run("wrong severity expected", func(t *testing.T) {
		wrong := replace(t, tests, "exp_labels: {severity: critical, job: fairq-worker}", "exp_labels: {severity: warning, job: fairq-worker}")
		out, err := run(t, rules, wrong, "test", "rules", filepath.Base(alertTestsFile))
		if err == nil || !strings.Contains(out, "FAILED") {
			t.Errorf("promtool test rules passed a wrong expectation (%v):\n%s", err, out)
		}
	})
	t.Run("firing expected where none fires", func(t *testing.T) {
		wrong := replace(t, tests, "      - eval_time: 30m\n        alertname: FairqNoisyTenantRefused\n        exp_alerts: []",
			"      - eval_time: 30m\n        alertname: FairqNoisyTenantRefused\n        exp_alerts:\n          - exp_labels: {severity: info, job: fairq-gateway, tenant: a}")
		out, err := run(t, rules, wrong, "test", "rules", filepath.Base(alertTestsFile))
		if err == nil || !strings.Contains(out, "FAILED") {
			t.Errorf("promtool test rules passed an alert that does not fire (%v):\n%s", err, out)
		}
	})
}
