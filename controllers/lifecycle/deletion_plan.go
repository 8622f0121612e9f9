package lifecycle

import (
	"fmt"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// DeletionInput is what a deleting fleet's pass is decided from, as observed at its start.
type DeletionInput struct {
	// Finalizer: the fleet still carries the lifecycle finalizer; without it there is nothing
	// left for the operator to do.
	Finalizer bool
	// Workload: a StatefulSet or Deployment exists at the fleet's name. Foreign names it when
	// the fleet does not own it (it is left alone); Deleting: its deletion was accepted.
	Workload, WorkloadDeleting bool
	Foreign                    string
	// Pods and Claims count the fleet's member Pods and claims (its UID label) still there,
	// terminating ones included.
	Pods, Claims int
}

// DeletionStep is one step of a fleet's deletion. They run in the order the plan lists them.
type DeletionStep int

const (
	// CancelSeed cancels a seed still copying into the fleet's prefix; it may end the pass.
	CancelSeed DeletionStep = iota
	// CloseRouting applies the children of the deleting fleet, which render no route, while
	// members still run; what keeps a route open is reported, never waited for.
	CloseRouting
	// ReleaseHolds removes replacement holds from the fleet's Pods: no disk is given up.
	ReleaseHolds
	// DeleteWorkload deletes the owned workload in the foreground, with its UID and
	// resourceVersion as preconditions.
	DeleteWorkload
	// DeleteClaims deletes every claim carrying the fleet's UID label that is not deleting.
	DeleteClaims
	// RemoveChildren deletes the fleet's Services, policies and routes once no member is left,
	// and ends the pass while any remains.
	RemoveChildren
	// ConfirmGone asks the API server that the workload, Pods and claims are gone, and ends the
	// pass if not: once the finalizer goes, nothing deletes a claim left behind.
	ConfirmGone
	// RemoveFinalizer releases the fleet.
	RemoveFinalizer
)

func (s DeletionStep) String() string {
	return [...]string{"cancel seed", "close routing", "release holds", "delete workload",
		"delete claims", "remove children", "confirm gone", "remove finalizer"}[s]
}

// DeletionPlan is a deleting fleet's pass: the steps in order and the deletion's progress to
// report. A step the executor runs may end the pass early (CancelSeed, RemoveChildren,
// ConfirmGone) and then says why; otherwise Verdict stands.
type DeletionPlan struct {
	Steps   []DeletionStep
	Verdict *Verdict
	// Done: the fleet is released (no finalizer) and the pass has nothing to do.
	Done bool
}

// PlanDeletion decides a deleting fleet's pass. Routing closes first and never delays the
// members' shutdown; the workload goes before the claims, the claims before the children, and
// the finalizer last. The reservation is never released.
func PlanDeletion(in DeletionInput) DeletionPlan {
	if !in.Finalizer {
		return DeletionPlan{Done: true}
	}
	p := DeletionPlan{Steps: []DeletionStep{CancelSeed}}
	membersGone := !in.Workload && in.Claims == 0 && in.Pods == 0
	if !membersGone {
		p.Steps = append(p.Steps, CloseRouting)
	}
	p.Steps = append(p.Steps, ReleaseHolds)
	deleting := func(format string, a ...any) *Verdict {
		return &Verdict{Reason: v1.ReasonDeleting, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case in.Workload && in.Foreign != "":
		p.Verdict = &Verdict{Reason: v1.ReasonDeletionBlocked, Message: in.Foreign + "; it is left alone: delete it, or relabel it or remove the owner reference, to finish deleting the fleet"}
	case in.Workload:
		if !in.WorkloadDeleting {
			p.Steps = append(p.Steps, DeleteWorkload)
		}
		p.Verdict = deleting("Deleting workload; members drain on SIGTERM")
	case in.Claims > 0:
		p.Steps = append(p.Steps, DeleteClaims)
		p.Verdict = deleting("Deleting disks: %d claims remain", in.Claims)
	case in.Pods > 0:
		p.Verdict = deleting("Waiting for %d member Pods to terminate", in.Pods)
	default:
		p.Steps = append(p.Steps, RemoveChildren, ConfirmGone, RemoveFinalizer)
		p.Verdict = deleting("Workload and disks deleted; releasing the fleet")
	}
	return p
}
