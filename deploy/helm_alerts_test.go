package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/fairq/fairq/internal/testenv"
)

// chartAlerts is the chart's copy of the alert rules, which a
// PrometheusRule renders when prometheusRule.enabled is set: Helm reads
// only files inside the chart (make manifests copies it).
const chartAlerts = "helm/fairq/files/alerts.yaml"

// TestChartAlertRules: the chart carries the alert rules as they are in
// deploy/prometheus; enabled, its PrometheusRule holds every group of them,
// and promtool accepts the rendered rules.
func TestChartAlertRules(t *testing.T) {
	src, copied := readFiles(t, alertsFile, chartAlerts)[0], readFiles(t, alertsFile, chartAlerts)[1]
	if !bytes.Equal(src, copied) {
		t.Fatalf("%s differs from %s: run make manifests", chartAlerts, alertsFile)
	}
	helm := tool(t, "helm", helmInstall)
	out, err := helmTemplate(t.Context(), helm, "--set", "prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(out, &rule); err != nil && rule.Kind == "" {
		t.Fatalf("rendered PrometheusRule: %v\n%s", err, out)
	}
	var want struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if rule.Kind != "PrometheusRule" || len(want.Groups) == 0 {
		t.Fatalf("rendered %q with %d groups; the rules file has %d", rule.Kind, len(rule.Spec.Groups), len(want.Groups))
	}
	if diff := cmp.Diff(want.Groups, rule.Spec.Groups); diff != "" {
		t.Errorf("PrometheusRule groups (-rules file +rendered):\n%s", diff)
	}
	// What the operator's Prometheus loads: the rendered groups as a rules
	// file, through promtool.
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testenv.Tool(t, "promtool", promtoolInstall)
	if out, err := promtool(t, bin, dir, "check", "rules", "rendered.yaml"); err != nil {
		t.Errorf("promtool check rules on the rendered PrometheusRule: %v\n%s", err, out)
	}
}
