// Package floor checks the Kubernetes floor (minKubeVersion) of every bundle in the catalog
// against the validation kube-apiserver runs when the bundle's CRDs are created.
package floor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	basecompatibility "k8s.io/component-base/compatibility"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

// apiServer is the effective version of the in-process "API server" whose CRD validation the
// test runs: kube-apiserver's own validation code (apiextensions-apiserver's
// ValidateCustomResourceDefinition, what a CRD create runs), with the CEL environment of the
// compatibility version set per case. A real kube-apiserver of this module's release can only
// lower its compatibility version three minors; the code path is the same.
var apiServer basecompatibility.MutableEffectiveVersion

func TestMain(m *testing.M) {
	// The apiserver packages register the kube component when they load; its effective version
	// is the one CRD validation reads.
	apiServer, _ = utilcompatibility.DefaultComponentGlobalsRegistry.ComponentGlobalsOrRegister(
		basecompatibility.DefaultKubeComponent, utilcompatibility.DefaultKubeEffectiveVersionForTest(), nil)
	os.Exit(m.Run())
}

// celCompatibilityOf is the CEL environment version kube-apiserver of release kube compiles a
// new CRD's rules in: its minimum compatibility version, one minor below its release, so that
// the cluster can roll back one minor and still run every stored rule.
func celCompatibilityOf(kube *version.Version) *version.Version {
	return version.MajorMinor(kube.Major(), kube.Minor()).SubtractMinor(1)
}

// createProblems validates every CRD of a bundle as kube-apiserver of release kube does when
// the CRD is created, and returns one line per error.
func createProblems(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition, kube *version.Version) []string {
	t.Helper()
	compat := celCompatibilityOf(kube)
	apiServer.SetMinCompatibilityVersion(compat)
	if got := environment.DefaultCompatibilityVersion(); !got.EqualTo(compat) {
		t.Fatalf("the API server's CEL compatibility version is %s, want %s", got, compat)
	}
	var problems []string
	for _, crd := range crds {
		v1 := crd.DeepCopy()
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
		internal := &apiextensions.CustomResourceDefinition{}
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, internal, nil); err != nil {
			t.Fatalf("%s: %v", crd.Name, err)
		}
		for _, e := range crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal) {
			problems = append(problems, fmt.Sprintf("%s: %s", crd.Name, e.Error()))
		}
	}
	return problems
}

func readCRDs(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		objs, err := gen.ReadObjects(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 1 || objs[0].GetKind() != "CustomResourceDefinition" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict([]byte(strings.TrimSuffix(string(raw), "---\n")), crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no CRD", dir)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "watches.yaml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no repository root above the test directory")
		}
		dir = parent
	}
}

// TestEveryBundleInstallsAtItsFloorAndNotBelow creates the CRDs of every bundle of the catalog
// (olm/celld-operator/<version>) on an API server at the bundle's minKubeVersion, where every
// CRD must be accepted, and at the minor release below, where one must be refused: so no
// catalog offers a bundle to a cluster that cannot install it, and no floor is set needlessly
// high.
func TestEveryBundleInstallsAtItsFloorAndNotBelow(t *testing.T) {
	root := filepath.Join(repoRoot(t), fbc.DefaultBundleRoot)
	versions, err := fbc.ListBundleDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) < 2 {
		t.Fatalf("the catalog holds %v; want every release", versions)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			dir := filepath.Join(root, v)
			b, err := fbc.ReadBundleDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			floor, err := version.ParseGeneric(b.CSV.Spec.MinKubeVersion)
			if err != nil {
				t.Fatalf("minKubeVersion %q: %v", b.CSV.Spec.MinKubeVersion, err)
			}
			if floor.Patch() != 0 {
				t.Errorf("minKubeVersion %s should name a minor release (X.Y.0)", floor)
			}
			crds := readCRDs(t, dir)
			if p := createProblems(t, crds, floor); len(p) > 0 {
				t.Errorf("Kubernetes %s (minKubeVersion; CEL compatibility %s) refuses the CRDs of %s, so the catalog offers a bundle that cannot install there; raise minKubeVersion:\n  %s",
					floor, celCompatibilityOf(floor), v, strings.Join(p, "\n  "))
			}
			below := floor.SubtractMinor(1)
			p := createProblems(t, crds, below)
			if len(p) == 0 {
				t.Errorf("Kubernetes %s creates every CRD of %s, yet minKubeVersion is %s: lower it to the real floor", below, v, floor)
			}
			t.Logf("%s: Kubernetes %s accepts the CRDs; %s refuses %d: %s", v, floor, below, len(p), strings.Join(p, "; "))
		})
	}
}
