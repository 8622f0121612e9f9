package capacity

import (
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Record returns the history after a step the reconciler took on decision d: from and to are
// the applied counts before and after its write, and to may fall short of d.Target (a growth
// run ends early, a contraction removes one member per step); the step taken is what counts.
// Call it once, after the write succeeded, in the reconcile that made it. A failed write
// records nothing, so a record can be lost but is never kept for a step not taken.
//
// Every step, manual or policy, starts both cooldowns. A policy addition keeps the load it grew
// from as the redistribution baseline; a manual addition clears the baseline, and a removal
// drops it, since the members it needs may be gone. A manual step stores the declared count
// only once it is reached, so the override keeps winning until then.
func (h History) Record(d *Decision, now time.Time, from, to int32) History {
	if from == to {
		return h
	}
	policyStep := d.Reason == ReasonScaleOutRecommended || d.Reason == ReasonScaleInRecommended
	if policyStep || to == d.declared {
		h.Declared = d.declared
	}
	switch {
	case to < from:
		h.LastScaleIn = now
		h.Baseline = nil
	case policyStep && d.incumbent != nil:
		h.LastScaleOut = now
		h.Baseline = &Baseline{At: now, From: from, To: to, Incumbents: d.incumbent}
		h.FailedBatches = d.failed
	default:
		h.LastScaleOut = now
		h.Baseline = nil
	}
	return h
}

// Step is what a replica step the reconciler took leaves to do: the event and count of a step
// the policy itself recommended, and the history to record on the reservation.
type Step struct {
	// Event is the step's Normal event (CapacityScaledOut or CapacityScaledIn) when the policy
	// recommended it; empty for a manual step (spec.replicas), which is told by no event.
	Event, Message string
	// History is the history after the step, Encoded its annotation state, and Changed whether
	// it differs from what the reservation holds: an unchanged history is not written again.
	History History
	Encoded []byte
	Changed bool
}

// PlanStep decides, for a step from and to applied counts taken on decision d (nil without a
// policy) over the recorded history h, what is told and what is recorded. No decision or no
// change of count is no step. An error is a history that cannot be encoded: the step stays
// taken and its record is lost, as with a failed write.
func PlanStep(d *Decision, h History, now time.Time, from, to int32) (Step, error) {
	if d == nil || from == to {
		return Step{History: h}, nil
	}
	var st Step
	if d.Reason == ReasonScaleOutRecommended || d.Reason == ReasonScaleInRecommended {
		st.Event, st.Message = v1.EventCapacityScaledOut, fmt.Sprintf("Added members on the %s capacity policy: %d to %d applied (%s)", d.Mode, from, to, d.Message)
		if to < from {
			st.Event, st.Message = v1.EventCapacityScaledIn, fmt.Sprintf("Removed members on the %s capacity policy: %d to %d applied (%s)", d.Mode, from, to, d.Message)
		}
	}
	st.History = h.Record(d, now, from, to)
	after, err := json.Marshal(st.History)
	if err != nil {
		return st, fmt.Errorf("encode the capacity history after the step %d to %d: %w", from, to, err)
	}
	before, err := json.Marshal(h)
	st.Encoded, st.Changed = after, err != nil || string(before) != string(after)
	return st, nil
}
