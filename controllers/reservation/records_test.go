package reservation

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// recordsCase is a reservation as a pass reads it and the fleet it binds.
type recordsCase struct {
	name string
	res  func(f *v1.CelldFleet) *v1.CelldStorageReservation
	// capacity gives the fleet a capacity policy.
	capacity bool
	// set and remove are the annotations the plan must write and delete; superseded the
	// operation it must name.
	set, remove []string
	superseded  string
}

func withOperation(res *v1.CelldStorageReservation, value string) *v1.CelldStorageReservation {
	res = res.DeepCopy()
	if res.Annotations == nil {
		res.Annotations = map[string]string{}
	}
	res.Annotations[v1.AnnotationCurrentOperation] = value
	return res
}

func recordsCases(t *testing.T) []recordsCase {
	strict, _ := earlierRecord(t, "strict-in-flight.json")
	own := func(f *v1.CelldFleet) string {
		v, err := CapacityAnnotation(f.UID, []byte(`{"declared":3}`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	legacyWithCapacity := `{"operations":[{"type":"Upgrade","id":"u-1"}],"capacity":{"declared":3}}`
	return []recordsCase{
		{name: "a settled reservation of this release: nothing", res: Desired},
		{name: "a settled reservation with this fleet's capacity record: nothing", capacity: true,
			res: func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withOperation(Desired(f), own(f)) }},
		{name: "no tuning record: it is written", res: func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withoutRecord(Desired(f)) },
			set: []string{v1.AnnotationReservedTuning}},
		{name: "an invalid tuning record: it is rewritten", res: func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withRecord(Desired(f), `{"x":`) },
			set: []string{v1.AnnotationReservedTuning}},
		{name: "this fleet's capacity record, and the fleet has no policy any more: removed",
			res:    func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withOperation(Desired(f), own(f)) },
			remove: []string{v1.AnnotationCurrentOperation}},
		{name: "v0.0.5's operation in flight, no policy: removed and named",
			res:    func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withOperation(Desired(f), strict) },
			remove: []string{v1.AnnotationCurrentOperation}, superseded: "Restart operation op-1764496800-restart"},
		{name: "v0.0.5's operation in flight with a policy: removed (no capacity state of this release) and named", capacity: true,
			res:    func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withOperation(Desired(f), strict) },
			remove: []string{v1.AnnotationCurrentOperation}, superseded: "Restart operation op-1764496800-restart"},
		{name: "an earlier record with capacity state and a policy: rewritten to the capacity state", capacity: true,
			res: func(f *v1.CelldFleet) *v1.CelldStorageReservation {
				return withOperation(Desired(f), legacyWithCapacity)
			},
			set: []string{v1.AnnotationCurrentOperation}},
		{name: "an unreadable record: removed", capacity: true,
			res:    func(f *v1.CelldFleet) *v1.CelldStorageReservation { return withOperation(Desired(f), "not json") },
			remove: []string{v1.AnnotationCurrentOperation}},
		{name: "no tuning record and v0.0.5's operation: both in one update",
			res: func(f *v1.CelldFleet) *v1.CelldStorageReservation {
				return withOperation(withoutRecord(Desired(f)), strict)
			},
			set: []string{v1.AnnotationReservedTuning}, remove: []string{v1.AnnotationCurrentOperation}, superseded: "Restart operation op-1764496800-restart"},
	}
}

func recordsFleet(capacity bool) *v1.CelldFleet {
	f := fixture()
	if capacity {
		f.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityShadow}
	}
	return f
}

// TestPlanRecords: each reservation an earlier release (or an earlier pass) may leave gets the
// one update that brings its records to this release's, with a reason per change; a settled
// reservation gets none.
func TestPlanRecords(t *testing.T) {
	for _, c := range recordsCases(t) {
		t.Run(c.name, func(t *testing.T) {
			f := recordsFleet(c.capacity)
			res := c.res(f)
			got, err := PlanRecords(res, f)
			if err != nil {
				t.Fatal(err)
			}
			setKeys := slices.Sorted(maps.Keys(got.Set))
			if strings.Join(setKeys, ",") != strings.Join(c.set, ",") || strings.Join(got.Remove, ",") != strings.Join(c.remove, ",") {
				t.Fatalf("set %v remove %v, want set %v remove %v", setKeys, got.Remove, c.set, c.remove)
			}
			if got.Superseded != c.superseded {
				t.Errorf("superseded %q, want %q", got.Superseded, c.superseded)
			}
			if len(got.Why) != len(c.set)+len(c.remove) {
				t.Errorf("%d reasons for %d changes: %v", len(got.Why), len(c.set)+len(c.remove), got.Why)
			}
			if got.Empty() != (len(c.set)+len(c.remove) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

// TestPlanRecordsSettles: the reservation the update leaves still binds the fleet, planning
// again changes nothing (a settled fleet writes nothing), and the reservation read is not
// changed by Apply.
func TestPlanRecordsSettles(t *testing.T) {
	for _, c := range recordsCases(t) {
		t.Run(c.name, func(t *testing.T) {
			f := recordsFleet(c.capacity)
			res := c.res(f)
			before := res.DeepCopy()
			plan, err := PlanRecords(res, f)
			if err != nil {
				t.Fatal(err)
			}
			after := plan.Apply(res)
			if !maps.Equal(res.Annotations, before.Annotations) {
				t.Fatalf("Apply changed the reservation it was given: %v, was %v", res.Annotations, before.Annotations)
			}
			if ok, why := Matches(after, f); !ok {
				t.Fatalf("the updated reservation no longer binds the fleet: %s", why)
			}
			again, err := PlanRecords(after, f)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Empty() {
				t.Fatalf("a second plan on the updated reservation still changes %v (%v)", again.Keys(), again.Why)
			}
			if v, ok := after.Annotations[v1.AnnotationCurrentOperation]; ok && CapacityState(v, f.UID) == nil && c.capacity {
				t.Errorf("the current-operation record left is not this fleet's capacity state: %s", v)
			}
		})
	}
}
