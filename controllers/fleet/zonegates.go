package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// zoneLabel is the well-known topology label the Ordered layout pins members to.
const zoneLabel = "topology.kubernetes.io/zone"

// zoneGateAttempts bounds how often a zone gate's release is tried again after the Pod's
// resourceVersion moved while it was still the same gated Pod. Past it the pass reports that it
// could not release the gate, and the next pass tries again.
const zoneGateAttempts = 5

// releaseZoneGates carries out the workload plan's zone releases: each gated Ordered member is
// pinned to the zone of its ordinal and its gate lifted, so the layout spreads
// deterministically. A release that cannot be made is reported (SchedulingBlocked) and the
// next pass tries again.
func (r *Reconciler) releaseZoneGates(ctx context.Context, s *scope, releases []lifecycle.ZoneRelease) error {
	for _, z := range releases {
		i := slices.IndexFunc(s.pods, func(p corev1.Pod) bool { return p.Name == z.Pod.Name && p.UID == z.Pod.UID })
		if i < 0 {
			continue // planned from these Pods: not reached
		}
		if err := r.releaseZoneGate(ctx, s, &s.pods[i], z.Zone); err != nil {
			s.find.ZoneGate = &lifecycle.Verdict{Reason: v1.ReasonSchedulingBlocked, Message: fmt.Sprintf("Could not release the zone gate of member %s: %v; the operator retries", z.Pod.Name, err)}
			return nil
		}
	}
	return nil
}

// releaseZoneGate pins the gated Pod p to zone and lifts its gate, with an Update carrying the
// resourceVersion of the read, so nothing another writer set on the Pod (labels, annotations,
// finalizers, other gates) is overwritten. Others write a gated Pod at once: the scheduler
// records PodScheduled=False (SchedulingGated) in its status right after the StatefulSet
// controller creates it. A conflict is therefore never the end, nor taken for success: the Pod
// is read again from the API server and, if it still is the same Pod, not deleting and still
// gated, the gate is lifted on that read. A Pod that is gone, replaced or no longer gated is
// left to the next pass, which decides on what it finds.
func (r *Reconciler) releaseZoneGate(ctx context.Context, s *scope, p *corev1.Pod, zone string) error {
	uid := p.UID
	for attempt := 1; ; attempt++ {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[zoneLabel] = zone
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v1.SchedulingGateBucketZone })
		w := write{verb: "release zone gate", object: "Pod/" + p.Name, why: "an Ordered member runs in the zone of its ordinal: " + zone}
		err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
			err := r.Direct.Update(ctx, p)
			return err == nil, client.IgnoreNotFound(err)
		})
		switch {
		case err == nil:
			return nil // released, or the Pod is gone (its successor is decided by a later pass)
		case !apierrors.IsConflict(err):
			return err
		case attempt >= zoneGateAttempts:
			return fmt.Errorf("its resourceVersion kept moving through %d attempts: %w", attempt, err)
		}
		fresh := &corev1.Pod{}
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("re-read the Pod after its update met a conflict: %w", err)
		}
		if fresh.UID != uid || fresh.DeletionTimestamp != nil || !lifecycle.ZoneGated(fresh) {
			// Another Pod at the name, a Pod going away, or a gate someone else lifted: this
			// decision no longer applies, and the next pass decides on what it finds.
			s.again(time.Second)
			return nil
		}
		log.FromContext(ctx).Info("gated Pod changed since it was read (still the same gated Pod); releasing its zone gate on the fresh read",
			"fleet", s.key.String(), "pod", p.Name, "resourceVersion", fresh.ResourceVersion)
		*p = *fresh
	}
}
