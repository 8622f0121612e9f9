package children

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden renders under testdata/golden")

const (
	testNamespace = "fleets"
	testUID       = "6b1f7d2e-3c4a-4e5f-9a8b-0c1d2e3f4a5b"
)

// testFacts are the facts every golden render uses: both optional APIs served, so each sample
// shows everything it can produce.
func testFacts() OperatorFacts {
	return OperatorFacts{
		Namespace:             "celld-system",
		ServiceAccount:        "celld-operator",
		NetworkPolicyEnforced: true,
		GatewayAPIInstalled:   true,
		IstioInstalled:        true,
	}
}

func loadSample(t testing.TB, path string) *v1.CelldFleet {
	t.Helper()
	f, err := corpus.ReadSample(path)
	if err != nil || f == nil {
		t.Fatalf("sample %s: %v (no CelldFleet: %v)", path, err, f == nil)
	}
	f.Namespace = testNamespace
	f.UID = testUID
	f.Default()
	return f
}

func isFleetManifest(t testing.TB, path string) bool {
	t.Helper()
	f, err := corpus.ReadSample(path)
	if err != nil {
		t.Fatal(err)
	}
	return f != nil
}

func renderYAML(t testing.TB, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes()
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./controllers/children -run Golden -update, then review the diff)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("render of %s differs from %s; if the change is intended, run with -update and review the diff.\n--- got\n%s", name, path, got)
	}
}

// TestGoldenRenderOfEverySample renders each config/samples fleet with fixed identity and facts,
// so any change to what a user's fleet gets is visible in review.
func TestGoldenRenderOfEverySample(t *testing.T) {
	r, err := NewFleetRenderer()
	if err != nil {
		t.Fatal(err)
	}
	samples, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, s := range samples {
		if !isFleetManifest(t, s) {
			continue // kustomization.yaml and friends
		}
		name := strings.TrimSuffix(filepath.Base(s), ".yaml")
		t.Run(name, func(t *testing.T) {
			objs, err := r.Render(loadSample(t, s), testFacts())
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "sample-"+name, renderYAML(t, objs))
		})
	}
}

// TestGoldenRenderOfTransitions covers the states no sample shows on its own.
func TestGoldenRenderOfTransitions(t *testing.T) {
	r, err := NewFleetRenderer()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		sample string
		edit   func(f *v1.CelldFleet, facts *OperatorFacts)
	}{
		{"mesh-joining-mixed", "istio-mesh", func(f *v1.CelldFleet, facts *OperatorFacts) {
			facts.MeshMixed = true
		}},
		{"mesh-leaving-proxies-remain", "istio-mesh", func(f *v1.CelldFleet, facts *OperatorFacts) {
			f.Spec.Mesh = nil
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
			facts.MeshMixed = true
		}},
		{"mesh-leaving-after-control-plane-change", "istio-mesh", func(f *v1.CelldFleet, facts *OperatorFacts) {
			// Joined through istio-system (remembered), moved to istio-canary, now leaving:
			// proxies injected by both still run, and each keeps its istiod egress.
			f.Spec.Mesh = nil
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
			facts.MeshMixed = true
			facts.ProxyControlPlanes = []string{"istio-canary", "istio-system"}
		}},
		{"mesh-left", "istio-mesh", func(f *v1.CelldFleet, facts *OperatorFacts) {
			f.Spec.Mesh = nil
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
		}},
		{"routing-ingress-http-only", "routing-ingress", func(f *v1.CelldFleet, facts *OperatorFacts) {
			f.Spec.Routing.Ingress.TLSSecretName = ""
			f.Spec.Routing.Ingress.Annotations = nil
		}},
		{"routing-gateway-without-gateway-api", "routing-gateway", func(f *v1.CelldFleet, facts *OperatorFacts) {
			facts.GatewayAPIInstalled = false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := loadSample(t, "../../config/samples/"+c.sample+".yaml")
			facts := testFacts()
			c.edit(f, &facts)
			objs, err := r.Render(f, facts)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, c.name, renderYAML(t, objs))
		})
	}
}
