package capacity

import "time"

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
