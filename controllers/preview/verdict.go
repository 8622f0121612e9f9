package preview

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// verdict is what a pass tells the user: the phase, and the Ready condition's reason and
// message.
type verdict struct {
	phase   v1.PreviewPhase
	reason  string
	message string
}

func (v verdict) ready() bool { return v.phase == v1.PreviewReady }

// childVerdict reads a generated fleet's own status: Ready once the fleet reports Ready for
// its current generation and, when the preview is routed, its route is ready too; Blocked
// (FleetBlocked, quoting the fleet) when the fleet is blocked; Initializing while the fleet
// waits for its seed; Pending otherwise.
func childVerdict(child *v1.CelldFleet, routed bool) verdict {
	name := child.Namespace + "/" + child.Name
	if child.Status.ObservedGeneration != child.Generation {
		return verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Waiting for the operator to observe generation %d of CelldFleet %s", child.Generation, name)}
	}
	if b := meta.FindStatusCondition(child.Status.Conditions, v1.ConditionBlocked); b != nil && b.Status == metav1.ConditionTrue {
		return verdict{v1.PreviewBlocked, v1.ReasonFleetBlocked, fmt.Sprintf("The preview's CelldFleet %s is blocked (%s): %s", name, b.Reason, b.Message)}
	}
	ready := meta.FindStatusCondition(child.Status.Conditions, v1.ConditionReady)
	if ready != nil && ready.Reason == v1.ReasonSeedInitializing {
		return verdict{v1.PreviewInitializing, v1.ReasonSeedInitializing, fmt.Sprintf("CelldFleet %s waits for its seed: %s", name, ready.Message)}
	}
	if ready == nil || ready.Status != metav1.ConditionTrue {
		why := "it reports no Ready condition yet"
		if ready != nil {
			why = ready.Reason + ": " + ready.Message
		}
		return verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Waiting for CelldFleet %s to be Ready (%s)", name, why)}
	}
	if routed {
		rr := meta.FindStatusCondition(child.Status.Conditions, v1.ConditionRoutingReady)
		if rr == nil || rr.Status != metav1.ConditionTrue {
			why := "no RoutingReady condition yet"
			if rr != nil {
				why = rr.Reason + ": " + rr.Message
			}
			return verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("CelldFleet %s is Ready; waiting for its route (%s)", name, why)}
		}
	}
	return verdict{v1.PreviewReady, v1.ReasonPreviewReady, fmt.Sprintf("CelldFleet %s is Ready; deploy with the storage URL and check the application at the URL (Ready proves neither DNS, TLS nor the application)", name)}
}
