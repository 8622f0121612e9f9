package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/celld/celld-operator/tests/chart/cases"
)

const chartDir = cases.ChartDir

// releaseNamespace is the namespace the chart tests install into.
const releaseNamespace = "celld-system"

// render renders the chart the way `helm template` does: values coalesced and validated
// against values.schema.json, templates rendered by the engine in strict mode. The CRDs are
// templates (crds.enabled), so they render like any other object.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderChart(t, loadChart(t), vals, releaseNamespace)
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(repo(t, chartDir))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return chrt
}

// renderChart renders chrt (the install chart, or a parent holding it as a dependency) into
// namespace as helm template does (tests/chart/cases.Manifest).
func renderChart(t *testing.T, chrt *chart.Chart, vals map[string]any, namespace string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	manifest, err := cases.Manifest(chrt, vals, namespace)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return objects(t, path), nil
}

func mustRender(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, vals)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	return objs
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestChartDefaults renders the default values: CRDs kept on uninstall, identity, RBAC, the
// user roles, a budget for the two operator Pods, a hardened operator, and neither fleet Roles
// nor monitoring objects.
func TestChartDefaults(t *testing.T) {
	objs := mustRender(t, nil)
	crds := kinds(objs, "CustomResourceDefinition")
	if want := len(configCRDs(t)); len(crds) != want {
		t.Errorf("the chart renders %d CRDs, want the %d of config/crd/bases", len(crds), want)
	}
	for _, crd := range crds {
		if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep; helm uninstall would delete every fleet", crd.GetName())
		}
		if crd.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("CRD %s lacks the chart's labels: %v", crd.GetName(), crd.GetLabels())
		}
	}
	one(t, objs, "ServiceAccount", "celld-operator")
	one(t, objs, "ClusterRole", "celld-operator")
	one(t, objs, "ClusterRoleBinding", "celld-operator")
	one(t, objs, "Role", "celld-operator-leader-election")
	one(t, objs, "ClusterRole", "celld-operator-view")
	one(t, objs, "ClusterRole", "celld-operator-edit")
	pdb := one(t, objs, "PodDisruptionBudget", "celld-operator")
	if v, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(v) != "1" {
		t.Errorf("the operator's budget allows %v Pods down, want 1 of the 2", v)
	}
	for _, kind := range []string{"Service", "ServiceMonitor", "PrometheusRule"} {
		if n := len(kinds(objs, kind)); n != 0 {
			t.Errorf("metrics are off by default, yet %d %s objects render", n, kind)
		}
	}
	if n := len(kinds(objs, "Role")); n != 1 {
		t.Errorf("without fleetNamespaces only the leader-election Role renders, got %d Roles", n)
	}
	d := deployment(t, objs)
	checkManagerDeployment(t, d)
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--metrics-bind-address=0", "--network-policy-enforced=false", "--member-replacement-delay=10m",
		"--operator-namespace=celld-system", "--operator-service-account=celld-operator", "--storage-provisioners=ebs.csi.aws.com"} {
		if !strings.Contains(args, want) {
			t.Errorf("operator args %q lack %s", args, want)
		}
	}
	if img, want := d.Spec.Template.Spec.Containers[0].Image, "ghcr.io/celld/celld-operator:"+releaseVersion(t); img != want {
		t.Errorf("image = %s, want the project's repository with the appVersion tag, this release: %s", img, want)
	}
}

// TestChartFleetNamespacesAndMetrics renders fleet namespaces, metrics, the ServiceMonitor and
// the alerts, a digest and Istio injection.
func TestChartFleetNamespacesAndMetrics(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := mustRender(t, map[string]any{
		"fleetNamespaces":        []any{"fleets-a", "fleets-b"},
		"networkPolicyEnforced":  true,
		"memberReplacementDelay": "15m",
		"podLabels":              map[string]any{"sidecar.istio.io/inject": "true"},
		"image":                  map[string]any{"repository": "images.example.invalid/celld/celld-operator", "digest": digest},
		"metrics": map[string]any{"enabled": true, "port": 8084,
			"certSecret":     "celld-operator-metrics-tls",
			"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}},
	})
	for _, ns := range []string{"fleets-a", "fleets-b"} {
		var role, binding bool
		for _, o := range objs {
			role = role || (o.GetKind() == "Role" && o.GetNamespace() == ns && o.GetName() == "celld-operator-fleet")
			binding = binding || (o.GetKind() == "RoleBinding" && o.GetNamespace() == ns && o.GetName() == "celld-operator-fleet")
		}
		if !role || !binding {
			t.Errorf("namespace %s lacks the celld-operator-fleet Role (%v) or RoleBinding (%v)", ns, role, binding)
		}
	}
	one(t, objs, "Service", "celld-operator-metrics")
	one(t, objs, "ServiceMonitor", "celld-operator")
	rule := one(t, objs, "PrometheusRule", "celld-operator")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	text := strings.Join(strings.Fields(fmtYAML(t, groups)), " ")
	for _, want := range []string{"alert: CelldFleetBlocked", "celld_fleet_blocked_since_timestamp_seconds > 0)) > 900", `reason="MaintenancePaused"`, "severity: warning",
		"alert: CelldFleetUnavailable", "celld_fleet_ready_replicas) == 0", "celld_fleet_applied_replicas) > 0", "severity: critical", "for: 5m"} {
		if !strings.Contains(text, want) {
			t.Errorf("the PrometheusRule lacks %q", want)
		}
	}
	d := deployment(t, objs)
	checkManagerDeployment(t, d)
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--metrics-bind-address=:8084", "--metrics-secure=true", "--metrics-cert-dir=", "--network-policy-enforced=true", "--member-replacement-delay=15m"} {
		if !strings.Contains(args, want) {
			t.Errorf("operator args %q lack %s", args, want)
		}
	}
	if c.Image != "images.example.invalid/celld/celld-operator@"+digest {
		t.Errorf("image = %s, want the digest reference", c.Image)
	}
	if d.Spec.Template.Labels["sidecar.istio.io/inject"] != "true" {
		t.Error("podLabels did not reach the operator Pods")
	}
}

// TestChartNotesSayWhatTheReleaseWatches: after helm install, the notes say what a release
// without watchNamespaces watches; with fleetNamespaces set, that another release's fleets
// would be reconciled too unless watchNamespaces is set (docs/operations.md, "More than one
// operator"), and nothing about it once watchNamespaces is set.
func TestChartNotesSayWhatTheReleaseWatches(t *testing.T) {
	const watchesAll, noRights = "This release watches every namespace", "the operator has no rights in any namespace yet"
	for _, c := range []struct {
		name string
		vals map[string]any
		want []string
		not  []string
	}{
		{"no fleetNamespaces", map[string]any{}, []string{noRights}, []string{watchesAll}},
		{"fleetNamespaces, every namespace watched", map[string]any{"fleetNamespaces": []any{"team-a"}},
			[]string{watchesAll, "set watchNamespaces to the same list as\nfleetNamespaces"}, []string{noRights}},
		{"fleetNamespaces watched", map[string]any{"fleetNamespaces": []any{"team-a"}, "watchNamespaces": []any{"team-a"}},
			nil, []string{watchesAll, noRights}},
	} {
		t.Run(c.name, func(t *testing.T) {
			notes, err := cases.Notes(loadChart(t), c.vals, releaseNamespace)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(notes, w) {
					t.Errorf("the notes lack %q:\n%s", w, notes)
				}
			}
			for _, w := range c.not {
				if strings.Contains(notes, w) {
					t.Errorf("the notes say %q:\n%s", w, notes)
				}
			}
		})
	}
}

// TestChartSchemaRefusesBadValues: values.schema.json is the chart's admission.
func TestChartSchemaRefusesBadValues(t *testing.T) {
	bad := map[string]map[string]any{
		"replicaCount 0":                   {"replicaCount": 0},
		"replicaCount 11":                  {"replicaCount": 11},
		"short digest":                     {"image": map[string]any{"repository": "x", "digest": "sha256:abc"}},
		"digest without algorithm":         {"image": map[string]any{"repository": "x", "digest": strings.Repeat("a", 64)}},
		"unknown pull policy":              {"image": map[string]any{"repository": "x", "pullPolicy": "Sometimes"}},
		"delay not a duration":             {"memberReplacementDelay": "ten minutes"},
		"attestation as a string":          {"networkPolicyEnforced": "yes"},
		"fleet namespace not a DNS label":  {"fleetNamespaces": []any{"Fleets_A"}},
		"duplicate fleet namespace":        {"fleetNamespaces": []any{"a", "a"}},
		"ServiceMonitor without metrics":   {"metrics": map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": true}}},
		"PrometheusRule without metrics":   {"metrics": map[string]any{"enabled": false, "prometheusRule": map[string]any{"enabled": true}}},
		"metrics on the health port":       {"metrics": map[string]any{"enabled": true, "port": 8082}},
		"overriding the selector label":    {"podLabels": map[string]any{"app.kubernetes.io/name": "other"}},
		"misspelt top-level value":         {"fleetNamespace": []any{"a"}},
		"imagePullSecrets without a name":  {"imagePullSecrets": []any{map[string]any{}}},
		"serviceAccount annotation number": {"serviceAccount": map[string]any{"annotations": map[string]any{"a": 1}}},
		"delay below the operator's 1m":    {"memberReplacementDelay": "30s"},
		"delay of 59s":                     {"memberReplacementDelay": "59s"},
		"delay of zero minutes":            {"memberReplacementDelay": "0m"},
		"common label redefining the name": {"commonLabels": map[string]any{"app.kubernetes.io/name": "x"}},
		"pod label redefining the chart":   {"podLabels": map[string]any{"helm.sh/chart": "x"}},
		"extraEnv redefining the watch":    {"extraEnv": []any{map[string]any{"name": "WATCH_NAMESPACE", "value": "a"}}},
		"extraEnv redefining GOMEMLIMIT":   {"extraEnv": []any{map[string]any{"name": "GOMEMLIMIT", "value": "1GiB"}}},
		"goMemLimit without a unit suffix": {"goMemLimit": "200M"},
		"extraEnv redefining GOGC":         {"extraEnv": []any{map[string]any{"name": "GOGC", "value": "200"}}},
		"goGC not a percentage":            {"goGC": "50%"},
		"extraEnv without a name":          {"extraEnv": []any{map[string]any{"value": "a"}}},
		"extraEnv listing a name twice":    {"extraEnv": []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}}},
		"volume mount without a path":      {"extraVolumeMounts": []any{map[string]any{"name": "tmp"}}},
		"budget allowing no disruption":    {"podDisruptionBudget": map[string]any{"maxUnavailable": 0}},
		"budget of 100%":                   {"podDisruptionBudget": map[string]any{"maxUnavailable": "100%"}},
		"spread without a topology key":    {"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}}},
		"misspelt crds switch":             {"crds": map[string]any{"enable": false}},
		"global not an object":             {"global": "x"},
	}
	for name, vals := range bad {
		if _, err := render(t, vals); err == nil {
			t.Errorf("%s: the schema accepted %v", name, vals)
		}
	}
}

// TestChartSchemaAcceptsWhatHelmAndParentsPass: Helm injects global: into every chart of a
// release, and umbrella charts enable dependencies with <name>.enabled; neither may be refused.
func TestChartSchemaAcceptsWhatHelmAndParentsPass(t *testing.T) {
	good := map[string]map[string]any{
		"an empty global":            {"global": map[string]any{}},
		"a parent's global values":   {"global": map[string]any{"imagePullSecrets": []any{"a"}, "storageClass": "fast"}},
		"a parent's condition value": {"enabled": true},
		"a delay of 60s":             {"memberReplacementDelay": "60s"},
		"Go's spelling of 1m":        {"memberReplacementDelay": "1m0s"},
		"a percentage budget":        {"podDisruptionBudget": map[string]any{"maxUnavailable": "50%"}},
	}
	for name, vals := range good {
		if _, err := render(t, vals); err != nil {
			t.Errorf("%s: the chart refuses %v: %v", name, vals, err)
		}
	}
}

// TestChartRBACEqualsConfig: the chart's rules are those of config/rbac (which the bundle's
// CSV is generated from), so no install path grants more or less than another.
func TestChartRBACEqualsConfig(t *testing.T) {
	objs := mustRender(t, map[string]any{"fleetNamespaces": []any{"fleets"}})
	pairs := []struct {
		chart  *unstructured.Unstructured
		config string
	}{
		{one(t, objs, "ClusterRole", "celld-operator"), "role.yaml"},
		{one(t, objs, "Role", "celld-operator-leader-election"), "leader_election_role.yaml"},
		{one(t, objs, "Role", "celld-operator-fleet"), "fleet_namespace_role.yaml"},
	}
	for _, p := range pairs {
		cfg := objects(t, repo(t, "config", "rbac", p.config))
		if got, want := policyRules(t, p.chart), policyRules(t, cfg[0]); !reflect.DeepEqual(got, want) {
			t.Errorf("the chart's %s %s rules differ from config/rbac/%s:\n chart  %v\n config %v", p.chart.GetKind(), p.chart.GetName(), p.config, got, want)
		}
	}
}

// TestChartCRDsEqualConfig: files/crds is a byte copy of config/crd/bases (`make manifests`),
// and the CRDs the chart renders from it are those CRDs with only the chart's labels and the
// keep annotation added.
func TestChartCRDsEqualConfig(t *testing.T) {
	want := configCRDs(t)
	got, err := filepath.Glob(repo(t, chartDir, "files", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("the chart has %d CRDs, config/crd/bases %d; run `make manifests`", len(got), len(want))
	}
	rendered := kinds(mustRender(t, nil), "CustomResourceDefinition")
	for _, w := range want {
		g := repo(t, chartDir, "files", "crds", filepath.Base(w))
		if string(read(t, g)) != string(read(t, w)) {
			t.Errorf("%s differs from config/crd/bases; run `make manifests`", g)
		}
		base := objects(t, w)[0]
		r := one(t, rendered, "CustomResourceDefinition", base.GetName())
		if a, b := fmtYAML(t, r.Object["spec"]), fmtYAML(t, base.Object["spec"]); a != b {
			t.Errorf("the rendered CRD %s has another spec than config/crd/bases:\n%s", base.GetName(), diffLines(a, b))
		}
		wantAnn := base.GetAnnotations()
		wantAnn["helm.sh/resource-policy"] = "keep"
		if !reflect.DeepEqual(r.GetAnnotations(), wantAnn) {
			t.Errorf("the rendered CRD %s has annotations %v, want %v", base.GetName(), r.GetAnnotations(), wantAnn)
		}
	}
}

// configCRDs lists the CRD files of config/crd/bases, which files/crds copies.
func configCRDs(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(repo(t, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	return paths
}

// TestChartHasNoCrdsDirectory: Helm installs a chart's crds/ once and never upgrades it, and
// CRDs in both crds/ and templates/ collide on install. The CRDs are templates only.
func TestChartHasNoCrdsDirectory(t *testing.T) {
	if _, err := os.Stat(repo(t, chartDir, "crds")); !os.IsNotExist(err) {
		t.Errorf("%s/crds exists (%v): helm upgrade would never upgrade those CRDs; keep them in files/crds, rendered by templates/crds.yaml", chartDir, err)
	}
	if n := len(loadChart(t).CRDObjects()); n != 0 {
		t.Errorf("Helm sees %d CRDs outside templates", n)
	}
}

// TestChartCRDSwitches: crds.enabled=false renders no CRD, crds.keep=false drops the keep
// annotation (helm uninstall then deletes every fleet).
func TestChartCRDSwitches(t *testing.T) {
	if n := len(kinds(mustRender(t, map[string]any{"crds": map[string]any{"enabled": false}}), "CustomResourceDefinition")); n != 0 {
		t.Errorf("crds.enabled=false still renders %d CRDs", n)
	}
	crds := kinds(mustRender(t, map[string]any{"crds": map[string]any{"keep": false}}), "CustomResourceDefinition")
	if want := len(configCRDs(t)); len(crds) != want {
		t.Fatalf("crds.keep=false renders %d CRDs, want the %d of config/crd/bases", len(crds), want)
	}
	for _, crd := range crds {
		if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
			t.Errorf("crds.keep=false, yet CRD %s keeps the resource policy", crd.GetName())
		}
	}
}

// diffLines lists the lines of a that b lacks and the reverse, for a readable failure.
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !ib[l] {
			out.WriteString("+ " + l + "\n")
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ia[l] {
			out.WriteString("- " + l + "\n")
		}
	}
	return out.String()
}

func policyRules(t *testing.T, role *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var r rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &r); err != nil {
		t.Fatal(err)
	}
	return r.Rules
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(one(t, objs, "Deployment", "celld-operator").Object, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}
