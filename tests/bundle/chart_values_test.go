package bundle

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// TestChartRendersEveryCase renders every install case; the dependency case renders the
// operator under the parent's condition, and nothing when the parent leaves it disabled.
func TestChartRendersEveryCase(t *testing.T) {
	for _, c := range chartCases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := c.dir(t)
			chrt, err := loader.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := renderChart(t, chrt, c.Values, releaseNamespace)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if n := len(kinds(objs, "Deployment")); n != 1 {
				t.Errorf("%d operator Deployments rendered, want 1", n)
			}
			if !c.AsDependency {
				return
			}
			disabled, err := loader.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			objs, err = renderChart(t, disabled, map[string]any{"global": map[string]any{"x": "y"}}, releaseNamespace)
			if err != nil {
				t.Fatalf("render the parent with the operator disabled: %v", err)
			}
			if len(objs) != 0 {
				t.Errorf("the parent left celld-operator disabled, yet %d objects render", len(objs))
			}
		})
	}
}

// TestChartPodDisruptionBudgetOnlyWithSeveralReplicas: one replica under a budget would block
// every node drain, so only several replicas get one.
func TestChartPodDisruptionBudgetOnlyWithSeveralReplicas(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want int
	}{
		{map[string]any{"replicaCount": 1}, 0},
		{map[string]any{"replicaCount": 2}, 1},
		{map[string]any{"replicaCount": 3, "podDisruptionBudget": map[string]any{"maxUnavailable": "50%"}}, 1},
		{map[string]any{"replicaCount": 3, "podDisruptionBudget": map[string]any{"enabled": false}}, 0},
	} {
		objs := mustRender(t, c.vals)
		pdbs := kinds(objs, "PodDisruptionBudget")
		if len(pdbs) != c.want {
			t.Errorf("%v: %d PodDisruptionBudgets, want %d", c.vals, len(pdbs), c.want)
			continue
		}
		for _, p := range pdbs {
			sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
			if d := deployment(t, objs); !maps.Equal(sel, d.Spec.Selector.MatchLabels) {
				t.Errorf("the budget selects %v, the operator Deployment %v", sel, d.Spec.Selector.MatchLabels)
			}
		}
	}
}

// TestChartExistingServiceAccount: with serviceAccount.create=false the chart creates no
// ServiceAccount, and the Pods, every binding and the operator's own flag name the given one.
func TestChartExistingServiceAccount(t *testing.T) {
	objs := mustRender(t, map[string]any{"serviceAccount": map[string]any{"create": false, "name": "platform-operator"},
		"fleetNamespaces": []any{"fleets"}})
	if n := len(kinds(objs, "ServiceAccount")); n != 0 {
		t.Errorf("serviceAccount.create=false, yet %d ServiceAccounts render", n)
	}
	d := deployment(t, objs)
	if d.Spec.Template.Spec.ServiceAccountName != "platform-operator" {
		t.Errorf("the operator runs as %q, want platform-operator", d.Spec.Template.Spec.ServiceAccountName)
	}
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--operator-service-account=platform-operator") {
		t.Errorf("the operator is told another ServiceAccount: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	bindings := append(kinds(objs, "ClusterRoleBinding"), kinds(objs, "RoleBinding")...)
	if len(bindings) != 3 {
		t.Errorf("%d bindings render, want the cluster, leader-election and fleet ones", len(bindings))
	}
	for _, b := range bindings {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		if fmtYAML(t, subjects) != fmtYAML(t, []any{map[string]any{"kind": "ServiceAccount", "name": "platform-operator", "namespace": releaseNamespace}}) {
			t.Errorf("%s %s binds %v, want only ServiceAccount %s/platform-operator", b.GetKind(), b.GetName(), subjects, releaseNamespace)
		}
	}
}

// TestChartCustomizations: commonLabels reach every object and the Pods, nameOverride names
// the objects but not the selector label, and extra env, volumes, priority and spread reach the
// Pod, a spread constraint getting the operator's selector unless it brings its own.
func TestChartCustomizations(t *testing.T) {
	own := map[string]any{"matchLabels": map[string]any{"tier": "ops"}}
	objs := mustRender(t, map[string]any{
		"nameOverride":      "celld-ops",
		"commonLabels":      map[string]any{"team": "storage"},
		"podLabels":         map[string]any{"team": "fleet-ops"},
		"priorityClassName": "system-cluster-critical",
		"goMemLimit":        "300MiB",
		"goGC":              "75",
		"extraEnv":          []any{map[string]any{"name": "GODEBUG", "value": "http2client=0"}},
		"extraVolumes":      []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
		"extraVolumeMounts": []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}},
		"fleetNamespaces":   []any{"fleets"},
		"metrics":           map[string]any{"enabled": true},
		"topologySpreadConstraints": []any{
			map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
			map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own},
		},
	})
	for _, o := range objs {
		if o.GetLabels()["team"] != "storage" {
			t.Errorf("%s %s lacks commonLabels: %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
		if !strings.HasPrefix(o.GetName(), "celld-ops") && o.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s %s is not named after nameOverride", o.GetKind(), o.GetName())
		}
	}
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(one(t, objs, "Deployment", "celld-ops").Object, &dep); err != nil {
		t.Fatal(err)
	}
	d, podLabels := &dep.Spec.Template.Spec, dep.Spec.Template.Labels
	if podLabels["team"] != "fleet-ops" || podLabels["app.kubernetes.io/name"] != "celld-operator" {
		t.Errorf("Pod labels %v: podLabels must win over commonLabels and the selector label must stay celld-operator", podLabels)
	}
	c := d.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GODEBUG" && e.Value == "http2client=0" }) ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" && e.Value == "300MiB" }) ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOGC" && e.Value == "75" }) ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "WATCH_NAMESPACE" }) {
		t.Errorf("operator env %v lacks extraEnv, goMemLimit's GOMEMLIMIT, goGC's GOGC or WATCH_NAMESPACE", c.Env)
	}
	if len(d.Volumes) != 1 || d.Volumes[0].EmptyDir == nil || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" {
		t.Errorf("extra volumes %v and mounts %v did not reach the Pod", d.Volumes, c.VolumeMounts)
	}
	if d.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q", d.PriorityClassName)
	}
	if len(d.TopologySpreadConstraints) != 2 {
		t.Fatalf("%d spread constraints, want 2", len(d.TopologySpreadConstraints))
	}
	if got := d.TopologySpreadConstraints[0].LabelSelector; got == nil || got.MatchLabels["app.kubernetes.io/name"] != "celld-operator" || len(got.MatchLabels) != 1 {
		t.Errorf("a constraint without labelSelector got %v, want the operator's selector", got)
	}
	if got := d.TopologySpreadConstraints[1].LabelSelector; got == nil || got.MatchLabels["tier"] != "ops" || len(got.MatchLabels) != 1 {
		t.Errorf("a constraint's own labelSelector was replaced: %v", got)
	}
}

// TestChartUserRoles: the view role reads fleets and reservations and aggregates into view,
// edit and admin; the edit role writes fleets and their scale, never their status and never a
// reservation, and aggregates into edit and admin. Without rbac.aggregateToUserRoles neither
// renders.
func TestChartUserRoles(t *testing.T) {
	objs := mustRender(t, nil)
	aggregates := func(role *unstructured.Unstructured) []string {
		var out []string
		for k, v := range role.GetLabels() {
			if name, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-"); ok && v == "true" {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	view, edit := one(t, objs, "ClusterRole", "celld-operator-view"), one(t, objs, "ClusterRole", "celld-operator-edit")
	if got := aggregates(view); !slices.Equal(got, []string{"admin", "edit", "view"}) {
		t.Errorf("the view role aggregates into %v, want admin, edit and view", got)
	}
	if got := aggregates(edit); !slices.Equal(got, []string{"admin", "edit"}) {
		t.Errorf("the edit role aggregates into %v, want admin and edit", got)
	}
	allowed := func(rules []rbacv1.PolicyRule, resource, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "celld.eric.dev") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	viewRules, editRules := policyRules(t, view), policyRules(t, edit)
	for _, r := range viewRules {
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("the view role grants %s on %v", v, r.Resources)
			}
		}
	}
	for _, res := range []string{"celldfleets", "celldstoragereservations"} {
		for _, verb := range []string{"get", "list", "watch"} {
			if !allowed(viewRules, res, verb) {
				t.Errorf("the view role does not grant %s %s", verb, res)
			}
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		if !allowed(editRules, "celldfleets", verb) {
			t.Errorf("the edit role does not grant %s celldfleets", verb)
		}
	}
	for _, verb := range []string{"update", "patch"} {
		if !allowed(editRules, "celldfleets/scale", verb) {
			t.Errorf("the edit role does not grant %s celldfleets/scale (kubectl scale)", verb)
		}
	}
	for _, r := range editRules {
		for _, res := range r.Resources {
			if strings.HasPrefix(res, "celldstoragereservations") || strings.HasSuffix(res, "/status") || res == "*" {
				t.Errorf("the edit role writes %s: reservations are permanent records and status is the operator's", res)
			}
		}
	}
	objs = mustRender(t, map[string]any{"rbac": map[string]any{"aggregateToUserRoles": false}})
	if n := len(kinds(objs, "ClusterRole")); n != 1 {
		t.Errorf("rbac.aggregateToUserRoles=false, yet %d ClusterRoles render (want only the operator's)", n)
	}
}
