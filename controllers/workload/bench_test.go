package workload_test

import (
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

// The reconciler renders the workload on every pass (every 5-7 s per fleet, and on every
// event), so rendering and hashing must stay cheap next to the API round trips around them.

func benchFleet(b *testing.B) *v1.CelldFleet {
	return fleet(b, "tuned", everything, func(f *v1.CelldFleet) {
		f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}}
		f.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: "r1"}
	})
}

func BenchmarkPodTemplate(b *testing.B) {
	f := benchFleet(b)
	o := testOptions(f)
	b.ReportAllocs()
	for b.Loop() {
		_ = workload.PodTemplate(f, o)
	}
}

func benchmarkStatefulSet(b *testing.B, replicas int32) {
	f := benchFleet(b)
	o := testOptions(f)
	b.ReportAllocs()
	for b.Loop() {
		if s := workload.StatefulSet(f, o, replicas); *s.Spec.Replicas != replicas {
			b.Fatal("wrong replicas")
		}
	}
}

func BenchmarkStatefulSet3(b *testing.B)   { benchmarkStatefulSet(b, 3) }
func BenchmarkStatefulSet100(b *testing.B) { benchmarkStatefulSet(b, 100) }

func BenchmarkDeployment(b *testing.B) {
	f := fleet(b, "bucket", everything)
	o := testOptions(f)
	b.ReportAllocs()
	for b.Loop() {
		_ = workload.Deployment(f, o, 3)
	}
}

// BenchmarkSpecHash is the hash alone, the part of a render the no-write check pays for.
func BenchmarkSpecHash(b *testing.B) {
	f := benchFleet(b)
	s := workload.StatefulSet(f, testOptions(f), 3)
	b.ReportAllocs()
	for b.Loop() {
		_ = workload.SpecHash(s)
	}
}
