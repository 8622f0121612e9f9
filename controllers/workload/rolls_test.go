package workload_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

// TestWhichChangesRollTheFleet is the contract between the spec and the members: a change
// that reaches the Pod template restarts every member once, one at a time; a change that does
// not must leave both the template and the SpecHash alone, or the operator would restart a
// whole fleet for editing a route.
func TestWhichChangesRollTheFleet(t *testing.T) {
	for _, c := range slices.Concat(rollingChanges(), quietChanges()) {
		t.Run(c.name, func(t *testing.T) {
			before := fleet(t, c.sample)
			after := fleet(t, c.sample, c.mutate)
			o := testOptions(before)
			tplBefore := workload.SpecHash(new(workload.PodTemplate(before, o)))
			tplAfter := workload.SpecHash(new(workload.PodTemplate(after, o)))
			hashBefore := workload.SpecHash(render(before, o))
			hashAfter := workload.SpecHash(render(after, o))
			if rolled := tplBefore != tplAfter; rolled != c.rolls {
				t.Errorf("%s: template changed = %v, want %v", c.name, rolled, c.rolls)
			}
			if changed := hashBefore != hashAfter; changed != c.rolls {
				t.Errorf("%s: SpecHash changed = %v, want %v", c.name, changed, c.rolls)
			}
		})
	}
}

// change is one spec edit and whether it must roll the members.
type change struct {
	name   string
	sample string
	mutate func(*v1.CelldFleet)
	rolls  bool
}

// rollingChanges reach the Pod template: env, telemetry, export, mesh membership, the image,
// the restart token, execution and lifecycle.
func rollingChanges() []change {
	return []change{
		{"env value", "tuned", func(f *v1.CelldFleet) { f.Spec.Env[0].Value = new("debug") }, true},
		{"env entry added", "persistent", func(f *v1.CelldFleet) { f.Spec.Env = []v1.EnvVar{{Name: "CELLD_LOG", Value: new("info")}} }, true},
		{"env Secret key", "tuned", func(f *v1.CelldFleet) { f.Spec.Env[1].SecretKeyRef.Key = "hmac-2" }, true},
		{"env order", "tuned", func(f *v1.CelldFleet) { f.Spec.Env[0], f.Spec.Env[1] = f.Spec.Env[1], f.Spec.Env[0] }, true},
		{"telemetry added", "persistent", func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "http://otel:4318", Egress: v1.EgressTarget{CIDR: "10.0.0.1/32"}}
		}, true},
		{"telemetry sampler", "telemetry", func(f *v1.CelldFleet) { f.Spec.Telemetry.SamplerArg = "0.2" }, true},
		{"telemetry removed", "telemetry", func(f *v1.CelldFleet) { f.Spec.Telemetry = nil }, true},
		{"export added", "persistent", func(f *v1.CelldFleet) { f.Spec.Export = &v1.ExportSpec{} }, true},
		{"export retention", "export-bucket", func(f *v1.CelldFleet) { f.Spec.Export.Bucket.RetentionDays = new(int32(7)) }, true},
		{"export Kafka properties key", "export-kafka", func(f *v1.CelldFleet) { f.Spec.Export.Kafka.PropertiesSecretKeyRef.Key = "other" }, true},
		{"export removed", "export-kafka", func(f *v1.CelldFleet) { f.Spec.Export = nil }, true},
		{"mesh added", "persistent", func(f *v1.CelldFleet) { f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}} }, true},
		{"mesh removed", "istio-mesh", func(f *v1.CelldFleet) { f.Spec.Mesh = nil }, true},
		{"mesh removed, history kept", "istio-mesh", func(f *v1.CelldFleet) {
			f.Spec.Mesh = nil
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
		}, true},
		{"runtime image", "persistent", func(f *v1.CelldFleet) {
			f.Spec.RuntimeImage = "images.example.invalid/celld/celld@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		}, true},
		{"restart token set", "persistent", func(f *v1.CelldFleet) { f.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: "1"} }, true},
		{"restart token changed", "maintenance-paused", func(f *v1.CelldFleet) { f.Spec.Maintenance.RestartToken = "2026-11-30-1" }, true},
		{"cpu request", "tuned", func(f *v1.CelldFleet) { f.Spec.Execution.CPURequest = new(resource.MustParse("750m")) }, true},
		{"memory limit", "bucket", func(f *v1.CelldFleet) { f.Spec.Execution.MemoryLimit = new(resource.MustParse("3Gi")) }, true},
		{"max resident cells", "persistent", func(f *v1.CelldFleet) { f.Spec.Execution.MaxResidentCells = new(int32(10)) }, true},
		{"idle eviction", "tuned", func(f *v1.CelldFleet) { f.Spec.Execution.IdleEvictSeconds = new(int32(60)) }, true},
		{"shutdown budget", "persistent", func(f *v1.CelldFleet) { f.Spec.Lifecycle.ShutdownSeconds = 10 }, true},
		{"termination grace", "bucket-ordered", func(f *v1.CelldFleet) { f.Spec.Lifecycle.TerminationGraceSeconds = 45 }, true},
	}
}

// quietChanges never reach the Pod template: replicas, routing, capacity, pause, the mesh's
// policy-only fields, reordered sets, fleet metadata and status.
func quietChanges() []change {
	return []change{
		{"replicas", "persistent", func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(7)) }, false},
		{"routing added", "persistent", func(f *v1.CelldFleet) {
			f.Spec.Routing = &v1.RoutingSpec{
				Hostnames: []string{"app.example.com"},
				Source:    v1.RoutingSource{Namespace: "edge", PodLabels: map[string]v1.LabelValue{"app": "gw"}},
				Gateway:   &v1.GatewayRouting{Name: "public"},
			}
		}, false},
		{"routing hostnames", "routing-ingress", func(f *v1.CelldFleet) { f.Spec.Routing.Hostnames = []string{"other.example.com"} }, false},
		{"routing removed", "routing-gateway", func(f *v1.CelldFleet) { f.Spec.Routing = nil }, false},
		{"capacity added", "persistent", func(f *v1.CelldFleet) { f.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityShadow} }, false},
		{"capacity bounds", "capacity-external", func(f *v1.CelldFleet) { f.Spec.Capacity.MaxReplicas = 12 }, false},
		{"paused", "persistent", func(f *v1.CelldFleet) { f.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true} }, false},
		{"unpaused", "maintenance-paused", func(f *v1.CelldFleet) { f.Spec.Maintenance.Paused = false }, false},
		{"allowCoordinatedDowntime (ignored)", "persistent", func(f *v1.CelldFleet) {
			f.Spec.Maintenance = &v1.MaintenanceSpec{AllowCoordinatedDowntime: true}
		}, false},
		{"mesh control-plane namespace", "istio-mesh", func(f *v1.CelldFleet) { f.Spec.Mesh.Istio.ControlPlaneNamespace = "istio-prod" }, false},
		{"mesh application access", "istio-mesh", func(f *v1.CelldFleet) { f.Spec.Mesh.Istio.ApplicationAccess = v1.ApplicationAccessAllowAll }, false},
		{"mesh history on a meshed fleet", "istio-mesh", func(f *v1.CelldFleet) {
			f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
		}, false},
		{"export classes reordered (a set)", "export-bucket", func(f *v1.CelldFleet) {
			f.Spec.Export.Classes = []string{"Customers", "Orders"}
		}, false},
		{"fleet labels and unrelated annotations", "bucket", func(f *v1.CelldFleet) {
			f.Labels = map[string]string{"team": "a"}
			f.Annotations = map[string]string{"note": "x"}
		}, false},
		{"status", "persistent", func(f *v1.CelldFleet) {
			f.Status = v1.CelldFleetStatus{ObservedGeneration: 9, Replicas: 3, Reservation: "r",
				Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue}}}
		}, false},
		{"generation and resourceVersion", "bucket-ordered", func(f *v1.CelldFleet) {
			f.Generation, f.ResourceVersion = 42, "1234"
		}, false},
	}
}

// TestReplicasAreNotPartOfTheSpecHash: the replica count is written on its own (growth runs,
// one-step contraction); a different count must not look like a new spec.
func TestReplicasAreNotPartOfTheSpecHash(t *testing.T) {
	for _, sample := range []string{"persistent", "bucket-ordered"} {
		f := fleet(t, sample)
		o := testOptions(f)
		a, b := workload.StatefulSet(f, o, 3), workload.StatefulSet(f, o, 100)
		if workload.SpecHash(a) != workload.SpecHash(b) || a.Annotations[v1.AnnotationSpecHash] != b.Annotations[v1.AnnotationSpecHash] {
			t.Errorf("%s: the StatefulSet hash depends on replicas", sample)
		}
		if *a.Spec.Replicas != 3 || *b.Spec.Replicas != 100 {
			t.Errorf("%s: replicas %d/%d, want 3/100", sample, *a.Spec.Replicas, *b.Spec.Replicas)
		}
	}
	f := fleet(t, "bucket")
	o := testOptions(f)
	if workload.SpecHash(workload.Deployment(f, o, 3)) != workload.SpecHash(workload.Deployment(f, o, 50)) {
		t.Error("the Deployment hash depends on replicas")
	}
}

// TestSpecHashAnnotationIsTheHash: a builder's annotation is exactly SpecHash of its result, so
// the reconciler can compare it with the live annotation without re-hashing.
func TestSpecHashAnnotationIsTheHash(t *testing.T) {
	names, fleets := samples(t)
	for _, name := range names {
		f := fleets[name]
		o := testOptions(f)
		obj := render(f, o)
		meta, ok := obj.(metav1.Object)
		if !ok {
			t.Fatalf("%s: %T is not an object", name, obj)
		}
		if got, want := meta.GetAnnotations()[v1.AnnotationSpecHash], workload.SpecHash(obj); got != want || len(got) != 64 {
			t.Errorf("%s: annotation %q, want %q", name, got, want)
		}
	}
}
