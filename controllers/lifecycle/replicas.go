package lifecycle

import (
	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Step is one reconcile's lifecycle plan for a StatefulSet fleet.
type Step struct {
	// Replicas is the count to apply to the StatefulSet.
	Replicas int32
	// Reason and Message explain a replica change or why it waits; empty when the applied
	// count is already the target.
	Reason  string
	Message string
	// Heal is the self-healing decision, made knowing whether this reconcile changes the
	// replica count.
	Heal Decision
}

// Plan decides one reconcile: the full-stop rule, then growth or contraction toward target,
// then the self-healing chain with Applied set to the count this reconcile applies. target is
// spec.replicas or the capacity policy's target; a caller that lacks the evidence a
// contraction needs (CapacityUncertain) passes the applied count instead.
func Plan(f Facts, target int32) Step {
	cur := f.Workload.Replicas
	if f.Paused {
		f.Applied = cur
		return Step{Replicas: cur, Reason: v1.ReasonMaintenancePaused, Message: PausedMessage, Heal: Heal(f)}
	}
	if t, ok := FullStop(f); ok {
		target = t
	}
	s := Step{Replicas: cur}
	switch {
	case target > cur || !f.Workload.Exists:
		s.Replicas, s.Reason, s.Message = Growth(f, target)
	case target < cur:
		s.Replicas, s.Reason, s.Message = Contraction(f, target)
	}
	f.Applied = s.Replicas
	s.Heal = Heal(f)
	return s
}

// FullStop handles a StatefulSet scaled to zero by hand while the fleet was paused (the
// full-stop upgrade of a runtime pair that cannot run together). Its target is the declared
// spec.replicas whatever the capacity policy says, so every member returns on its own disk at
// the declared count.
//
// The return is not a single write of the declared count: Growth still applies it one run at
// a time. From zero the first run is every ordinal with a kept claim, so every member that had
// a disk returns on it in one step, which is what a full stop needs. Only ordinals beyond the
// kept claims (a declared count raised during the stop) wait for the scheduler to place the
// returning members, as any fresh disk must (#79); adding them in the same write could let a
// fresh disk take the zone a returning member's disk is pinned to.
func FullStop(f Facts) (target int32, stopped bool) {
	if f.Workload.Exists && f.Workload.Replicas < 1 {
		return f.Declared, true
	}
	return 0, false
}

// Growth returns the replica count to apply on the way up to target: one run of ordinals at a
// time, so kept disks are placed before fresh ones. A run is consecutive ordinals that all have
// a kept claim, or that all get a fresh one; the run starting at the current count goes first,
// which is the kept run whenever the fleet grows back to removed members. Each run waits until
// the StatefulSet has observed its spec and the scheduler has decided every current member's
// Pod (placed it, or found no node for it): the zone spread counts only Pods on nodes, so a
// new member scheduled beside a pending one could take the zone the pending one's disk needs.
//
// A claim at a new member's name without this fleet's UID label refuses the whole growth with
// StorageIdentityConflict: no member is added. With no StatefulSet, Growth returns the count
// to create it with, which is the first run.
func Growth(f Facts, target int32) (next int32, reason, message string) {
	cur := f.Workload.Replicas
	if !f.Workload.Exists {
		cur = 0
	}
	target = min(target, v1.MaxMembers)
	if target <= cur {
		return cur, "", ""
	}
	if reason, message := foreignClaim(&f, cur, target); reason != "" {
		return cur, reason, message
	}
	kept := f.kept(cur)
	end := cur + 1
	for end < target && f.kept(end) == kept {
		end++
	}
	run := f.run(cur, end-1)
	disks := f.disks(cur, end-1, kept)
	if f.Workload.Exists {
		if !f.Workload.Observed() {
			return cur, v1.ReasonProvisioning, "Waiting for the StatefulSet to observe its spec before adding " + run
		}
		for i := range cur {
			if !f.decided(i) {
				return cur, v1.ReasonProvisioning, "Waiting for the scheduler to place member " + f.name(i) +
					", or find no node for it, before adding " + run + " " + disks
			}
		}
	}
	return end, v1.ReasonProvisioning, "Adding " + run + " " + disks
}

// Contraction returns the replica count to apply on the way down to target: one member per
// step, the highest ordinal, and only once the previous change has rolled out. Template
// changes still apply while the removal waits. The removed member's claim is kept: the
// StatefulSet's retention policy is Retain and the planner never deletes a claim on scale-in,
// so growing back reattaches it.
func Contraction(f Facts, target int32) (next int32, reason, message string) {
	cur := f.Workload.Replicas
	target = max(target, 1)
	if !f.Workload.Exists || target >= cur {
		return cur, "", ""
	}
	if !f.Workload.RolledOut() {
		return cur, v1.ReasonProvisioning, "Waiting for the previous change to roll out before removing a member"
	}
	return cur - 1, v1.ReasonProvisioning, "Removing member " + f.name(cur-1) + "; its disk is kept"
}

// ForeignClaim checks the member claims of ordinals below upTo, before a StatefulSet is
// created or recreated on them. A claim at a member's name without this fleet's UID label
// gives StorageIdentityConflict: the operator never adopts a disk it cannot prove is the
// fleet's. It returns empty strings when every claim there is the fleet's or absent.
func ForeignClaim(f Facts, upTo int32) (reason, message string) {
	return foreignClaim(&f, 0, min(upTo, v1.MaxMembers))
}

func foreignClaim(f *Facts, from, to int32) (reason, message string) {
	for i := from; i < to; i++ {
		if c := &f.at(i).Claim; c.Exists && !c.Owned {
			return v1.ReasonStorageIdentityConflict,
				"PVC " + f.claimName(i) + " exists and does not belong to this fleet; refusing to adopt it"
		}
	}
	return "", ""
}

// kept: ordinal i has a claim of this fleet to return to. A claim being deleted is not kept:
// the member will get a fresh one.
func (f *Facts) kept(i int32) bool {
	c := &f.at(i).Claim
	return c.Exists && c.Owned && !c.Terminating
}

// run names the members from a to b: "member f-3" or "members f-3 to f-4".
func (f *Facts) run(a, b int32) string {
	if a == b {
		return "member " + f.name(a)
	}
	return "members " + f.name(a) + " to " + f.name(b)
}

// disks says what the members of a run come back on.
func (f *Facts) disks(a, b int32, kept bool) string {
	switch {
	case kept && a == b:
		return "on its kept disk"
	case kept:
		return "on their kept disks"
	case a == b:
		return "on a fresh disk"
	}
	return "on fresh disks"
}
