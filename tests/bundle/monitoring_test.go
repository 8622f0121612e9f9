package bundle

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The alerts and the dashboard the chart ships are read here the way Prometheus and Grafana
// read them: every expression goes through the Prometheus PromQL parser, and every metric it
// names must be one the operator serves. A renamed metric, or a query Grafana would only
// reject at display time, fails here instead of leaving an alert that never fires or a panel
// that shows "No data".

// runbookBase is where every alert's runbook_url points: a section of docs/operations.md.
const runbookBase = "https://github.com/celld/celld-operator/blob/main/docs/operations.md#"

// dashboardFile is the dashboard the chart embeds in its ConfigMap.
const dashboardFile = "files/dashboards/celld-operator.json"

const (
	fleetMetrics       = "controllers/fleet/metrics.go"
	operatorMetrics    = "internal/opmetrics/opmetrics.go"
	applicationMetrics = "controllers/application/metrics.go"
	controllerRuntime  = "sigs.k8s.io/controller-runtime"
)

// metricFamily is one metric family the alerts and the dashboard may name.
type metricFamily struct {
	name string
	// histogram: its series are name_bucket, name_sum and name_count (and name itself when
	// scraped as a native histogram).
	histogram bool
	// module and file say where the family is defined: file in this repository when module is
	// empty, else file in module at the version go.mod selects.
	module, file string
	// spelled are the string literals the source must contain (default: the quoted name), so
	// that renaming the metric there fails TestExportedMetricsAreDefinedWhereTheListSays.
	spelled []string
}

// fleetGauge is a gauge of the fleet reconciler, named "celld_fleet_" + its key in gaugeHelp.
func fleetGauge(suffix string) metricFamily {
	return metricFamily{name: "celld_fleet_" + suffix, file: fleetMetrics,
		spelled: []string{`"celld_fleet_" + name`, strconv.Quote(suffix) + ":"}}
}

// exportedMetrics is every metric family an alert or a dashboard query may name, with the
// source that defines it.
var exportedMetrics = []metricFamily{
	// The fleet reconciler's gauges, labelled namespace and fleet.
	fleetGauge("desired_replicas"),
	fleetGauge("applied_replicas"),
	fleetGauge("observed_replicas"),
	fleetGauge("ready_replicas"),
	fleetGauge("joining_replicas"),
	fleetGauge("terminating_replicas"),
	fleetGauge("replica_observation_valid"),
	fleetGauge("blocked"),
	fleetGauge("blocked_since_timestamp_seconds"),
	fleetGauge("capacity_desired_replicas"),
	// The capacity policy's step counter, labelled namespace, fleet and direction.
	{name: "celld_fleet_capacity_steps_total", file: fleetMetrics},
	// The condition state-set, labelled namespace, fleet, type, status and reason.
	{name: "celld_fleet_condition", file: fleetMetrics},
	// The self-healing counter, labelled namespace, fleet, action and reason.
	{name: "celld_fleet_healing_actions_total", file: fleetMetrics},
	// The status writes of all fleets, by kind, and the counters-only writes put off.
	{name: "celld_operator_status_writes_total", file: fleetMetrics},
	{name: "celld_operator_status_writes_paced_total", file: fleetMetrics},
	// The changes of cached fleet children by kind, and whether each woke its fleet.
	{name: "celld_operator_child_events_total", file: "controllers/nscache/metrics.go"},
	// The build, labelled version, goversion and revision.
	{name: "celld_operator_build_info", file: operatorMetrics},
	// The application observer's series: gauges labelled namespace and fleet, and an
	// unlabelled histogram of the collection time.
	{name: "celld_fleet_application_observed_nodes", file: applicationMetrics},
	{name: "celld_fleet_application_unavailable_nodes", file: applicationMetrics},
	{name: "celld_fleet_application_converged", file: applicationMetrics},
	{name: "celld_fleet_application_collection_seconds", histogram: true, file: applicationMetrics},
	// controller-runtime's controller metrics, labelled controller (the fleet reconciler is
	// "celldfleet"), registered on the manager's registry at init.
	{name: "controller_runtime_reconcile_total", module: controllerRuntime, file: "pkg/internal/controller/metrics/metrics.go"},
	{name: "controller_runtime_reconcile_errors_total", module: controllerRuntime, file: "pkg/internal/controller/metrics/metrics.go"},
	{name: "controller_runtime_reconcile_panics_total", module: controllerRuntime, file: "pkg/internal/controller/metrics/metrics.go"},
	{name: "controller_runtime_reconcile_time_seconds", histogram: true, module: controllerRuntime, file: "pkg/internal/controller/metrics/metrics.go"},
	// client-go's work queue depth through controller-runtime's provider: subsystem "workqueue",
	// name "depth", labelled name and controller.
	{name: "workqueue_depth", module: controllerRuntime, file: "pkg/metrics/workqueue.go", spelled: []string{`"workqueue"`, `"depth"`}},
	// client-go's request counter, labelled code, method and host. controller-runtime registers
	// it by default; its other rest_client_* series are opt-in, and the operator does not opt in.
	{name: "rest_client_requests_total", module: controllerRuntime, file: "pkg/metrics/client_go_adapter.go"},
}

// seriesFamilies maps every series name the exported families produce to its family.
func seriesFamilies() map[string]metricFamily {
	out := map[string]metricFamily{}
	for _, f := range exportedMetrics {
		out[f.name] = f
		if f.histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				out[f.name+suffix] = f
			}
		}
	}
	return out
}

// promQuery is one PromQL expression and where it was found.
type promQuery struct{ where, expr string }

// monitoringValues turn on everything the chart renders for monitoring.
var monitoringValues = map[string]any{"metrics": map[string]any{"enabled": true,
	"serviceMonitor":   map[string]any{"enabled": true, "tlsConfig": map[string]any{"insecureSkipVerify": true}},
	"prometheusRule":   map[string]any{"enabled": true},
	"grafanaDashboard": map[string]any{"enabled": true}}}

// TestAlertAndDashboardQueriesParseAndNameOnlyExportedMetrics renders the chart with the
// PrometheusRule and the dashboard ConfigMap, parses every alert expression, every panel query
// and every variable query with the Prometheus parser, and requires each metric they select
// to be in exportedMetrics.
func TestAlertAndDashboardQueriesParseAndNameOnlyExportedMetrics(t *testing.T) {
	objs := mustRender(t, monitoringValues)
	queries := alertQueries(t, one(t, objs, "PrometheusRule", "celld-operator"))
	if len(queries) < 2 {
		t.Fatalf("found %d alert expressions, want CelldFleetBlocked's and CelldFleetUnavailable's at least; the scan is broken", len(queries))
	}
	dashboard := dashboardOf(t, one(t, objs, "ConfigMap", "celld-operator-dashboard"))
	panelQueries := dashboardQueries(t, dashboard)
	if len(panelQueries) < 10 {
		t.Fatalf("found %d dashboard queries; the scan is broken", len(panelQueries))
	}
	queries = append(queries, panelQueries...)

	known := seriesFamilies()
	p := parser.NewParser(parser.Options{})
	for _, q := range queries {
		expr, err := p.ParseExpr(q.expr)
		if err != nil {
			t.Errorf("%s: the Prometheus parser refuses %q: %v", q.where, q.expr, err)
			continue
		}
		names := selectedMetrics(t, q, expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.where, q.expr)
		}
		for _, name := range names {
			if _, ok := known[name]; !ok {
				t.Errorf("%s names %s, which the operator does not export (see exportedMetrics): the query would find no series", q.where, name)
			}
		}
	}
}

// metricName finds the operator's metric names in prose: celld_*, and the controller-runtime
// and client-go families the alerts and the dashboard use.
var metricName = regexp.MustCompile(`\b(?:celld|controller_runtime|workqueue|rest_client)_[a-z0-9_]*[a-z0-9]\b`)

// TestEveryMetricTheDocsNameIsExported: every metric name docs/operations.md, the chart's
// values.yaml and the chart README mention is one the operator exports (a series of a family in
// exportedMetrics), and every celld_* family is documented in docs/operations.md. The alerts
// and the dashboard are checked by TestAlertAndDashboardQueriesParseAndNameOnlyExportedMetrics.
func TestEveryMetricTheDocsNameIsExported(t *testing.T) {
	known := seriesFamilies()
	docs := map[string]string{}
	for _, f := range []string{"docs/operations.md", chartDir + "/values.yaml", chartDir + "/README.md"} {
		text, err := os.ReadFile(repo(t, f))
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(text)
	}
	found := 0
	for f, text := range docs {
		for _, name := range metricName.FindAllString(text, -1) {
			found++
			if _, ok := known[name]; !ok {
				t.Errorf("%s names %s, which the operator does not export (see exportedMetrics)", f, name)
			}
		}
	}
	if found < 10 {
		t.Fatalf("found %d metric names in the docs; the scan is broken", found)
	}
	for _, m := range exportedMetrics {
		if strings.HasPrefix(m.name, "celld_") && !strings.Contains(docs["docs/operations.md"], "`"+m.name+"`") {
			t.Errorf("%s is exported but docs/operations.md does not list it (as `%s`)", m.name, m.name)
		}
	}
}

// TestAlertRulesLoadInPrometheus reads the rendered PrometheusRule's groups the way Prometheus
// loads a rule file (rulefmt, strict about fields): expressions, durations, and the label and
// annotation templates ({{ $labels.fleet }}, {{ $value | humanizeDuration }}). One bad template
// makes Prometheus refuse the whole file, and with it every alert.
func TestAlertRulesLoadInPrometheus(t *testing.T) {
	rule := one(t, mustRender(t, monitoringValues), "PrometheusRule", "celld-operator")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	content, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	_, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("Prometheus would refuse the chart's rules: %v", err)
	}
}

// selectedMetrics returns the metric name of every selector in expr; a selector must name its
// metric exactly, or it could not be checked.
func selectedMetrics(t *testing.T, q promQuery, expr parser.Expr) []string {
	t.Helper()
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && name == "" {
				if m.Type != labels.MatchEqual {
					t.Errorf("%s: selector %s matches metric names by %s; name the metric exactly", q.where, vs, m.Type)
				}
				name = m.Value
			}
		}
		if name == "" {
			t.Errorf("%s: selector %s names no metric", q.where, vs)
			return nil
		}
		names = append(names, name)
		return nil
	})
	return names
}

// alertQueries returns the expression of every rule of a PrometheusRule.
func alertQueries(t *testing.T, rule *unstructured.Unstructured) []promQuery {
	t.Helper()
	var out []promQuery
	for _, r := range rules(t, rule) {
		expr, _ := r["expr"].(string)
		where := fmt.Sprintf("alert %v", r["alert"])
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s has no expr", where)
			continue
		}
		out = append(out, promQuery{where: where, expr: expr})
	}
	return out
}

// rules returns every rule of every group of a PrometheusRule.
func rules(t *testing.T, rule *unstructured.Unstructured) []map[string]any {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("the PrometheusRule has no groups (%v)", err)
	}
	var out []map[string]any
	for _, g := range groups {
		rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rs {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

// dashboardOf decodes the dashboard JSON a ConfigMap carries.
func dashboardOf(t *testing.T, cm *unstructured.Unstructured) map[string]any {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if len(data) != 1 {
		t.Fatalf("the dashboard ConfigMap holds %d keys, want the one dashboard", len(data))
	}
	for key, text := range data {
		if !strings.HasSuffix(key, ".json") {
			t.Errorf("the dashboard's key %s lacks .json; the Grafana sidecar writes it as that file and loads only *.json", key)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			t.Fatalf("the dashboard %s is not JSON: %v", key, err)
		}
		return d
	}
	return nil
}

// grafanaVariable is a variable reference in a Grafana query: $name, ${name}, ${name:format}
// or [[name]].
var grafanaVariable = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]`)

// grafanaIntervals are the built-in variables that stand for a duration.
var grafanaIntervals = []string{"__rate_interval", "__interval", "__range"}

// dashboardQueries returns every panel query and every query variable of a dashboard, with
// Grafana's variables replaced the way Grafana would before sending them to Prometheus: the
// built-in intervals by a duration, the dashboard's own variables by a value. A variable the
// dashboard does not define fails: Grafana would send it as it is.
func dashboardQueries(t *testing.T, d map[string]any) []promQuery {
	t.Helper()
	defined := map[string]bool{}
	var variables []map[string]any
	templating, _ := d["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		v := v.(map[string]any)
		defined[fmt.Sprint(v["name"])] = true
		if v["type"] == "query" {
			variables = append(variables, v)
		}
	}
	expand := func(where, expr string) string {
		return grafanaVariable.ReplaceAllStringFunc(expr, func(ref string) string {
			m := grafanaVariable.FindStringSubmatch(ref)
			name := m[1] + m[2] + m[3]
			switch {
			case slices.Contains(grafanaIntervals, name):
				return "5m"
			case defined[name]:
				return "value"
			}
			t.Errorf("%s: %q uses the variable %s, which the dashboard does not define", where, expr, ref)
			return ref
		})
	}

	var out []promQuery
	for _, v := range variables {
		where := fmt.Sprintf("dashboard variable %v", v["name"])
		q := v["query"]
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		expr, ok := variableExpr(fmt.Sprint(q))
		if !ok {
			t.Errorf("%s: query %q is neither label_values(<selector>, <label>) nor query_result(<expr>)", where, q)
			continue
		}
		out = append(out, promQuery{where: where, expr: expand(where, expr)})
	}
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			p := p.(map[string]any)
			if nested, _ := p["panels"].([]any); len(nested) > 0 {
				walk(nested) // a collapsed row holds its panels
			}
			if p["type"] == "row" {
				continue
			}
			targets, _ := p["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("dashboard panel %q has no query", p["title"])
			}
			for _, tg := range targets {
				tg := tg.(map[string]any)
				where := fmt.Sprintf("dashboard panel %q query %v", p["title"], tg["refId"])
				expr, _ := tg["expr"].(string)
				if strings.TrimSpace(expr) == "" {
					t.Errorf("%s has no expr", where)
					continue
				}
				out = append(out, promQuery{where: where, expr: expand(where, expr)})
			}
		}
	}
	panels, _ := d["panels"].([]any)
	walk(panels)
	return out
}

// variableExpr returns the PromQL inside a Grafana Prometheus variable query.
func variableExpr(q string) (string, bool) {
	q = strings.TrimSpace(q)
	if inner, ok := strings.CutPrefix(q, "query_result("); ok && strings.HasSuffix(inner, ")") {
		return strings.TrimSuffix(inner, ")"), true
	}
	if inner, ok := strings.CutPrefix(q, "label_values("); ok && strings.HasSuffix(inner, ")") {
		inner = strings.TrimSuffix(inner, ")")
		if i := strings.LastIndex(inner, ","); i > 0 {
			return strings.TrimSpace(inner[:i]), true
		}
	}
	return "", false
}

// TestExportedMetricsAreDefinedWhereTheListSays reads the source of every family in
// exportedMetrics: the operator's own files, and controller-runtime's at the version go.mod
// selects. Renaming a metric there, or an upgrade that renames one, fails here.
func TestExportedMetricsAreDefinedWhereTheListSays(t *testing.T) {
	dirs := map[string]string{}
	for _, f := range exportedMetrics {
		root := repo(t)
		if f.module != "" {
			if dirs[f.module] == "" {
				dirs[f.module] = moduleDir(t, f.module)
			}
			root = dirs[f.module]
		}
		src, err := os.ReadFile(filepath.Join(root, f.file))
		if err != nil {
			t.Errorf("%s: its source %s cannot be read: %v", f.name, f.file, err)
			continue
		}
		spelled := f.spelled
		if len(spelled) == 0 {
			spelled = []string{strconv.Quote(f.name)}
		}
		source := f.file
		if f.module != "" {
			source = f.module + "/" + f.file
		}
		for _, s := range spelled {
			if !strings.Contains(string(src), s) {
				t.Errorf("%s: %s no longer contains %s; the metric was renamed or moved, and every alert and panel naming it would find no series",
					f.name, source, s)
			}
		}
	}
}

// moduleDir is the directory of a dependency at the version go.mod selects.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = repo(t)
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("locate module %s (go list -m): %v; run go mod download", module, err)
	}
	return dir
}

// TestEveryAlertLinksItsRunbook: every alert has a severity, a summary, a description and a
// runbook_url naming a section under "## Runbooks" in docs/operations.md.
func TestEveryAlertLinksItsRunbook(t *testing.T) {
	runbooks := runbookAnchors(t)
	if len(runbooks) == 0 {
		t.Fatal("docs/operations.md has no ### section under ## Runbooks")
	}
	objs := mustRender(t, monitoringValues)
	for _, r := range rules(t, one(t, objs, "PrometheusRule", "celld-operator")) {
		name := fmt.Sprint(r["alert"])
		ruleLabels, _ := r["labels"].(map[string]any)
		if ruleLabels["severity"] == nil {
			t.Errorf("alert %s has no severity label", name)
		}
		annotations, _ := r["annotations"].(map[string]any)
		for _, key := range []string{"summary", "description", "runbook_url"} {
			if s, _ := annotations[key].(string); strings.TrimSpace(s) == "" {
				t.Errorf("alert %s has no %s annotation", name, key)
			}
		}
		url, _ := annotations["runbook_url"].(string)
		anchor, ok := strings.CutPrefix(url, runbookBase)
		if !ok {
			t.Errorf("alert %s's runbook_url %q does not point into docs/operations.md (%s...)", name, url, runbookBase)
			continue
		}
		if !slices.Contains(runbooks, anchor) {
			t.Errorf("alert %s's runbook_url names #%s, but docs/operations.md's runbooks are %v", name, anchor, runbooks)
		}
	}
}

// runbookAnchors returns the GitHub anchors of the ### headings under "## Runbooks" in
// docs/operations.md.
func runbookAnchors(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile(repo(t, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in, fenced := false, false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		switch {
		case fenced:
		case strings.HasPrefix(line, "## "):
			in = line == "## Runbooks"
		case in && strings.HasPrefix(line, "### "):
			out = append(out, githubAnchor(strings.TrimPrefix(line, "### ")))
		}
	}
	return out
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case, punctuation other
// than - and _ dropped, spaces turned into -.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestChartGrafanaDashboard: the dashboard is off by default and refused without metrics; on,
// it is the committed file, byte for byte, in a ConfigMap the Grafana sidecar discovers, in the
// namespace asked for.
func TestChartGrafanaDashboard(t *testing.T) {
	if n := len(kinds(mustRender(t, nil), "ConfigMap")); n != 0 {
		t.Errorf("the dashboard is off by default, yet %d ConfigMaps render", n)
	}
	if _, err := render(t, map[string]any{"metrics": map[string]any{"enabled": false,
		"grafanaDashboard": map[string]any{"enabled": true}}}); err == nil {
		t.Error("the schema accepted a dashboard without metrics.enabled: it would show no data")
	}
	objs := mustRender(t, map[string]any{"metrics": map[string]any{"enabled": true,
		"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring",
			"annotations": map[string]any{"grafana_folder": "celld"}}}})
	cm := one(t, objs, "ConfigMap", "celld-operator-dashboard")
	if cm.GetNamespace() != "monitoring" {
		t.Errorf("the dashboard ConfigMap is in %q, want the namespace asked for", cm.GetNamespace())
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard: \"1\", which the Grafana sidecar looks for", cm.GetLabels())
	}
	if cm.GetAnnotations()["grafana_folder"] != "celld" {
		t.Errorf("the dashboard ConfigMap's annotations %v lack the folder asked for", cm.GetAnnotations())
	}
	file, err := os.ReadFile(repo(t, chartDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if got := data["celld-operator.json"]; got != strings.TrimRight(string(file), "\n") {
		t.Errorf("the ConfigMap's dashboard differs from %s: the template must embed it unchanged", dashboardFile)
	}
}
