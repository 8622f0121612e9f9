package reservation

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// goldenHash is the SpecHash of fixture() with initialReplicas 3, the sha256 of exactly
//
//	{"profile":"PersistentFleet","replicas":3,"runtimeImage":"","serviceAccountName":"orders-celld","storage":{"bucket":"celld-prod-data","region":"us-east-1","storageClassName":"ebs-gp3","sizeGiB":20},"placement":{"zones":["us-east-1a","us-east-1b","us-east-1c"],"azCount":3,"mode":"Strict"},"execution":{"cpuRequest":"250m","memoryRequest":"512Mi","memoryLimit":"1Gi"},"lifecycle":{"shutdownSeconds":20,"terminationGraceSeconds":30},"env":[{"name":"CELLD_LOG","value":"info"}]}
//
// It is frozen in every
// reservation created from such a fleet: if this test fails, the change would lock every
// existing fleet out of its bucket (StorageScopeConflict). Never update it to make a change
// pass.
const goldenHash = "fc8ba16a3421493f9b2aae28ae792ada144daf617d43420a8a373ba37bce0fbc"

func fixture() *v1.CelldFleet {
	f := &v1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "orders", UID: "5f0c3a52-8a1e-4b7e-9a51-0b1c2d3e4f50"},
		Spec: v1.CelldFleetSpec{
			Profile:            v1.ProfilePersistentFleet,
			Replicas:           new(int32(3)),
			RuntimeImage:       "registry.example.com/celld/celld@sha256:" + strings.Repeat("a", 64),
			ServiceAccountName: "orders-celld",
			Storage: v1.StorageSpec{
				Bucket: "celld-prod-data", Region: "us-east-1", StorageClassName: new("ebs-gp3"), SizeGiB: 20,
			},
			Placement: v1.PlacementSpec{Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, AZCount: 3},
			Env:       []v1.EnvVar{{Name: "CELLD_LOG", Value: new("info")}},
		},
	}
	f.Default()
	return f
}

func TestNameIsDerivedFromTheBucketScope(t *testing.T) {
	if got, want := Name("celld-prod-data", ""), "s3-c00c138336326c42e709dd8b0374fefc93501b056046cd1efe078766"; got != want {
		t.Errorf("bucket reservation: got %s, want %s (s3- and 56 hex digits of sha256(bucket))", got, want)
	}
	if got, want := Name("celld-previews", "pr-1234"), "s3-scope-2ad344e58038d7a574136b1eec1f54ccb335b04d52fb8dae38b0bf"; got != want {
		t.Errorf("prefix reservation: got %s, want %s (s3-scope- and 54 hex digits of sha256(bucket NUL prefix))", got, want)
	}
	valid := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, n := range []string{Name(strings.Repeat("b", 63), ""), Name(strings.Repeat("b", 63), strings.Repeat("p", 128))} {
		if len(n) > 63 || !valid.MatchString(n) {
			t.Errorf("%s is not a valid object name of at most 63 characters", n)
		}
	}
	if Name("a", "bc") == Name("ab", "c") {
		t.Error("the separator must keep bucket a/prefix bc apart from bucket ab/prefix c")
	}
}

func TestSpecHashIsStable(t *testing.T) {
	if got := SpecHash(fixture(), 3); got != goldenHash {
		t.Errorf("the spec hash of the fixture changed: got %s, want %s; every existing reservation would stop matching", got, goldenHash)
	}
	undefaulted := fixture()
	undefaulted.Spec.Execution, undefaulted.Spec.Lifecycle, undefaulted.Spec.BucketWorkload = nil, nil, ""
	undefaulted.Spec.Placement.Mode = ""
	if SpecHash(undefaulted, 3) != goldenHash {
		t.Error("a fleet stored without its defaults must hash like the defaulted fleet")
	}
}

func TestSpecHashExcludesWhatMayChange(t *testing.T) {
	for name, change := range map[string]func(*v1.CelldFleet){
		"replicas": func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(7)) },
		"runtime image": func(f *v1.CelldFleet) {
			f.Spec.RuntimeImage = "registry.example.com/celld/celld@sha256:" + strings.Repeat("b", 64)
		},
		"maintenance":              func(f *v1.CelldFleet) { f.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true, RestartToken: "r1"} },
		"capacity":                 func(f *v1.CelldFleet) { f.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityShadow} },
		"routing":                  func(f *v1.CelldFleet) { f.Spec.Routing = &v1.RoutingSpec{} },
		"mesh":                     func(f *v1.CelldFleet) { f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}} },
		"export":                   func(f *v1.CelldFleet) { f.Spec.Export = &v1.ExportSpec{} },
		"previews":                 func(f *v1.CelldFleet) { f.Spec.Previews = &v1.FleetPreviewsSpec{} },
		"Deployment made explicit": func(f *v1.CelldFleet) { f.Spec.BucketWorkload = v1.BucketWorkloadDeployment },
		"status":                   func(f *v1.CelldFleet) { f.Status.ReadyReplicas = 2 },
		"metadata":                 func(f *v1.CelldFleet) { f.Labels = map[string]string{"team": "a"} },
	} {
		f := fixture()
		change(f)
		if got := SpecHash(f, 3); got != goldenHash {
			t.Errorf("changing %s changed the reservation hash; it is excluded so the fleet keeps its bucket", name)
		}
	}
}

func TestSpecHashCoversWhatTheBucketDependsOn(t *testing.T) {
	for name, change := range map[string]func(*v1.CelldFleet){
		"bucket":               func(f *v1.CelldFleet) { f.Spec.Storage.Bucket = "celld-other" },
		"region":               func(f *v1.CelldFleet) { f.Spec.Storage.Region = "us-west-2" },
		"disk size":            func(f *v1.CelldFleet) { f.Spec.Storage.SizeGiB = 40 },
		"storage class":        func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = new("io2") },
		"zones":                func(f *v1.CelldFleet) { f.Spec.Placement.Zones = []string{"us-east-1a", "us-east-1b", "us-east-1d"} },
		"placement mode":       func(f *v1.CelldFleet) { f.Spec.Placement.Mode = v1.PlacementRelaxed },
		"profile":              func(f *v1.CelldFleet) { f.Spec.Profile = v1.ProfileBucket },
		"Ordered layout":       func(f *v1.CelldFleet) { f.Spec.BucketWorkload = v1.BucketWorkloadOrdered },
		"service account":      func(f *v1.CelldFleet) { f.Spec.ServiceAccountName = "other" },
		"execution (tuning)":   func(f *v1.CelldFleet) { f.Spec.Execution.CPURequest = new(resource.MustParse("1")) },
		"env (tuning)":         func(f *v1.CelldFleet) { f.Spec.Env = nil },
		"lifecycle (tuning)":   func(f *v1.CelldFleet) { f.Spec.Lifecycle.ShutdownSeconds = 25 },
		"initial replicas (5)": func(*v1.CelldFleet) {},
	} {
		f := fixture()
		change(f)
		initial := int32(3)
		if name == "initial replicas (5)" {
			initial = 5
		}
		if SpecHash(f, initial) == goldenHash {
			t.Errorf("changing %s left the reservation hash unchanged; the bucket would be shared with an incompatible fleet", name)
		}
	}
}

func TestDesiredReservesTheBucketToTheFleetUID(t *testing.T) {
	f := fixture()
	r := Desired(f)
	want := v1.CelldStorageReservationSpec{
		Bucket: "celld-prod-data", InitialReplicas: 3, FleetNamespace: "apps", FleetName: "orders",
		FleetUID: "5f0c3a52-8a1e-4b7e-9a51-0b1c2d3e4f50", SpecHash: goldenHash,
	}
	if r.Spec != want || r.Name != Name("celld-prod-data", "") {
		t.Errorf("desired reservation:\n got: %s %+v\nwant: %s %+v", r.Name, r.Spec, Name("celld-prod-data", ""), want)
	}
	if len(r.OwnerReferences) != 0 {
		t.Error("a reservation must never be owned: garbage collection would free the bucket")
	}
	if _, ok := r.Annotations[v1.AnnotationReservedTuning]; !ok {
		t.Error("the reservation is created with the creation-time tuning record")
	}
	if ok, why := Matches(r, f); !ok {
		t.Errorf("a fleet must match the reservation it created: %s", why)
	}
}
