package reservation

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The fixtures below are the JSON each earlier release hashed into a reservation, written out
// by hand from what the reference study records of it (reference-operator.md §1.8 "SpecHash"
// and §1.26 "Upgrade paths from older releases"): v0.0.2 hashed its required
// "qualification":"Experimental" before "profile"; v0.0.8 and v0.0.9 also hashed the
// (defaulted) export. Everything else is this release's layout: the defaulted spec with
// initialReplicas as replicas, runtimeImage empty, and maintenance, capacity, routing, mesh and
// previews left out. The fleets are the prior art's compatibility fixtures
// (reservation_compat_test.go: a PersistentFleet "legacy" for v0.0.2, a Bucket fleet "export"
// with a Kafka sink for v0.0.8/v0.0.9). The tests hash these literals, never the code's own
// rendering, so a change to the layouts fails here.
const (
	// v002Frozen is what v0.0.2 hashed for legacyFleet.
	v002Frozen = `{"qualification":"Experimental","profile":"PersistentFleet","replicas":3,"runtimeImage":"","serviceAccountName":"runtime","storage":{"bucket":"legacy-bucket","region":"us-east-1","storageClassName":"disposable","sizeGiB":10},"placement":{"zones":["us-east-1a","us-east-1b"],"azCount":2,"mode":"Strict"},"execution":{"cpuRequest":"250m","memoryRequest":"512Mi","memoryLimit":"1Gi"},"lifecycle":{"shutdownSeconds":20,"terminationGraceSeconds":30}}`
	// v009Frozen is what v0.0.8 and v0.0.9 hashed for exportFleet.
	v009Frozen = `{"profile":"Bucket","replicas":3,"runtimeImage":"","serviceAccountName":"runtime","storage":{"bucket":"export-bucket","region":"us-east-1","sizeGiB":10},"placement":{"zones":["us-east-1a","us-east-1b"],"azCount":2,"mode":"Strict"},"execution":{"cpuRequest":"250m","memoryRequest":"512Mi","memoryLimit":"1Gi"},"lifecycle":{"shutdownSeconds":20,"terminationGraceSeconds":30},"export":{"sink":"Kafka","kafka":{"brokers":["kafka-0.kafka:9092"],"topic":"celld-changes","egress":{"cidr":"10.20.0.0/16"}}}}`
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// legacyFleet is a PersistentFleet as v0.0.2 created it (spec.qualification, since removed
// from the API, is not part of the object any more).
func legacyFleet() *v1.CelldFleet {
	return &v1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleets", Name: "legacy", UID: "legacy-uid"},
		Spec: v1.CelldFleetSpec{
			Profile:            v1.ProfilePersistentFleet,
			RuntimeImage:       "registry.example.com/celld/celld@sha256:" + strings.Repeat("c", 64),
			ServiceAccountName: "runtime",
			Storage:            v1.StorageSpec{Bucket: "legacy-bucket", Region: "us-east-1", StorageClassName: new("disposable")},
			Placement:          v1.PlacementSpec{Zones: []string{"us-east-1a", "us-east-1b"}, AZCount: 2},
		},
	}
}

// exportFleet is a Bucket fleet with a Kafka export as v0.0.8 or v0.0.9 created it.
func exportFleet() *v1.CelldFleet {
	f := legacyFleet()
	f.Name, f.UID = "export", "export-uid"
	f.Spec.Profile, f.Spec.Storage = v1.ProfileBucket, v1.StorageSpec{Bucket: "export-bucket", Region: "us-east-1"}
	f.Spec.Export = &v1.ExportSpec{Sink: v1.ExportSinkKafka, Kafka: &v1.ExportKafka{
		Brokers: []string{"kafka-0.kafka:9092"}, Topic: "celld-changes", Egress: v1.EgressTarget{CIDR: "10.20.0.0/16"},
	}}
	return f
}

// frozenBy is the reservation an earlier release wrote for f: its spec with the hash of the
// JSON it froze, and no reserved-tuning record (records came later).
func frozenBy(f *v1.CelldFleet, frozen string) *v1.CelldStorageReservation {
	r := Desired(f)
	r.Annotations = nil
	r.Spec.SpecHash = sha(frozen)
	return r
}

func TestReservationsOfEarlierReleasesVerifyForTheFleetThatCreatedThem(t *testing.T) {
	for _, c := range []struct {
		name   string
		fleet  func() *v1.CelldFleet // the fleet that created the reservation
		frozen string                // the JSON its release hashed
		change func(*v1.CelldFleet)  // what changed since; nil for nothing
		layout string                // the release the match is attributed to; "" for no match
	}{
		{name: "v0.0.2: the unchanged fleet", fleet: legacyFleet, frozen: v002Frozen, layout: "v0.0.2"},
		{name: "v0.0.2: replicas, runtime image and maintenance changed since (never hashed)",
			fleet: legacyFleet, frozen: v002Frozen, layout: "v0.0.2", change: func(f *v1.CelldFleet) {
				f.Spec.Replicas = new(int32(5))
				f.Spec.RuntimeImage = "registry.example.com/celld/celld@sha256:" + strings.Repeat("d", 64)
				f.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: "r1"}
			}},
		{name: "v0.0.2: export added since (export is not in this layout)", fleet: legacyFleet, frozen: v002Frozen, layout: "v0.0.2",
			change: func(f *v1.CelldFleet) { f.Spec.Export = &v1.ExportSpec{} }},
		{name: "v0.0.2: region changed", fleet: legacyFleet, frozen: v002Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Storage.Region = "us-west-2" }},
		{name: "v0.0.2: disk size changed", fleet: legacyFleet, frozen: v002Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Storage.SizeGiB = 20 }},
		{name: "v0.0.2: placement relaxed", fleet: legacyFleet, frozen: v002Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Placement.Mode = v1.PlacementRelaxed }},
		{name: "v0.0.2: tuning changed with no record written", fleet: legacyFleet, frozen: v002Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Execution = &v1.ExecutionSpec{CPURequest: new(resource.MustParse("1"))} }},
		{name: "v0.0.2: a hash of another qualification is not this fleet's", fleet: legacyFleet,
			frozen: strings.Replace(v002Frozen, `"Experimental"`, `"Production"`, 1)},

		{name: "v0.0.8/v0.0.9: the unchanged fleet", fleet: exportFleet, frozen: v009Frozen, layout: "v0.0.8/v0.0.9"},
		{name: "v0.0.8/v0.0.9: replicas and runtime image changed since (never hashed)",
			fleet: exportFleet, frozen: v009Frozen, layout: "v0.0.8/v0.0.9", change: func(f *v1.CelldFleet) {
				f.Spec.Replicas = new(int32(4))
				f.Spec.RuntimeImage = "registry.example.com/celld/celld@sha256:" + strings.Repeat("d", 64)
			}},
		{name: "v0.0.8/v0.0.9: an export stored without its default sink hashed it defaulted",
			fleet: func() *v1.CelldFleet {
				f := exportFleet()
				f.Spec.Export = &v1.ExportSpec{}
				return f
			},
			frozen: strings.Replace(v009Frozen, `{"sink":"Kafka","kafka":{"brokers":["kafka-0.kafka:9092"],"topic":"celld-changes","egress":{"cidr":"10.20.0.0/16"}}}`, `{"sink":"Bucket"}`, 1),
			layout: "v0.0.8/v0.0.9"},
		{name: "v0.0.8/v0.0.9: a fleet created without export hashed this release's layout",
			fleet: func() *v1.CelldFleet {
				f := exportFleet()
				f.Spec.Export = nil
				return f
			},
			frozen: strings.Replace(v009Frozen, `,"export":{"sink":"Kafka","kafka":{"brokers":["kafka-0.kafka:9092"],"topic":"celld-changes","egress":{"cidr":"10.20.0.0/16"}}}`, ``, 1),
			layout: "current"},
		{name: "v0.0.8/v0.0.9: export topic changed", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Export.Kafka.Topic = "other" }},
		{name: "v0.0.8/v0.0.9: a broker added", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) {
				f.Spec.Export.Kafka.Brokers = append(f.Spec.Export.Kafka.Brokers, "kafka-1.kafka:9092")
			}},
		{name: "v0.0.8/v0.0.9: export switched to the Bucket sink", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Export = &v1.ExportSpec{Sink: v1.ExportSinkBucket} }},
		{name: "v0.0.8/v0.0.9: export removed", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Export = nil }},
		{name: "v0.0.8/v0.0.9: region changed", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.Storage.Region = "us-west-2" }},
		{name: "v0.0.8/v0.0.9: Ordered layout chosen", fleet: exportFleet, frozen: v009Frozen,
			change: func(f *v1.CelldFleet) { f.Spec.BucketWorkload = v1.BucketWorkloadOrdered }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.fleet()
			res := frozenBy(f, c.frozen)
			if c.change != nil {
				c.change(f)
			}
			ok, why := Matches(res, f)
			switch {
			case c.layout == "" && ok:
				t.Errorf("a reservation must not verify once an immutable field or a frozen export changed: matched (%s)", why)
			case c.layout != "" && !ok:
				t.Errorf("a reservation an earlier release wrote must verify for the fleet that created it: %s", why)
			case c.layout == "current" && why != MatchCurrent:
				t.Errorf("want the plain match in this release's layout, got %q", why)
			case c.layout != "" && c.layout != "current" && !strings.Contains(why, "as "+c.layout+" hashed it"):
				t.Errorf("the match must come from the %s layout (the fixture must not equal this release's hash), got %q", c.layout, why)
			}
		})
	}
}

// TestNewReservationsNeverUseALegacyLayout: the legacy layouts are read, never written.
func TestNewReservationsNeverUseALegacyLayout(t *testing.T) {
	for name, c := range map[string]struct {
		f      *v1.CelldFleet
		frozen string
	}{"v0.0.2": {legacyFleet(), v002Frozen}, "v0.0.8/v0.0.9": {exportFleet(), v009Frozen}} {
		if got := Desired(c.f).Spec.SpecHash; got == sha(c.frozen) {
			t.Errorf("a new reservation of the %s fixture froze the %s layout; new reservations get SpecHash", name, name)
		}
	}
}

// TestALegacyReservationGetsATuningRecordThatLetsTuningChange: a reservation from before
// records existed gets one while the fleet is unchanged, and then verifies changed tuning in
// the layout its release froze, still only while a frozen export is unchanged.
func TestALegacyReservationGetsATuningRecordThatLetsTuningChange(t *testing.T) {
	for name, c := range map[string]struct {
		fleet  func() *v1.CelldFleet
		frozen string
	}{"v0.0.2": {legacyFleet, v002Frozen}, "v0.0.8/v0.0.9": {exportFleet, v009Frozen}} {
		t.Run(name, func(t *testing.T) {
			f := c.fleet()
			res := frozenBy(f, c.frozen)
			if !NeedsTuningRecord(res, f) {
				t.Fatal("an unchanged fleet on a reservation without a record must get one")
			}
			rec, err := TuningRecord(f)
			if err != nil {
				t.Fatal(err)
			}
			res = withRecord(res, rec)
			if NeedsTuningRecord(res, f) {
				t.Error("the record just written must verify; otherwise every reconcile rewrites it")
			}
			g := f.DeepCopy()
			g.Default() // as admission stores it
			g = retuned(g)
			if ok, why := Matches(res, g); !ok || !strings.HasPrefix(why, MatchRecorded) || !strings.Contains(why, "as "+name+" hashed it") {
				t.Errorf("changed tuning must verify through the record in the %s layout: %v %q", name, ok, why)
			}
			if g.Spec.Export != nil {
				g.Spec.Export.Kafka.Topic = "other"
				if ok, _ := Matches(res, g); ok {
					t.Error("the record restores tuning only: a changed frozen export must still conflict")
				}
			}
		})
	}
}
