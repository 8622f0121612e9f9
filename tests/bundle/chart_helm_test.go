package bundle

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const fleetCRD = "celldfleets.celld.eric.dev"

// TestChartHelmUpgradesCRDsAndUninstallKeepsThem drives the helm CLI against a real API
// server: install creates the CRDs as release objects, an upgrade to a chart whose CelldFleet
// CRD changed changes it in the cluster, uninstall removes the operator but keeps the CRDs
// (and so every fleet), a new install adopts the kept CRDs, and with crds.keep=false uninstall
// deletes them.
func TestChartHelmUpgradesCRDsAndUninstallKeepsThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server := ownChartServer(t)
	c := server.Client(t)
	kubeconfig := chartKubeconfig(t, server)
	const ns, release = "chart-helm", "celld-operator"
	helm := func(args ...string) {
		t.Helper()
		if out, err := runHelm(t, kubeconfig, append(args, "-n", ns)...); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	helm("install", release, repo(t, chartDir), "--create-namespace")
	crd := getCRD(ctx, t, c, fleetCRD)
	if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Annotations["meta.helm.sh/release-name"] != release {
		t.Fatalf("after helm install the CRD's annotations are %v: want it owned by the release and kept", crd.Annotations)
	}

	next := filepath.Join(t.TempDir(), "celld-operator")
	if err := os.CopyFS(next, os.DirFS(repo(t, chartDir))); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(next, "files", "crds", "celld.eric.dev_celldfleets.yaml")
	old := "    shortNames:\n    - cf\n"
	text := string(read(t, file))
	if !strings.Contains(text, old) {
		t.Fatalf("%s no longer lists the short name cf; change this test's CRD edit", file)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(text, old, old+"    - cfnext\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	helm("upgrade", release, next)
	if names := getCRD(ctx, t, c, fleetCRD).Spec.Names.ShortNames; !slices.Contains(names, "cfnext") {
		t.Errorf("helm upgrade left the CelldFleet CRD as it was (short names %v): CRD changes would never reach the cluster", names)
	}

	helm("uninstall", release)
	getCRD(ctx, t, c, fleetCRD)
	err := c.Get(ctx, client.ObjectKey{Name: release}, &rbacv1.ClusterRole{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall the operator's ClusterRole is still there (%v): the uninstall did not run", err)
	}

	helm("install", release, repo(t, chartDir))
	helm("upgrade", release, repo(t, chartDir), "--set", "crds.keep=false")
	helm("uninstall", release)
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: fleetCRD}, &apiextensionsv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("with crds.keep=false helm uninstall did not delete the CRD: %v", err)
	}
}

// TestChartHelmAdoptsCRDsOfAnOlderInstall follows docs/install.md for a cluster whose CRDs came
// from the chart's former crds/ directory (no Helm ownership): the release refuses them until
// they carry the release's ownership label and annotations, then takes them over.
func TestChartHelmAdoptsCRDsOfAnOlderInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server := ownChartServer(t)
	c := server.Client(t)
	kubeconfig := chartKubeconfig(t, server)
	const ns, release = "chart-adopt", "celld-operator"
	var crds []*unstructured.Unstructured
	for _, path := range []string{"celld.eric.dev_celldfleets.yaml", "celld.eric.dev_celldstoragereservations.yaml"} {
		crds = append(crds, objects(t, repo(t, "config", "crd", "bases", path))...)
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		waitEstablished(ctx, t, c, crd.GetName())
	}
	out, err := runHelm(t, kubeconfig, "install", release, repo(t, chartDir), "-n", ns, "--create-namespace")
	if err == nil || !strings.Contains(out, "invalid ownership metadata") {
		t.Fatalf("helm install over CRDs Helm does not own: %v, want the ownership error docs/install.md quotes:\n%s", err, out)
	}
	_, _ = runHelm(t, kubeconfig, "uninstall", release, "-n", ns) // the failed release, if recorded
	for _, crd := range crds {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"},
			"annotations": {"meta.helm.sh/release-name": "`+release+`", "meta.helm.sh/release-namespace": "`+ns+`"}}}`))
		if err := c.Patch(ctx, crd.DeepCopy(), patch); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runHelm(t, kubeconfig, "install", release, repo(t, chartDir), "-n", ns, "--create-namespace"); err != nil {
		t.Fatalf("helm install after handing the CRDs to the release: %v\n%s", err, out)
	}
	if got := getCRD(ctx, t, c, fleetCRD).Annotations["helm.sh/resource-policy"]; got != "keep" {
		t.Errorf("the adopted CRD's resource policy is %q, want keep: the release did not take it over", got)
	}
}

// getCRD reads a CRD that must exist.
func getCRD(ctx context.Context, t *testing.T, c client.Client, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	return &crd
}

// TestChartHelmUpgradeKeepsValuesAsDocumented checks the upgrade advice of the README and
// docs/install.md on this chart: an upgrade from a chart version that lacked a value
// (podDisruptionBudget, say) with --reuse-values renders the new templates against the old
// version's defaults and fails, while --reset-then-reuse-values takes the new defaults, keeps
// the values set at install, and renders what the new version adds.
func TestChartHelmUpgradeKeepsValuesAsDocumented(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := chartServer.Client(t)
	kubeconfig := chartKubeconfig(t, chartServer)
	// Its own names and no CRDs: the release shares the API server with the other chart tests.
	const ns, release, name = "chart-reuse", "celld-reuse", "celld-reuse"
	helm := func(args ...string) (string, error) {
		t.Helper()
		return runHelm(t, kubeconfig, append(args, "-n", ns)...)
	}
	older := chartWithout(t, "podDisruptionBudget", "templates/poddisruptionbudget.yaml")
	if out, err := helm("install", release, older, "--create-namespace", "--set", "nameOverride="+name,
		"--set", "crds.enabled=false", "--set", "networkPolicyEnforced=true"); err != nil {
		t.Fatalf("helm install of the older chart: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := runHelm(t, kubeconfig, "uninstall", release, "-n", ns); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
	})

	out, err := helm("upgrade", release, repo(t, chartDir), "--reuse-values")
	if err == nil || !strings.Contains(out, "podDisruptionBudget") {
		t.Errorf("helm upgrade --reuse-values from a chart without podDisruptionBudget: %v, want the failure the docs describe:\n%s", err, out)
	}
	if out, err := helm("upgrade", release, repo(t, chartDir), "--reset-then-reuse-values"); err != nil {
		t.Fatalf("helm upgrade --reset-then-reuse-values, which the docs call safe: %v\n%s", err, out)
	}
	var pdb policyv1.PodDisruptionBudget
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pdb); err != nil {
		t.Errorf("after --reset-then-reuse-values the new chart's PodDisruptionBudget is missing: %v", err)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatalf("after --reset-then-reuse-values the operator Deployment %s is missing (the install's nameOverride was lost?): %v", name, err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--network-policy-enforced=true") {
		t.Errorf("--reset-then-reuse-values lost networkPolicyEnforced=true, set at install: operator args %v", args)
	}
}

// chartWithout copies the install chart without the top-level value key (in values.yaml and
// values.schema.json) and the given files: an older version of the chart that lacked them.
func chartWithout(t *testing.T, key string, files ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "celld-operator")
	if err := os.CopyFS(dir, os.DirFS(repo(t, chartDir))); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	var values map[string]any
	if err := yaml.Unmarshal(read(t, filepath.Join(dir, "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(read(t, filepath.Join(dir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	props, _ := schema["properties"].(map[string]any)
	if _, ok := values[key]; !ok || props[key] == nil {
		t.Fatalf("the chart has no value %s in values.yaml and values.schema.json; pick another for this test", key)
	}
	delete(values, key)
	delete(props, key)
	writeYAML(t, filepath.Join(dir, "values.yaml"), values)
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.schema.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
