package reservation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// retuned is the fixture after its tuning changed: more CPU, a longer shutdown, another env
// entry and telemetry on.
func retuned(f *v1.CelldFleet) *v1.CelldFleet {
	f = f.DeepCopy()
	f.Spec.Execution.CPURequest = new(resource.MustParse("2"))
	f.Spec.Lifecycle.ShutdownSeconds = 25
	f.Spec.Env = append(f.Spec.Env, v1.EnvVar{Name: "CELLD_TRACE", Value: new("1")})
	f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "http://otel.example:4318", Egress: v1.EgressTarget{CIDR: "10.0.0.5/32"}}
	return f
}

func withRecord(r *v1.CelldStorageReservation, record string) *v1.CelldStorageReservation {
	r = r.DeepCopy()
	r.Annotations = map[string]string{v1.AnnotationReservedTuning: record}
	return r
}

func withoutRecord(r *v1.CelldStorageReservation) *v1.CelldStorageReservation {
	r = r.DeepCopy()
	r.Annotations = nil
	return r
}

func TestTuningMayChangeThroughTheReservedTuningRecord(t *testing.T) {
	f := fixture()
	res := Desired(f)
	if ok, why := Matches(res, retuned(f)); !ok || why != MatchRecorded {
		t.Errorf("execution, lifecycle, env and telemetry may change once the record is written: %v %s", ok, why)
	}
	if ok, _ := Matches(withoutRecord(res), retuned(f)); ok {
		t.Error("without a record, changed tuning must not reproduce the frozen hash")
	}
	if ok, why := Matches(res, f); !ok || why != MatchCurrent {
		t.Errorf("the unchanged fleet matches with its own spec: %v %s", ok, why)
	}
	moved := retuned(f)
	moved.Spec.Storage.SizeGiB = 99
	if ok, _ := Matches(res, moved); ok {
		t.Error("the record restores tuning only: a storage change must still conflict")
	}
}

func TestTuningRecordRoundTrip(t *testing.T) {
	f := fixture()
	rec, err := TuningRecord(f)
	if err != nil {
		t.Fatal(err)
	}
	res := withRecord(withoutRecord(Desired(f)), rec)
	if ok, why := Matches(res, retuned(f)); !ok {
		t.Errorf("a record written while the fleet hashed correctly restores its creation tuning: %s", why)
	}
	back, err := readRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if SpecHash(withTuning(retuned(f), back), 3) != goldenHash {
		t.Error("decoding the record and substituting it must reproduce the frozen hash")
	}
}

func TestAForgedRecordIsRefused(t *testing.T) {
	f := fixture()
	res := Desired(f)
	forged, err := TuningRecord(retuned(f)) // the new tuning, written as if it were the old
	if err != nil {
		t.Fatal(err)
	}
	for name, record := range map[string]string{
		"a record of the current tuning":   forged,
		"an unknown field":                 strings.Replace(res.Annotations[v1.AnnotationReservedTuning], `{`, `{"storage":{"bucket":"x"},`, 1),
		"data after the object":            res.Annotations[v1.AnnotationReservedTuning] + `{}`,
		"not JSON":                         `execution: {}`,
		"over 64 KiB":                      `{"env":[{"name":"CELLD_X","value":"` + strings.Repeat("x", MaxTuningRecord) + `"}]}`,
		"an unknown field inside a record": `{"lifecycle":{"shutdownSeconds":20,"terminationGraceSeconds":30,"x":1}}`,
	} {
		if ok, _ := Matches(withRecord(res, record), retuned(f)); ok {
			t.Errorf("%s: a record that does not reproduce the frozen hash, or is not strictly one bounded object, must never match", name)
		}
	}
}

// TestTheTuningRecordIsWrittenWhenAbsentOrInvalidAndOnlyFromCreationTuning is the decision
// the reconciler takes on every pass: write TuningRecord(fleet) or leave the reservation alone.
func TestTheTuningRecordIsWrittenWhenAbsentOrInvalidAndOnlyFromCreationTuning(t *testing.T) {
	f := fixture()
	res := Desired(f)
	valid := res.Annotations[v1.AnnotationReservedTuning]
	forged, err := TuningRecord(retuned(f))
	if err != nil {
		t.Fatal(err)
	}
	large := f.DeepCopy()
	for i := range 20 {
		large.Spec.Env = append(large.Spec.Env, v1.EnvVar{Name: "CELLD_V" + string(rune('A'+i)), Value: new(strings.Repeat("v", 4096))})
	}
	legacy, export := legacyFleet(), exportFleet()
	exportChanged := export.DeepCopy()
	exportChanged.Spec.Export.Kafka.Topic = "other"
	for _, c := range []struct {
		name  string
		res   *v1.CelldStorageReservation
		fleet *v1.CelldFleet
		write bool
	}{
		{name: "a record that verifies is left alone", res: res, fleet: f},
		{name: "a record that verifies but leaves the defaults out is left alone (no rewrite for spelling)",
			res: withRecord(res, `{"env":[{"name":"CELLD_LOG","value":"info"}]}`), fleet: f},
		{name: "no record, the fleet unchanged: written", res: withoutRecord(res), fleet: f, write: true},
		{name: "an empty record: rewritten", res: withRecord(res, ``), fleet: f, write: true},
		{name: "an unparsable record: rewritten", res: withRecord(res, `execution: {}`), fleet: f, write: true},
		{name: "a record with an unknown field: rewritten", res: withRecord(res, `{"x":1}`), fleet: f, write: true},
		{name: "a record with data after the object: rewritten", res: withRecord(res, valid+`{}`), fleet: f, write: true},
		{name: "a record over 64 KiB: rewritten",
			res: withRecord(res, `{"env":[{"name":"CELLD_X","value":"`+strings.Repeat("x", MaxTuningRecord)+`"}]}`), fleet: f, write: true},
		{name: "a well-formed record that does not reproduce the hash: rewritten", res: withRecord(res, forged), fleet: f, write: true},
		{name: "tuning changed and no record: never written from tuning that is not the creation tuning",
			res: withoutRecord(res), fleet: retuned(f)},
		{name: "tuning changed and an invalid record: never rewritten from it", res: withRecord(res, `{"x":1}`), fleet: retuned(f)},
		{name: "storage changed: nothing written", res: withoutRecord(res), fleet: func() *v1.CelldFleet {
			g := f.DeepCopy()
			g.Spec.Storage.SizeGiB = 99
			return g
		}()},
		{name: "another fleet UID: nothing written", res: withoutRecord(res), fleet: func() *v1.CelldFleet {
			g := f.DeepCopy()
			g.UID = "new-uid"
			return g
		}()},
		{name: "a record that would not fit in 64 KiB: nothing written, the tuning stays fixed",
			res: withoutRecord(Desired(large)), fleet: large},
		{name: "a v0.0.2 reservation without a record: written", res: frozenBy(legacy, v002Frozen), fleet: legacy, write: true},
		{name: "a v0.0.8/v0.0.9 reservation without a record, export unchanged: written",
			res: frozenBy(export, v009Frozen), fleet: export, write: true},
		{name: "a v0.0.8/v0.0.9 reservation whose export changed: nothing written",
			res: frozenBy(export, v009Frozen), fleet: exportChanged},
	} {
		if got := NeedsTuningRecord(c.res, c.fleet); got != c.write {
			t.Errorf("%s: NeedsTuningRecord = %v, want %v", c.name, got, c.write)
		}
	}
}

func TestALargeEnvCannotBeRecorded(t *testing.T) {
	f := fixture()
	for i := range 20 {
		f.Spec.Env = append(f.Spec.Env, v1.EnvVar{Name: "CELLD_V" + string(rune('A'+i)), Value: new(strings.Repeat("v", 4096))})
	}
	if _, err := TuningRecord(f); err == nil {
		t.Error("a record over 64 KiB must be refused")
	}
	if _, ok := Desired(f).Annotations[v1.AnnotationReservedTuning]; ok {
		t.Error("a reservation is created without a record that does not fit")
	}
}

func TestOnlyTheReservingFleetMatches(t *testing.T) {
	f := fixture()
	res := Desired(f)
	for name, c := range map[string]struct {
		res   func(*v1.CelldStorageReservation)
		fleet func(*v1.CelldFleet)
	}{
		"a fleet recreated under the same name (new UID)": {fleet: func(f *v1.CelldFleet) { f.UID = "new-uid" }},
		"a fleet without a UID":                           {fleet: func(f *v1.CelldFleet) { f.UID = "" }},
		"another namespace":                               {fleet: func(f *v1.CelldFleet) { f.Namespace = "other" }},
		"a reservation with an owner reference": {res: func(r *v1.CelldStorageReservation) {
			r.OwnerReferences = []metav1.OwnerReference{{Name: "orders"}}
		}},
		"a reservation being deleted":   {res: func(r *v1.CelldStorageReservation) { r.DeletionTimestamp = new(metav1.Now()) }},
		"a preview bucket reservation":  {res: func(r *v1.CelldStorageReservation) { r.Spec.OwnerKind = "FleetPreviews" }},
		"a reservation of a prefix":     {res: func(r *v1.CelldStorageReservation) { r.Spec.Prefix = "pr-1" }},
		"another frozen hash":           {res: func(r *v1.CelldStorageReservation) { r.Spec.SpecHash = strings.Repeat("0", 64) }},
		"another initial replica count": {res: func(r *v1.CelldStorageReservation) { r.Spec.InitialReplicas = 5 }},
	} {
		r, g := res.DeepCopy(), f.DeepCopy()
		if c.res != nil {
			c.res(r)
		}
		if c.fleet != nil {
			c.fleet(g)
		}
		if ok, why := Matches(r, g); ok || why == "" {
			t.Errorf("%s: must not match, and must say why (got %v %q)", name, ok, why)
		}
	}
}
