package lifecycle

import (
	"fmt"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Verdict is one lifecycle reason and its message.
type Verdict struct{ Reason, Message string }

// Findings are what one reconcile found. The reconciler's phases do the I/O and record here;
// none of them decides the fleet's status. Decide does, from the findings alone.
type Findings struct {
	// Deletion is the deletion phase's progress once the fleet is being deleted (Deleting,
	// DeletionBlocked).
	Deletion *Verdict
	// Blockers hold provisioning back, in the order the pass found them (access, validation,
	// prerequisites, the reservation, the children, the workload's ownership, a foreign claim).
	// The first is reported. A blocker stops provisioning, never the healing of members that
	// already run on their own disks.
	Blockers []Verdict
	// Paused is spec.maintenance.paused.
	Paused bool
	// Created: this pass created the workload.
	Created bool
	// Heal is the self-healing chain's decision: an action, a wait, or nothing to report.
	Heal Decision
	// Step explains a replica change in progress or why one waits; empty at the target.
	Step Verdict
	// Workload is the live workload of either layout, and Applied the replica count this pass
	// left on it.
	Workload Workload
	Applied  int32
	// MeshMixed: members' sidecars do not match the requested mesh membership.
	MeshMixed bool
	// ZoneGate is why an Ordered member's zone gate could not be lifted, if it could not.
	ZoneGate *Verdict
	// Failure is an API error that ended the pass early; the findings after it are missing.
	Failure *Verdict
	// Seed is a seeded preview fleet's wait for its executor (SeedInitializing): nothing of
	// the fleet is created until the seed succeeded.
	Seed *Verdict
	// RoutingWaits: RoutingReady waits for something no watch reports (an API not served, a
	// foreign object at the route's name, a read error, a route still disappearing).
	RoutingWaits bool
	// Fleet names the fleet in messages.
	Fleet string
}

// Block records a blocker.
func (f *Findings) Block(reason, message string) {
	f.Blockers = append(f.Blockers, Verdict{Reason: reason, Message: message})
}

// Blocked reports whether anything holds provisioning back.
func (f *Findings) Blocked() bool { return len(f.Blockers) > 0 }

// Decide is the one verdict of a reconcile. Precedence, highest first:
//
//  1. deletion: once deletion started, its progress is all that matters;
//  2. the first blocker: the user must act, and a healing action taken meanwhile is reported
//     by its event;
//  3. an API error that ended the pass: what follows it was not examined;
//  4. a seeded preview fleet waiting for its seed: nothing of it exists yet, so nothing else
//     can be said;
//  5. maintenance: a paused fleet changes nothing, and says so;
//  6. a healing action: a member is being replaced or force-deleted;
//  7. a healing wait or a blocked member (MemberUnschedulable, MemberCrashLooping): it explains
//     the fleet better than the rollout it holds up;
//  8. a zone gate that could not be lifted;
//  9. the workload was just created;
//  10. a replica change in progress, or why it waits;
//  11. the rollout: the workload controller has not observed, updated or readied every member;
//  12. a sidecar mismatch with the requested mesh membership;
//  13. Provisioned.
func Decide(f Findings) Verdict {
	switch {
	case f.Deletion != nil:
		return *f.Deletion
	case len(f.Blockers) > 0:
		return f.Blockers[0]
	case f.Failure != nil:
		return *f.Failure
	case f.Seed != nil:
		return *f.Seed
	case f.Paused:
		return Verdict{v1.ReasonMaintenancePaused, PausedMessage}
	case f.Heal.Action != None && f.Heal.Reason != "":
		return Verdict{f.Heal.Reason, f.Heal.Message}
	case f.Heal.Reason != "" && f.Heal.Reason != v1.ReasonMaintenancePaused:
		return Verdict{f.Heal.Reason, f.Heal.Message}
	case f.ZoneGate != nil:
		return *f.ZoneGate
	case f.Created:
		return Verdict{v1.ReasonProvisioning, "Workload created; waiting for runtime readiness and placement"}
	case f.Step.Reason != "":
		return f.Step
	}
	if v := Rollout(f.Workload, f.Applied, f.Fleet); v.Reason != v1.ReasonProvisioned {
		return v
	}
	if f.MeshMixed {
		return Verdict{v1.ReasonProvisioning, "Waiting for member sidecars to match the requested mesh membership; verify Istio injection"}
	}
	return Verdict{v1.ReasonProvisioned, "Workload rolled out and all replicas ready"}
}

// Periods are the re-examination periods of a fleet without events.
type Periods struct {
	// Resync is the period of a settled fleet (watches.yaml reconcilePeriod).
	Resync time.Duration
	// Waiting is the period of a fleet that waits for something no watch reports.
	Waiting time.Duration
}

// Requeue is when to examine the fleet again without an event, given the pass's verdict v. A
// settled fleet (Provisioned or paused, routing waiting on nothing unwatched) waits for the
// resync; any other waits at most Waiting, since some of what it waits for is not watched (an
// API installed later, a Role applied, a foreign object at its name removed); a healing timer
// that expires sooner wins.
func (f Findings) Requeue(v Verdict, p Periods) time.Duration {
	after := p.Resync
	settled := (v.Reason == v1.ReasonProvisioned || v.Reason == v1.ReasonMaintenancePaused) && !f.RoutingWaits
	if !settled && p.Waiting > 0 {
		after = min(after, p.Waiting)
	}
	if f.Heal.RequeueAfter > 0 {
		after = min(after, f.Heal.RequeueAfter)
	}
	return after
}

// Rollout is the verdict of a workload that needs no other wait: rolled out and ready, or
// what it is waiting for. applied is the replica count this pass left on it.
func Rollout(w Workload, applied int32, fleet string) Verdict {
	switch {
	case !w.Exists:
		return Verdict{v1.ReasonProvisioning, "Waiting for the workload"}
	case !w.Observed():
		return Verdict{v1.ReasonProvisioning, "Waiting for the workload controller to observe the new spec"}
	case w.Replicas != applied:
		return Verdict{v1.ReasonProvisioning, fmt.Sprintf("Changing %s from %d to %d members", fleet, w.Replicas, applied)}
	case !w.RevisionCurrent || w.UpdatedReplicas != w.Replicas:
		return Verdict{v1.ReasonProvisioning, fmt.Sprintf("Rolling out one member at a time: %d of %d members updated", w.UpdatedReplicas, w.Replicas)}
	case w.ReadyReplicas != w.Replicas:
		return Verdict{v1.ReasonProvisioning, fmt.Sprintf("Waiting for ready replicas: %d of %d ready", w.ReadyReplicas, w.Replicas)}
	}
	return Verdict{v1.ReasonProvisioned, "Workload rolled out and all replicas ready"}
}

// DeploymentStep is the replica step of a Deployment (the Bucket profile's Relaxed layout):
// the target at once when growing, one member per step when shrinking, and only once the
// previous change rolled out.
func DeploymentStep(w Workload, target int32) (next int32, v Verdict) {
	applied := w.Replicas
	switch {
	case target >= applied:
		return target, Verdict{}
	case !w.RolledOut():
		return applied, Verdict{v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"}
	}
	return applied - 1, Verdict{}
}
