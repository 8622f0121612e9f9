package children

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// BenchmarkRenderFleet is one fleet's full chart render: values, schema validation, templates,
// sort and decode into unstructured (the routing-ingress sample plus mesh: the largest set).
// The cache is bypassed by forgetting the fleet each time.
func BenchmarkRenderFleet(b *testing.B) {
	r, err := NewFleetRenderer()
	if err != nil {
		b.Fatal(err)
	}
	f := benchFleet(b)
	b.ReportAllocs()
	for b.Loop() {
		r.Forget(f.UID)
		if _, err := r.Render(f, testFacts()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderFleetCached is the same fleet unchanged: a values hash and a copy of the
// cached objects, what a settled fleet costs per reconcile.
func BenchmarkRenderFleetCached(b *testing.B) {
	r, err := NewFleetRenderer()
	if err != nil {
		b.Fatal(err)
	}
	f := benchFleet(b)
	if _, err := r.Render(f, testFacts()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(f, testFacts()); err != nil {
			b.Fatal(err)
		}
	}
}

func benchFleet(b *testing.B) *v1.CelldFleet {
	f := loadSample(b, "../../config/samples/routing-ingress.yaml")
	f.UID = types.UID("bench")
	m := loadSample(b, "../../config/samples/istio-mesh.yaml")
	f.Spec.Mesh = m.Spec.Mesh
	return f
}

// BenchmarkApplySettledFleet is the children phase of a settled fleet against the real test
// API server with a direct (uncached) client: every Get and List goes over HTTP and nothing is
// written, and no child is compared by dry-run again (the applier remembers verified contents).
// A manager's cached client serves the same reads from memory.
func BenchmarkApplySettledFleet(b *testing.B) {
	benchmarkSettled(b, func(a *Applier) *Applier { return a })
}

// BenchmarkApplyUnverifiedFleet is the same pass by an applier that remembers nothing, as after
// an operator restart: every child costs one dry-run update on top of its read.
func BenchmarkApplyUnverifiedFleet(b *testing.B) {
	benchmarkSettled(b, func(*Applier) *Applier { return &Applier{} })
}

func benchmarkSettled(b *testing.B, applier func(*Applier) *Applier) {
	c := apiServer(b)
	f := fleetIn(b, "routing-ingress", newNamespace(b, c))
	m := loadSample(b, "../../config/samples/istio-mesh.yaml")
	f.Spec.Mesh = m.Spec.Mesh
	objs, err := testRenderer.Render(f, testFacts())
	if err != nil {
		b.Fatal(err)
	}
	a := &Applier{}
	if _, err := a.Apply(b.Context(), c, f, objs); err != nil {
		b.Fatal(err)
	}
	counting := &countingClient{Client: c}
	b.ReportAllocs()
	for b.Loop() {
		res, err := applier(a).Apply(b.Context(), counting, f, objs)
		if err != nil || res.Writes() != 0 {
			b.Fatalf("settled apply: %+v, %v", res, err)
		}
	}
	if n := counting.writes.Load(); n != 0 {
		b.Fatalf("%d writes", n)
	}
	b.ReportMetric(float64(counting.dryRuns.Load())/float64(b.N), "dry-runs/op")
}
