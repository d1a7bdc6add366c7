package deploy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is the part of a Grafana dashboard model the checks read.
type dashboard struct {
	Title         string
	UID           string
	SchemaVersion int
	Templating    struct {
		List []struct {
			Name       string
			Type       string
			Query      json.RawMessage // a string, or an object with "query"
			Datasource *datasourceRef
			AllValue   string
			Current    struct{ Value json.RawMessage }
		}
	}
	Panels []dashboardPanel
}

type dashboardPanel struct {
	ID         int
	Type       string
	Title      string
	Datasource *datasourceRef
	Targets    []struct {
		RefID      string
		Expr       string
		Datasource *datasourceRef
	}
	Panels []dashboardPanel // of a collapsed row
}

type datasourceRef struct{ Type, UID string }

// promDatasource is how every query names its data source: the
// dashboard's datasource variable, so that it imports into any Grafana.
var promDatasource = datasourceRef{Type: "prometheus", UID: "${datasource}"}

// labelValues is the tenant variable's query: label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// checkDashboard returns every problem of a dashboard: its shape (a
// Prometheus datasource variable, a tenant variable, queries that use the
// variable) and every query (see checkQuery).
func checkDashboard(exported map[string]metric, raw []byte) []error {
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return []error{err}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 {
		bad("title %q, uid %q, schemaVersion %d: a dashboard model has all three", d.Title, d.UID, d.SchemaVersion)
	}
	vars := queryVars{}
	var haveDatasource, haveTenant bool
	for _, v := range d.Templating.List {
		var query string
		if err := json.Unmarshal(v.Query, &query); err != nil {
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				bad("variable %s: query %s", v.Name, v.Query)
			}
			query = q.Query
		}
		switch v.Type {
		case "datasource":
			haveDatasource = haveDatasource || (v.Name == "datasource" && query == "prometheus")
		case "query":
			if v.Datasource == nil || *v.Datasource != promDatasource {
				bad("variable %s: datasource %+v, want %+v", v.Name, v.Datasource, promDatasource)
			}
			m := labelValues.FindStringSubmatch(query)
			if m == nil {
				bad("variable %s: query %q is not label_values(selector, label)", v.Name, query)
				continue
			}
			if err := checkLabelValues(exported, m[1], m[2]); err != nil {
				bad("variable %s: %v", v.Name, err)
			}
			haveTenant = haveTenant || (v.Name == "tenant" && m[2] == "tenant")
			vars[v.Name] = cmp.Or(v.AllValue, ".*")
		case "custom":
			var value string
			if err := json.Unmarshal(v.Current.Value, &value); err != nil {
				bad("variable %s: current value %s", v.Name, v.Current.Value)
			}
			vars[v.Name] = value
		}
	}
	if !haveDatasource {
		bad("no variable datasource of type datasource for prometheus")
	}
	if !haveTenant {
		bad("no variable tenant of the tenant label's values")
	}
	ids := map[int]string{}
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				bad("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || *p.Datasource != promDatasource {
				bad("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, promDatasource)
			}
			if len(p.Targets) == 0 {
				bad("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				if q.Datasource != nil && *q.Datasource != promDatasource {
					bad("panel %q, query %s: datasource %+v, want %+v", p.Title, q.RefID, q.Datasource, promDatasource)
				}
				if err := checkQuery(exported, q.Expr, vars); err != nil {
					bad("panel %q, query %s: %v", p.Title, q.RefID, err)
				}
			}
		}
	}
	walk(d.Panels)
	return errs
}

// checkLabelValues checks the selector and label of Grafana's
// label_values(selector, label).
func checkLabelValues(exported map[string]metric, selector, label string) error {
	matchers, err := parser.NewParser(parser.Options{}).ParseMetricSelector(selector)
	if err != nil {
		return fmt.Errorf("%q: %w", selector, err)
	}
	return checkSelector(exported, append(matchers, labels.MustNewMatcher(labels.MatchNotEqual, label, "")))
}

// TestGrafanaDashboard: grafana/fairq.json is a dashboard model with a
// Prometheus datasource variable and a tenant variable, and each of its
// queries parses and selects only metrics (and labels) fairq exports.
func TestGrafanaDashboard(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("grafana/fairq.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkDashboard(exported, raw) {
		t.Error(err)
	}
}

// TestGrafanaDashboardControl: the check reports a panel whose query
// misspells a metric and one whose query does not parse, and only them.
func TestGrafanaDashboardControl(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("grafana/fairq.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	broken := map[string]string{
		"typo":   `sum(rate(fairq_admited_total{tenant=~"$tenant"}[$__rate_interval]))`, //nolint:misspell // the typo is the test
		"syntax": `sum by (reason) (rate(fairq_rejected_total[$__rate_interval])`,
	}
	for title, expr := range broken {
		d["panels"] = append(d["panels"].([]any), map[string]any{
			"id": 1000 + len(title), "type": "timeseries", "title": title,
			"datasource": map[string]any{"type": "prometheus", "uid": "${datasource}"},
			"targets":    []any{map[string]any{"refId": "A", "expr": expr}},
		})
	}
	raw, err = json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	errs := checkDashboard(exported, raw)
	if len(errs) != len(broken) {
		t.Fatalf("%d problems reported, want %d: %v", len(errs), len(broken), errors.Join(errs...))
	}
	for title, want := range map[string]string{"typo": "no metric fairq_admited_total", "syntax": "unclosed left parenthesis"} { //nolint:misspell // the typo is the test
		found := false
		for _, err := range errs {
			found = found || (strings.Contains(err.Error(), `panel "`+title+`"`) && strings.Contains(err.Error(), want))
		}
		if !found {
			t.Errorf("no problem for panel %q saying %q among %v", title, want, errs)
		}
	}
}
