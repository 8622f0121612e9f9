package upgradeable

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// What a fleet is in the middle of.
const (
	Rollout     = "rollout"
	Replacement = "replacement"
	Deleting    = "deleting"
)

// Reasons of the Upgradeable condition.
const (
	ReasonSettled    = "FleetsSettled"
	ReasonMidHandoff = "FleetsMidHandoff"
)

// maxNamed bounds how many fleets the message names; the rest are counted.
const maxNamed = 20

// Blocker is a fleet that must settle before the operator may be replaced, and why.
type Blocker struct {
	Fleet types.NamespacedName
	// Why lists Rollout, Replacement and Deleting, in that order, as they apply.
	Why []string
}

// Verdict is the Upgradeable condition to set.
type Verdict struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Blockers returns the fleets that hold the operator's upgrade, sorted by namespace and name:
//   - Rollout: Progressing is True with reason LifecycleProgress (a template rollout, a scale
//     or a replacement being carried out member by member). Provisioning a new fleet does not
//     block: nothing is handed over yet, and the next operator starts it the same way.
//   - Replacement: a member Pod carries the replacement label with the fleet's UID (held by
//     a disk handoff between the Pod delete and the claim delete). held holds those UIDs.
//   - Deleting: the fleet has a deletion timestamp or Deleting is True (ordered teardown with
//     the bucket reservation kept).
func Blockers(fleets []v1.CelldFleet, held map[types.UID]bool) []Blocker {
	var out []Blocker
	for i := range fleets {
		f := &fleets[i]
		var why []string
		if c := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionProgressing); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonLifecycleProgress {
			why = append(why, Rollout)
		}
		if f.UID != "" && held[f.UID] {
			why = append(why, Replacement)
		}
		if f.DeletionTimestamp != nil || meta.IsStatusConditionTrue(f.Status.Conditions, v1.ConditionDeleting) {
			why = append(why, Deleting)
		}
		if len(why) > 0 {
			out = append(out, Blocker{Fleet: types.NamespacedName{Namespace: f.Namespace, Name: f.Name}, Why: why})
		}
	}
	slices.SortFunc(out, func(a, b Blocker) int { return strings.Compare(a.Fleet.String(), b.Fleet.String()) })
	return out
}

// Decide turns the blockers into the Upgradeable condition: True when there are none, False
// naming them otherwise.
func Decide(blockers []Blocker) Verdict {
	if len(blockers) == 0 {
		return Verdict{Status: metav1.ConditionTrue, Reason: ReasonSettled,
			Message: "No fleet is rolling out, replacing a member's disk or being deleted"}
	}
	var named []string
	for i, b := range blockers {
		if i == maxNamed {
			named = append(named, fmt.Sprintf("and %d more", len(blockers)-maxNamed))
			break
		}
		named = append(named, fmt.Sprintf("%s (%s)", b.Fleet, strings.Join(b.Why, ", ")))
	}
	return Verdict{Status: metav1.ConditionFalse, Reason: ReasonMidHandoff,
		Message: "The operator must not be replaced while fleets hand members or disks over; waiting for " + strings.Join(named, "; ")}
}

// Same reports whether the condition c already states v.
func (v Verdict) Same(c *metav1.Condition) bool {
	return c != nil && c.Status == v.Status && c.Reason == v.Reason && c.Message == v.Message
}
