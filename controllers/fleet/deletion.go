package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// deletion runs while the fleet is being deleted: routing closes at once, then the workload
// is deleted in the foreground (members drain on SIGTERM), then every claim of the fleet,
// removed members' included, then the static children (the NetworkPolicy and PDB outlive the
// last member, whatever cascade the user chose: they carry no owner reference the garbage
// collector could follow), then the finalizer. The reservation stays: a bucket is never
// released.
//
// Closing routing never delays the runtime's shutdown (seed 000): whatever keeps the route from
// closing (a discovery or render error, a route delete that fails, a foreign finalizer holding
// the route, a child the fleet may not touch) is logged and reported in the deletion message,
// the workload and claim steps run all the same, and the pass is repeated within seconds. The
// children step's error is not returned: the controller's backoff would grow with every member
// event of the shutdown and could then hold the last steps back for many minutes.
func (r *Reconciler) deletion(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if f.DeletionTimestamp == nil {
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(f, v1.FinalizerLifecycleProtection) {
		return true, nil
	}
	if stop, err := r.cancelSeed(ctx, s); stop || err != nil {
		return true, err
	}
	membersGone := s.sts == nil && s.deploy == nil && len(s.claims) == 0 && len(s.pods) == 0
	closing := ""
	if !membersGone {
		closing = r.closeRouting(ctx, s)
	}
	stop, err := r.shutDown(ctx, s, membersGone)
	if closing != "" {
		if s.find.Deletion != nil {
			s.find.Deletion.Message += "; routing has not closed yet, which does not delay the members' shutdown: " + closing
		}
		s.again(5 * time.Second)
	}
	return stop, err
}

// closeRouting applies the children of a deleting fleet while members still run: the chart
// renders no route for a deleting fleet, so applying the children removes it, while the
// isolation policy and the PDB stay applied. It says why routing has not closed yet, "" when
// nothing holds it; an error of the step is logged and said, never returned (deletion).
func (r *Reconciler) closeRouting(ctx context.Context, s *scope) string {
	before := len(s.find.Blockers)
	if _, err := r.children(ctx, s); err != nil {
		log.FromContext(ctx).Error(err, "closing routing failed; the fleet's deletion goes on", "fleet", s.key.String())
		return err.Error()
	}
	if len(s.find.Blockers) > before {
		// A child the fleet may not apply (a foreign object, admission refusing a write).
		return s.find.Blockers[before].Message
	}
	if c := s.routing; c != nil {
		switch c.Reason {
		case v1.ReasonRemovingRoute, v1.ReasonRoutingError, v1.ReasonServiceConflict:
			return c.Message
		}
	}
	return ""
}

// shutDown is deletion's ordered part: holds released, the workload, the claims, then (once no
// member is left) the children and the finalizer.
func (r *Reconciler) shutDown(ctx context.Context, s *scope, membersGone bool) (bool, error) {
	if err := r.releaseHolds(ctx, s); err != nil {
		return true, err
	}
	if stop, err := r.deleteWorkload(ctx, s); stop || err != nil {
		return true, err
	}
	if stop, err := r.deleteClaims(ctx, s); stop || err != nil {
		return true, err
	}
	if !membersGone {
		if s.find.Deletion == nil {
			s.deleting(v1.ReasonDeleting, fmt.Sprintf("Waiting for %d member Pods to terminate", len(s.pods)))
		}
		return true, nil // the next pass sees the members gone, and removes the children
	}
	remaining, err := r.Applier.Remaining(ctx, s.kube, s.fleet)
	if err != nil {
		s.deleting(v1.ReasonDeleting, fmt.Sprintf("Members and disks are gone; deleting the Services, policies and routes failed, retrying: %v", err))
		return true, err
	}
	if len(remaining) > 0 {
		s.deleting(v1.ReasonDeleting, fmt.Sprintf("Members and disks are gone; deleting %d Services, policies and routes: %s", len(remaining), strings.Join(remaining, ", ")))
		s.again(time.Second)
		return true, nil
	}
	if gone, err := r.goneForSure(ctx, s); err != nil || !gone {
		s.again(time.Second)
		return true, err
	}
	live := s.live
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(live, v1.FinalizerLifecycleProtection)
	s.deleting(v1.ReasonDeleting, "Workload and disks deleted; releasing the fleet")
	if err := r.Client.Patch(ctx, live, patch); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	logMutation(ctx, s, "remove finalizer", "CelldFleet/"+live.Name+" "+v1.FinalizerLifecycleProtection, "the workload and every claim are gone")
	return true, nil
}

// goneForSure asks the API server, not the cache, whether the workload, the Pods and the
// claims are gone: once the finalizer is released nothing deletes a claim left behind.
func (r *Reconciler) goneForSure(ctx context.Context, s *scope) (bool, error) {
	if r.Caches == nil {
		return true, nil // the pass already read from the API server
	}
	fresh := *s
	if err := r.readWorkload(ctx, &fresh, r.Direct); err != nil {
		return false, err
	}
	if err := r.readMembers(ctx, &fresh, r.Direct, false); err != nil {
		return false, err
	}
	return fresh.sts == nil && fresh.deploy == nil && len(fresh.claims) == 0 && len(fresh.pods) == 0, nil
}

func (r *Reconciler) deleteWorkload(ctx context.Context, s *scope) (bool, error) {
	var obj client.Object
	switch {
	case s.sts != nil:
		obj = s.sts
	case s.deploy != nil:
		obj = s.deploy
	default:
		return false, nil
	}
	if !s.fleet.Owns(obj) {
		s.deleting(v1.ReasonDeletionBlocked, foreignWorkload(s, obj)+"; it is left alone: delete it, or relabel it or remove the owner reference, to finish deleting the fleet")
		return true, nil
	}
	s.deleting(v1.ReasonDeleting, "Deleting workload; members drain on SIGTERM")
	if obj.GetDeletionTimestamp() != nil {
		return true, nil
	}
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := r.Direct.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground),
		client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err == nil {
		logMutation(ctx, s, "delete", kindOf(obj)+"/"+obj.GetName(), "the fleet is being deleted: the workload goes first, members drain")
	}
	return true, client.IgnoreNotFound(err)
}

// deleteClaims deletes every claim carrying the fleet's UID label (deleteFleetClaim).
func (r *Reconciler) deleteClaims(ctx context.Context, s *scope) (bool, error) {
	if len(s.claims) == 0 {
		return false, nil
	}
	s.deleting(v1.ReasonDeleting, fmt.Sprintf("Deleting disks: %d claims remain", len(s.claims)))
	for i := range s.claims {
		c := &s.claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		if err := r.deleteFleetClaim(ctx, s, c); err != nil {
			return true, err
		}
	}
	return true, nil
}

// deleteFleetClaim deletes one claim of the deleted fleet. What makes it the fleet's is its UID
// label, so the delete carries the UID and resourceVersion of the pass's read: a claim
// relabelled since (someone keeping that disk) survives. Other controllers write a claim's
// status and metadata at any moment (the PV binder its phase and annotations, the PVC
// protection controller its finalizer, the unused-since controller its Unused condition as the
// fleet's last Pod stops), and each write moves the resourceVersion; so a conflict is neither
// the end nor a success: deleteClaimVerified reads the claim again and, if it is still the same
// claim and still carries the fleet's label, deletes it again with the fresh resourceVersion.
func (r *Reconciler) deleteFleetClaim(ctx context.Context, s *scope, c *corev1.PersistentVolumeClaim) error {
	kept, err := r.deleteClaimVerified(ctx, s, "deleted fleet "+s.fleet.Name, c.Name, c.UID, c.ResourceVersion,
		func(live *corev1.PersistentVolumeClaim) string {
			if live.Labels[v1.LabelFleetUID] != string(s.fleet.UID) {
				return "it no longer carries the fleet's label"
			}
			return ""
		}, "the fleet is being deleted and its workload is gone")
	if kept != "" {
		log.FromContext(ctx).Info("claim is not the deleted fleet's any more and is kept", "fleet", s.key.String(), "claim", c.Name, "why", kept)
	}
	return err
}
