package fleet

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/workload"
)

// zoneLabel is the well-known topology label the Ordered layout pins members to.
const zoneLabel = "topology.kubernetes.io/zone"

// releaseZoneGates assigns each gated Ordered member the zone of its ordinal (zones[n mod
// len]) and lifts the gate, so the layout spreads deterministically.
func (r *Reconciler) releaseZoneGates(ctx context.Context, s *scope) error {
	f := s.fleet
	if f.Spec.BucketWorkload != v1.BucketWorkloadOrdered {
		return nil
	}
	for i := range s.pods {
		p := &s.pods[i]
		gated := slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v1.SchedulingGateBucketZone })
		n, ok := v1.MemberOrdinal(f.Name, p.Name)
		if !gated || !ok || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[zoneLabel] = workload.OrderedZone(f, n)
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v1.SchedulingGateBucketZone })
		if err := r.Direct.Update(ctx, p); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue
			}
			s.find.ZoneGate = &lifecycle.Verdict{Reason: v1.ReasonSchedulingBlocked, Message: fmt.Sprintf("Could not release the zone gate of member %s: %v; the operator retries", p.Name, err)}
			return nil
		}
	}
	return nil
}
