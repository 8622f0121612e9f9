package lifecycle

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestPlanDeletion: every stage of a fleet's deletion, its steps in order and its verdict.
// Routing closes while anything of the fleet runs; the workload goes before the claims, the
// claims before the children, the finalizer last and only after the API server confirms.
func TestPlanDeletion(t *testing.T) {
	const foreign = "StatefulSet ns/f exists and is not this fleet's"
	head := []DeletionStep{CancelSeed, CloseRouting, ReleaseHolds}
	for _, c := range []struct {
		name    string
		in      DeletionInput
		steps   []DeletionStep
		reason  string
		message string
		done    bool
	}{
		{name: "released: nothing to do", in: DeletionInput{Workload: true, Pods: 3}, done: true},
		{name: "an owned workload is deleted first, claims and Pods wait",
			in:    DeletionInput{Finalizer: true, Workload: true, Pods: 3, Claims: 3},
			steps: append(slices.Clone(head), DeleteWorkload), reason: v1.ReasonDeleting, message: "Deleting workload; members drain on SIGTERM"},
		{name: "a workload whose deletion was accepted is not deleted again",
			in:    DeletionInput{Finalizer: true, Workload: true, WorkloadDeleting: true, Pods: 2, Claims: 3},
			steps: head, reason: v1.ReasonDeleting, message: "Deleting workload"},
		{name: "a foreign workload is left alone and blocks the deletion",
			in:    DeletionInput{Finalizer: true, Workload: true, Foreign: foreign, Claims: 3},
			steps: head, reason: v1.ReasonDeletionBlocked, message: foreign + "; it is left alone"},
		{name: "a foreign workload blocks even with no claim or Pod left",
			in:    DeletionInput{Finalizer: true, Workload: true, Foreign: foreign},
			steps: head, reason: v1.ReasonDeletionBlocked, message: "to finish deleting the fleet"},
		{name: "the workload gone: every claim goes, terminating Pods or not",
			in:    DeletionInput{Finalizer: true, Pods: 1, Claims: 3},
			steps: append(slices.Clone(head), DeleteClaims), reason: v1.ReasonDeleting, message: "Deleting disks: 3 claims remain"},
		{name: "claims of removed members go too, with no Pod left",
			in:    DeletionInput{Finalizer: true, Claims: 1},
			steps: append(slices.Clone(head), DeleteClaims), reason: v1.ReasonDeleting, message: "1 claims remain"},
		{name: "Pods still terminating: the children and the finalizer wait",
			in:    DeletionInput{Finalizer: true, Pods: 2},
			steps: head, reason: v1.ReasonDeleting, message: "Waiting for 2 member Pods to terminate"},
		{name: "every member and disk gone: children, confirmation, finalizer; routing is not applied again",
			in:    DeletionInput{Finalizer: true},
			steps: []DeletionStep{CancelSeed, ReleaseHolds, RemoveChildren, ConfirmGone, RemoveFinalizer}, reason: v1.ReasonDeleting, message: "releasing the fleet"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PlanDeletion(c.in)
			if p.Done != c.done {
				t.Fatalf("Done = %v, want %v", p.Done, c.done)
			}
			if c.done {
				if len(p.Steps) != 0 || p.Verdict != nil {
					t.Fatalf("a released fleet plans nothing: %+v", p)
				}
				return
			}
			if fmt.Sprint(p.Steps) != fmt.Sprint(c.steps) {
				t.Errorf("steps = %v, want %v", p.Steps, c.steps)
			}
			if p.Verdict == nil || p.Verdict.Reason != c.reason || !strings.Contains(p.Verdict.Message, c.message) {
				t.Errorf("verdict = %+v, want %s containing %q", p.Verdict, c.reason, c.message)
			}
		})
	}
}

// TestPlanDeletionOrder: whatever is observed, the steps keep the deletion's order, the seed's
// cancellation comes first, and the finalizer goes only last, after the confirmation, when no
// workload, claim or Pod was observed.
func TestPlanDeletionOrder(t *testing.T) {
	for _, wl := range []bool{false, true} {
		for _, deleting := range []bool{false, true} {
			for _, foreign := range []string{"", "foreign"} {
				for _, pods := range []int{0, 2} {
					for _, claims := range []int{0, 3} {
						in := DeletionInput{Finalizer: true, Workload: wl, WorkloadDeleting: deleting, Foreign: foreign, Pods: pods, Claims: claims}
						p := PlanDeletion(in)
						if p.Steps[0] != CancelSeed || !slices.IsSorted(p.Steps) {
							t.Errorf("%+v: steps %v out of order", in, p.Steps)
						}
						finalizer := slices.Contains(p.Steps, RemoveFinalizer)
						if finalizer != (!wl && pods == 0 && claims == 0) {
							t.Errorf("%+v: finalizer removal planned = %v", in, finalizer)
						}
						if finalizer && p.Steps[len(p.Steps)-2] != ConfirmGone {
							t.Errorf("%+v: the finalizer goes without the API server's confirmation: %v", in, p.Steps)
						}
						if slices.Contains(p.Steps, DeleteWorkload) && (foreign != "" || deleting || !wl) {
							t.Errorf("%+v: a workload deleted that is foreign, already deleting or absent", in)
						}
					}
				}
			}
		}
	}
}
