package bundle

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// repo returns an absolute path inside the repository root (the directory of go.mod).
func repo(t *testing.T, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir}, elem...)...)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// objects reads every document of a YAML file.
func objects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := gen.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// one returns the only object of a kind (and name, when given) among objs.
func one(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q, found %d", kind, name, len(found))
	}
	return found[0]
}

// csv reads the committed bundle's ClusterServiceVersion.
func csv(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return one(t, objects(t, repo(t, "bundle", "manifests", gen.PackageName+".clusterserviceversion.yaml")), "ClusterServiceVersion", "")
}

func fmtYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
