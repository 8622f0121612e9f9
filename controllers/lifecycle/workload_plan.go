package lifecycle

import (
	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// WorkloadInput is everything the workload step of one pass is decided from. The reconciler
// builds it once per pass; the confirmation before a disruptive healing action builds it again
// with only the members re-read from the API server, so both plans see the same target, the
// same blockers and the same template verdict.
type WorkloadInput struct {
	// StatefulSet: the fleet runs as a StatefulSet (PersistentFleet, Ordered Bucket); false is
	// a Deployment (Bucket), which has no replica plan of its own and no healing.
	StatefulSet bool
	// Facts are the observed workload and members. Facts.Workload.TemplateMatches is the
	// drift check's verdict (the live spec, other than replicas, is the rendering);
	// Facts.Paused (spec.maintenance.paused) means no workload write and no healing action.
	Facts Facts
	// Foreign names a workload at the fleet's name that the fleet does not own; it is left
	// alone (LifecycleBlocked).
	Foreign string
	// Blocked: a blocker found earlier in the pass (access, validation, prerequisites, the
	// reservation, the children) holds provisioning back.
	Blocked bool
	// Target is the replica count the pass plans toward, computed once: the capacity policy's
	// target, or spec.replicas.
	Target int32
	// Uncertain is the capacity policy's CapacityUncertain verdict, if it holds a contraction
	// for evidence; it is reported when the step has nothing else to say.
	Uncertain *Verdict
	// Zones are spec.placement.zones of an Ordered Bucket fleet, whose member N is pinned to
	// Zones[N mod len(Zones)] before it is scheduled; nil for the other layouts.
	Zones []string
}

// ZoneRelease pins a gated Ordered member's Pod to its ordinal's zone and lifts the gate.
type ZoneRelease struct {
	Member int32
	Pod    Ref
	Zone   string
}

// WorkloadWrite is the write the workload step asks for.
type WorkloadWrite int

const (
	// WriteNone: the workload is left as it is.
	WriteNone WorkloadWrite = iota
	// WriteCreate: the workload is created at Replicas, and the pass ends.
	WriteCreate
	// WriteUpdate: the rendering is merged onto the live workload at Replicas; the executor
	// writes only when the template drifted or the count changes.
	WriteUpdate
)

func (w WorkloadWrite) String() string {
	switch w {
	case WriteCreate:
		return "create"
	case WriteUpdate:
		return "update"
	}
	return "none"
}

// WorkloadPlan is the workload step of one pass.
type WorkloadPlan struct {
	Write WorkloadWrite
	// Replicas is the count to create or apply; the applied count when nothing is written.
	Replicas int32
	// Step explains a replica change in progress, or why it waits.
	Step Verdict
	// Block is a blocker the plan itself found (a foreign workload, StorageIdentityConflict):
	// nothing is written, members that run are still healed.
	Block *Verdict
	// Heal is the one self-healing decision, made at the count this pass leaves applied; nil
	// when healing does not run (a Deployment, no workload, paused).
	Heal *Decision
	// ReleaseHolds: paused; only replacement holds an earlier pass left are released.
	ReleaseHolds bool
	// Stop: the pass ends after this step (nothing after it has anything to act on).
	Stop bool
	// ZoneGates are the gated Ordered members to pin and release, in ordinal order: only in a
	// pass whose healing decision takes no action (the executor finishes an earlier
	// replacement first, and then releases nothing either).
	ZoneGates []ZoneRelease
}

// PlanWorkload decides the workload step of one pass for either layout. Its rules, in order:
//
//   - paused: nothing is written and no healing action is taken; holds are released;
//   - a foreign workload at the fleet's name: LifecycleBlocked, nothing else;
//   - another blocker: nothing is written; a StatefulSet that exists is healed at its
//     applied count (no member added or removed), and since nothing is written the live
//     template is the one members keep, so it counts as matching;
//   - a StatefulSet: growth or contraction toward Target, one run at a time, then the healing
//     chain at the count this pass applies; a growth refused for the members' disks
//     (StorageIdentityConflict) blocks, and the members that run are healed at the applied
//     count;
//   - a Deployment: created at spec.replicas, then moved toward Target, one member per step
//     on scale-in.
//
// Once healing takes no action, the gated members of an Ordered Bucket fleet that are not
// deleting are pinned to their ordinal's zone and released, also under a blocker: a member the
// StatefulSet controller already created must be able to run.
func PlanWorkload(in WorkloadInput) WorkloadPlan {
	p := planWorkload(in)
	if p.Heal != nil && p.Heal.Action == None {
		p.ZoneGates = zoneReleases(in.Facts, in.Zones)
	}
	return p
}

// zoneReleases lists the members of an Ordered Bucket fleet whose Pod waits on the zone gate.
func zoneReleases(f Facts, zones []string) []ZoneRelease {
	if !f.OrderedBucket || len(zones) == 0 {
		return nil
	}
	var out []ZoneRelease
	for i, m := range f.Members {
		if p := m.Pod; p.Exists && p.ZoneGated && !p.Deleting {
			n := int32(i)
			out = append(out, ZoneRelease{Member: n, Pod: Ref{Name: f.name(n), UID: p.UID, ResourceVersion: p.ResourceVersion}, Zone: OrderedZone(zones, n)})
		}
	}
	return out
}

// OrderedZone is the zone of ordinal n of an Ordered Bucket fleet: zones[n % len(zones)], in
// spec order (zones are fixed at creation, so an ordinal keeps its zone for the fleet's life).
// The reconciler writes it as the member's zone nodeSelector and then removes the scheduling
// gate. It returns "" for a negative ordinal or an empty zone list.
func OrderedZone(zones []string, n int32) string {
	if n < 0 || len(zones) == 0 {
		return ""
	}
	return zones[int(n)%len(zones)]
}

func planWorkload(in WorkloadInput) WorkloadPlan {
	f := in.Facts
	w := f.Workload
	switch {
	case f.Paused:
		return WorkloadPlan{Replicas: w.Replicas, ReleaseHolds: true, Stop: true}
	case in.Foreign != "":
		return WorkloadPlan{Replicas: w.Replicas, Block: &Verdict{Reason: v1.ReasonLifecycleBlocked, Message: in.Foreign}, Stop: true}
	case !in.StatefulSet:
		return planDeployment(in)
	case in.Blocked:
		if !w.Exists {
			return WorkloadPlan{Stop: true} // nothing runs, nothing to heal
		}
		f.Workload.TemplateMatches = true
		return WorkloadPlan{Replicas: w.Replicas, Heal: healRunning(f)}
	}
	step := Plan(f, in.Target)
	if step.Reason != "" && !Provisioned(step.Reason) {
		p := WorkloadPlan{Replicas: w.Replicas, Block: &Verdict{Reason: step.Reason, Message: step.Message}, Stop: !w.Exists}
		if w.Exists {
			p.Heal = healRunning(f)
		}
		return p
	}
	p := WorkloadPlan{Write: WriteUpdate, Replicas: step.Replicas, Step: Verdict{Reason: step.Reason, Message: step.Message}, Heal: &step.Heal}
	if p.Step.Reason == "" && in.Uncertain != nil {
		p.Step = *in.Uncertain
	}
	if !w.Exists {
		p.Write, p.Heal, p.Stop = WriteCreate, nil, true
	}
	return p
}

// healRunning is the healing decision of a pass that adds and removes no member: planned at
// the applied count.
func healRunning(f Facts) *Decision {
	h := Plan(f, f.Workload.Replicas).Heal
	return &h
}

func planDeployment(in WorkloadInput) WorkloadPlan {
	w := in.Facts.Workload
	switch {
	case in.Blocked:
		return WorkloadPlan{Replicas: w.Replicas, Stop: true}
	case !w.Exists:
		return WorkloadPlan{Write: WriteCreate, Replicas: in.Facts.Declared, Stop: true}
	}
	next, step := DeploymentStep(w, in.Target)
	if step.Reason == "" && in.Uncertain != nil {
		step = *in.Uncertain
	}
	return WorkloadPlan{Write: WriteUpdate, Replicas: next, Step: step}
}

// Confirms reports whether again, a healing decision planned from a fresh read of the members,
// is the same action on the same objects as d.
func (d Decision) Confirms(again Decision) bool {
	return again.Action == d.Action && again.Pod.UID == d.Pod.UID && again.Claim.UID == d.Claim.UID
}
