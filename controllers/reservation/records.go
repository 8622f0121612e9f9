package reservation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Records is the one change a fleet's pass makes to the records its reservation carries (the
// tuning record and the current-operation record): the annotations to set and to remove, and
// why. The zero value changes nothing, which is what a settled fleet's reservation gets.
type Records struct {
	// Set are the annotations to write, with their values; Remove those to delete.
	Set    map[string]string
	Remove []string
	// Why is one clause per change, in the order the changes are listed.
	Why []string
	// Superseded names an operation an earlier release held in flight on the reservation and
	// this change drops, for the OperationSuperseded event; empty when there was none.
	Superseded string
}

// Empty reports whether the plan changes nothing.
func (r Records) Empty() bool { return len(r.Set) == 0 && len(r.Remove) == 0 }

// Keys are the annotations the plan writes or removes, sorted.
func (r Records) Keys() []string {
	return slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(r.Set)), r.Remove...)))
}

// Apply returns a copy of res carrying the plan's records; res is not changed.
func (r Records) Apply(res *v1.CelldStorageReservation) *v1.CelldStorageReservation {
	out := res.DeepCopy()
	if out.Annotations == nil && len(r.Set) > 0 {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Annotations, r.Set)
	for _, k := range r.Remove {
		delete(out.Annotations, k)
	}
	return out
}

// PlanRecords decides, from the reservation as read and the (defaulted) fleet it binds, the
// one update of its records, so a reservation an earlier release left behind is brought to
// this release's records in one write:
//
//   - the tuning record, when NeedsTuningRecord says the reservation has none that verifies
//     and the fleet still hashes to the frozen spec hash;
//   - the current-operation record: removed when the fleet has no spec.capacity (only a
//     capacity policy keeps state there), otherwise Supersede's answer (this release's record
//     is kept, an earlier release's is rewritten to its capacity state alone, or removed).
//     Either way an operation an earlier release held in flight is named as superseded.
//
// Applying the plan and planning again changes nothing (TestPlanRecordsSettles). An error is a
// tuning record that cannot be encoded.
func PlanRecords(res *v1.CelldStorageReservation, f *v1.CelldFleet) (Records, error) {
	var out Records
	set := func(k, v, why string) {
		if out.Set == nil {
			out.Set = map[string]string{}
		}
		out.Set[k] = v
		out.Why = append(out.Why, why)
	}
	if NeedsTuningRecord(res, f) {
		record, err := TuningRecord(f)
		if err != nil {
			return Records{}, fmt.Errorf("the tuning record of CelldFleet %s/%s: %w", f.Namespace, f.Name, err)
		}
		set(v1.AnnotationReservedTuning, record, "the reservation has no tuning record that verifies, and the fleet still hashes to its frozen spec")
	}
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok {
		return out, nil
	}
	sup := Supersede(value, f.UID)
	out.Superseded = sup.Operation
	switch {
	case f.Spec.Capacity == nil:
		out.Remove = append(out.Remove, v1.AnnotationCurrentOperation)
		out.Why = append(out.Why, "the fleet has no spec.capacity, and only a capacity policy keeps state in the current-operation record")
	case !sup.Changed:
	case sup.Remove:
		out.Remove = append(out.Remove, v1.AnnotationCurrentOperation)
		out.Why = append(out.Why, "an earlier release kept claim identities, operations and disruption times in the current-operation record, and it holds no capacity state to keep")
	default:
		set(v1.AnnotationCurrentOperation, sup.Value, "an earlier release kept claim identities, operations and disruption times in the current-operation record; only its capacity-policy state remains")
	}
	return out, nil
}

// String is the plan as the mutation line's object names it: the annotations it writes.
func (r Records) String() string { return strings.Join(r.Keys(), ",") }
