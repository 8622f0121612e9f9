package fleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/celld/celld-operator/controllers/lifecycle"
)

// healing finishes or aborts any replacement handoff an earlier pass left, then takes at most
// one self-healing action, then releases Ordered members' zone gates.
func (r *Reconciler) healing(ctx context.Context, s *scope) (bool, error) {
	if !s.fleet.RunsAsStatefulSet() || s.heal == nil {
		return false, nil
	}
	if handled, err := r.resumeReplacements(ctx, s); handled || err != nil {
		s.again(time.Second)
		s.reportAbandoned()
		return true, err
	}
	d := *s.heal
	if d.Action != lifecycle.None {
		fresh, same, err := r.confirm(ctx, s, d)
		if err != nil || !same {
			s.again(time.Second)
			return true, err
		}
		d = fresh // its preconditions carry the API server's resourceVersions
	}
	if err := r.act(ctx, s, d); err != nil {
		return true, err
	}
	s.find.Heal = d
	s.reportAbandoned()
	if d.Action != lifecycle.None {
		return true, nil
	}
	return false, r.releaseZoneGates(ctx, s, s.zoneGates)
}

// reportAbandoned makes an abandoned replacement the pass's healing finding, and asks for the
// next pass soon: it decides again from what it then finds.
func (s *scope) reportAbandoned() {
	if s.abandoned != nil {
		s.find.Heal = *s.abandoned
		s.again(time.Second)
	}
}

// confirm re-reads the fleet's Pods and claims from the API server and plans the workload step
// again from the pass's input with those members: an action that deletes a Pod or a claim,
// decided on a cache that may lag, is taken only when the API server's state leads to the same
// action on the same objects.
func (r *Reconciler) confirm(ctx context.Context, s *scope, d lifecycle.Decision) (lifecycle.Decision, bool, error) {
	if r.Caches == nil {
		return d, true, nil // already read from the API server
	}
	fresh := *s
	if err := r.readMembers(ctx, &fresh, r.Direct, false); err != nil {
		return d, false, err
	}
	in := *s.planned
	in.Facts = r.facts(&fresh, in.Facts.Workload.TemplateMatches)
	var again lifecycle.Decision
	if h := lifecycle.PlanWorkload(in).Heal; h != nil {
		again = *h
	}
	if !d.Confirms(again) {
		log.FromContext(ctx).Info("heal decision changed on a fresh read; deciding again", "fleet", s.key.String(), "cached", d.Message, "fresh", again.Message)
		return d, false, nil
	}
	return again, true, nil
}

// act carries out one decision; every delete is bound to the object's UID, and where it
// matters to its resourceVersion. A Pod already gone is no write.
func (r *Reconciler) act(ctx context.Context, s *scope, d lifecycle.Decision) error {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = s.fleet.Namespace, d.Pod.Name
	w := write{object: "Pod/" + d.Pod.Name, why: d.Message, takesDown: d.Pod.Name}
	if d.Event != "" {
		w.event = &fleetEvent{kind: corev1.EventTypeWarning, reason: d.Event, message: d.EventMessage}
	}
	var opts []client.DeleteOption
	switch d.Action {
	case lifecycle.None:
		return nil
	case lifecycle.ForceDeletePod:
		uid := d.Pod.UID
		w.verb, opts = "force delete", []client.DeleteOption{client.GracePeriodSeconds(0), client.Preconditions{UID: &uid}}
	case lifecycle.DeletePod:
		uid, rv := d.Pod.UID, d.Pod.ResourceVersion
		w.verb, opts = "delete", []client.DeleteOption{client.Preconditions{UID: &uid, ResourceVersion: &rv}}
	case lifecycle.ReplaceMember:
		// the Pod (or lone claim) delete commits the replacement; replace tells its event and
		// counts it then
		_, err := r.replace(ctx, s, d)
		return err
	default:
		return fmt.Errorf("unknown healing action %v", d.Action)
	}
	deleted := false
	err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
		err := r.Direct.Delete(ctx, pod, opts...)
		deleted = err == nil
		return deleted, client.IgnoreNotFound(err)
	})
	if deleted {
		r.metrics.healed(s.fleet, d)
	}
	return err
}
