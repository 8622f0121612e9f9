package bundle

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// supportedKinds are the kinds registry+v1 accepts besides CSVs and CRDs (operator-registry
// pkg/lib/bundle/supported_resources.go, v1.59, the version operator-sdk v1.42 ships; PodMonitor
// came later and is left out on purpose).
var supportedKinds = map[string]bool{
	"Secret": true, "ClusterRole": true, "ClusterRoleBinding": true, "ConfigMap": true,
	"ServiceAccount": true, "Service": true, "Role": true, "RoleBinding": true,
	"PrometheusRule": true, "ServiceMonitor": true, "PodDisruptionBudget": true,
	"PriorityClass": true, "VerticalPodAutoscaler": true, "ConsoleYAMLSample": true,
	"ConsoleQuickStart": true, "ConsoleCLIDownload": true, "ConsoleLink": true, "NetworkPolicy": true,
}

// TestBundleLayout re-implements operator-registry's format check: only manifests/, metadata/
// and tests/ at the top, flat manifests/, annotations in metadata/, scorecard config in tests/.
func TestBundleLayout(t *testing.T) {
	root := repo(t, "bundle")
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		top, rest, _ := strings.Cut(f, "/")
		switch {
		case top == "manifests" && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".yaml"):
		case f == "metadata/annotations.yaml":
		case f == "tests/scorecard/config.yaml":
		default:
			t.Errorf("bundle/%s is outside the registry+v1 layout (manifests/*.yaml, metadata/annotations.yaml, tests/scorecard/config.yaml)", f)
		}
	}
	for _, want := range []string{"metadata/annotations.yaml", "tests/scorecard/config.yaml", "manifests/celld-operator.clusterserviceversion.yaml"} {
		if !contains(files, want) {
			t.Errorf("bundle/%s is missing", want)
		}
	}
}

// TestBundleAnnotationKeys checks the annotation keys and values operator-registry requires,
// and that bundle.Dockerfile carries exactly the same labels.
func TestBundleAnnotationKeys(t *testing.T) {
	raw, err := os.ReadFile(repo(t, "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		t.Fatalf("annotations.yaml: %v", err)
	}
	want := map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         "celld-operator",
		"operators.operatorframework.io.bundle.channels.v1":        "candidate-v0,stable-v0",
		"operators.operatorframework.io.bundle.channel.default.v1": "stable-v0",
		gen.MetricsBuilder:                                 gen.Builder,
		gen.MetricsMediaType:                               "metrics+v1",
		gen.MetricsProjectLayout:                           gen.HybridHelmLayout,
		"operators.operatorframework.io.test.mediatype.v1": "scorecard+v1",
		"operators.operatorframework.io.test.config.v1":    "tests/scorecard/",
		gen.OpenShiftVersionsKey:                           openShiftVersions(t),
	}
	for k, v := range want {
		if file.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, file.Annotations[k], v)
		}
	}
	for k := range file.Annotations {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected annotation %s", k)
		}
	}
	channels := strings.Split(file.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",")
	if def := file.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]; !contains(channels, def) {
		t.Errorf("default channel %q is not among the channels %v", def, channels)
	}

	labels := dockerfileLabels(t, repo(t, "bundle.Dockerfile"))
	if len(labels) != len(file.Annotations) {
		t.Errorf("bundle.Dockerfile has %d labels, annotations.yaml %d; they must be identical", len(labels), len(file.Annotations))
	}
	for k, v := range file.Annotations {
		if labels[k] != v {
			t.Errorf("bundle.Dockerfile LABEL %s=%q, annotations.yaml has %q", k, labels[k], v)
		}
	}
}

// TestBundleManifestKindsAndMetadata checks every bundle object is a supported kind with valid
// metadata and no namespace (OLM places it in the install namespace).
func TestBundleManifestKindsAndMetadata(t *testing.T) {
	paths, err := filepath.Glob(repo(t, "bundle", "manifests", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no bundle manifests: %v", err)
	}
	for _, p := range paths {
		objs := objects(t, p)
		if len(objs) != 1 {
			t.Errorf("%s holds %d objects; the bundle format wants one per file", filepath.Base(p), len(objs))
			continue
		}
		o := objs[0]
		kind := o.GetKind()
		if kind != "ClusterServiceVersion" && kind != "CustomResourceDefinition" && !supportedKinds[kind] {
			t.Errorf("%s: kind %s is not supported in a registry+v1 bundle", filepath.Base(p), kind)
		}
		if kind != "ClusterServiceVersion" && o.GetNamespace() != "" {
			t.Errorf("%s: %s %s sets namespace %q; OLM installs it into the operator namespace", filepath.Base(p), kind, o.GetName(), o.GetNamespace())
		}
		namespaced := kind != "CustomResourceDefinition" && kind != "ClusterRole" && kind != "ClusterRoleBinding" && kind != "PriorityClass"
		nameFn := apivalidation.NameIsDNSSubdomain
		if errs := apivalidation.ValidateObjectMetaAccessor(o, namespaced && o.GetNamespace() != "", nameFn, field.NewPath("metadata")); len(errs) > 0 {
			t.Errorf("%s: invalid metadata: %v", filepath.Base(p), errs.ToAggregate())
		}
	}
	if got := csv(t).GetName(); !strings.HasPrefix(got, gen.PackageName+".v") {
		t.Errorf("CSV name %q is not %s.v<semver>", got, gen.PackageName)
	}
}

func dockerfileLabels(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	labels := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if rest, ok := strings.CutPrefix(line, "LABEL "); ok {
			k, v, _ := strings.Cut(rest, "=")
			labels[k] = v
		}
	}
	return labels
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
