package bundle

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	validator "github.com/operator-framework/api/pkg/validation/interfaces"
)

// acceptedWarnings are validator warnings the project has decided to live with, matched by a
// substring of the detail, each with its reason. Any other warning fails the test, so new
// ones are looked at.
var acceptedWarnings = map[string]string{
	// CelldStorageReservation is created by the operator only and listed in
	// operators.operatorframework.io/internal-objects; an example would invite users to
	// create one by hand.
	"provided API should have an example annotation": "CelldStorageReservation is internal",
	// RBAC rules carry no API version. The validator maps any events.k8s.io rule to the
	// events.k8s.io/v1beta1 removal; the operator records events through events.k8s.io/v1.
	"Migrate the API(s) for events": "events.k8s.io rules are version-less",
}

func accepted(detail string) bool {
	for s := range acceptedWarnings {
		if strings.Contains(detail, s) {
			return true
		}
	}
	return false
}

// TestBundlePassesOperatorFrameworkValidators runs the validators `operator-sdk bundle
// validate --select-optional suite=operatorframework` runs, as library calls.
func TestBundlePassesOperatorFrameworkValidators(t *testing.T) {
	b, err := manifests.GetBundleFromDir(repo(t, "bundle"))
	if err != nil {
		t.Fatalf("the bundle does not load (run `make bundle`): %v", err)
	}
	if b.CSV == nil || len(b.V1CRDs) != 3 {
		t.Fatalf("the bundle must hold the CSV and the three CRDs, got CSV=%v CRDs=%d", b.CSV != nil, len(b.V1CRDs))
	}
	if b.DefaultChannel != "stable-v0" || strings.Join(b.Channels, ",") != "candidate-v0,stable-v0" {
		t.Errorf("channels from metadata/annotations.yaml: %v default %q, want candidate-v0,stable-v0 default stable-v0 (the channels of catalog/template.yaml)", b.Channels, b.DefaultChannel)
	}
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.37"})
	suites := map[string]validator.Validator{
		"default":               validation.DefaultBundleValidators,
		"crd":                   validation.CustomResourceDefinitionValidator,
		"good-practices":        validation.GoodPracticesValidator,
		"operatorhubv2":         validation.OperatorHubV2Validator,
		"capabilities":          validation.StandardCapabilitiesValidator,
		"categories":            validation.StandardCategoriesValidator,
		"alpha-deprecated-apis": validation.AlphaDeprecatedAPIsValidator,
		"object":                validation.ObjectValidator,
	}
	for name, v := range suites {
		for _, r := range v.Validate(objs...) {
			for _, e := range r.Errors {
				t.Errorf("%s validator: error on %s: %s", name, r.Name, describe(e))
			}
			for _, w := range r.Warnings {
				if !accepted(w.Detail) {
					t.Errorf("%s validator: warning on %s: %s", name, r.Name, describe(w))
				}
			}
		}
	}
}

// TestDeprecatedAPIValidatorCanFail guards the validator wiring above: a bundle object on a
// removed API must be reported for Kubernetes 1.37.
func TestDeprecatedAPIValidatorCanFail(t *testing.T) {
	b, err := manifests.GetBundleFromDir(repo(t, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	bad := csv(t).DeepCopy()
	bad.SetAPIVersion("policy/v1beta1")
	bad.SetKind("PodDisruptionBudget")
	bad.SetName("old")
	b.Objects = append(b.Objects, bad)
	results := validation.AlphaDeprecatedAPIsValidator.Validate(append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.37"})...)
	for _, r := range results {
		if r.HasError() {
			return
		}
	}
	t.Fatal("a policy/v1beta1 PodDisruptionBudget in the bundle was not reported as removed in 1.37")
}

func describe(e errors.Error) string {
	s := e.Detail
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.BadValue != nil {
		s += " (value " + strings.ReplaceAll(fmt.Sprint(e.BadValue), "\n", " ") + ")"
	}
	return s
}

// TestCSVInstallStrategy checks what the generator derived from config/: the hardened manager
// Deployment with the release image, and the leader-election and fleet-namespace rules in
// permissions, which OLM scopes to the target namespaces.
func TestCSVInstallStrategy(t *testing.T) {
	c := csv(t)
	deployments, _, _ := unstructured.NestedSlice(c.Object, "spec", "install", "spec", "deployments")
	if len(deployments) != 1 {
		t.Fatalf("the CSV installs %d Deployments, want 1", len(deployments))
	}
	spec, _, _ := unstructured.NestedMap(deployments[0].(map[string]any), "spec")
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": spec}, &d); err != nil {
		t.Fatal(err)
	}
	checkManagerDeployment(t, &d)
	if img := d.Spec.Template.Spec.Containers[0].Image; img != c.GetAnnotations()["containerImage"] {
		t.Errorf("the Deployment runs %s, the CSV's containerImage is %s", img, c.GetAnnotations()["containerImage"])
	}
	if !hasEnvFieldRef(d, "WATCH_NAMESPACE", "metadata.annotations['olm.targetNamespaces']") {
		t.Error("WATCH_NAMESPACE must come from the olm.targetNamespaces annotation")
	}
	perm := func(kind string) []any {
		p, _, _ := unstructured.NestedSlice(c.Object, "spec", "install", "spec", kind)
		if len(p) != 1 {
			t.Fatalf("%s has %d entries, want 1", kind, len(p))
		}
		rules, _, _ := unstructured.NestedSlice(p[0].(map[string]any), "rules")
		return rules
	}
	// OLM binds clusterPermissions cluster-wide in every install mode and scopes permissions to
	// the target namespaces (cluster-wide for AllNamespaces only): the fleet-namespace and
	// leader-election rules belong in permissions, and clusterPermissions hold ClusterRole rules
	// only (the cluster-scoped ones; tests/rbac proves the split on an API server).
	cluster, namespaced := perm("clusterPermissions"), perm("permissions")
	rulesOf := func(file string) []any {
		return objects(t, repo(t, "config", "rbac", file))[0].Object["rules"].([]any)
	}
	clusterRole := rulesOf("role.yaml")
	for _, file := range []string{"fleet_namespace_role.yaml", "leader_election_role.yaml"} {
		for _, r := range rulesOf(file) {
			if !containsRule(namespaced, r) {
				t.Errorf("permissions lack the %s rule %v", file, r)
			}
			if containsRule(cluster, r) {
				t.Errorf("clusterPermissions hold the %s rule %v: every install mode would get it cluster-wide", file, r)
			}
		}
	}
	for _, r := range cluster {
		if !containsRule(clusterRole, r) {
			t.Errorf("clusterPermissions hold %v, which is not a config/rbac/role.yaml rule", r)
		}
	}
	if want := len(clusterRole) + len(rulesOf("fleet_namespace_role.yaml")) + len(rulesOf("leader_election_role.yaml")); len(cluster)+len(namespaced) != want {
		t.Errorf("the CSV has %d rules, config/rbac has %d", len(cluster)+len(namespaced), want)
	}
	if skip := c.GetAnnotations()["olm.skipRange"]; !strings.HasPrefix(skip, ">=") || !strings.HasSuffix(skip, "<"+c.Object["spec"].(map[string]any)["version"].(string)) {
		t.Errorf("olm.skipRange %q does not end below the CSV version", skip)
	}
}

func containsRule(rules []any, r any) bool {
	for _, x := range rules {
		if reflect.DeepEqual(x, r) {
			return true
		}
	}
	return false
}

func hasEnvFieldRef(d appsv1.Deployment, name, path string) bool {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path {
			return true
		}
	}
	return false
}
