package fleet

import (
	"context"
	"fmt"
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
	if !membersGone {
		// Routing closes as soon as deletion starts: the chart renders no route for a
		// deleting fleet, so applying the children removes it, while the isolation policy and
		// the PDB stay applied. A child the fleet cannot apply (a foreign object, say) never
		// holds deletion back: the workload and claim steps below report.
		if _, err := r.children(ctx, s); err != nil {
			return true, err
		}
	}
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
		return true, nil // the next pass sees the members gone, and removes the children
	}
	remaining, err := r.Applier.RemoveAll(ctx, s.kube, s.fleet)
	if err != nil {
		return true, err
	}
	if remaining > 0 {
		s.deleting(v1.ReasonDeleting, fmt.Sprintf("Members and disks are gone; deleting %d Services, policies and routes", remaining))
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
	if err := r.readMembers(ctx, &fresh, r.Direct); err != nil {
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
		s.deleting(v1.ReasonDeletionBlocked, fmt.Sprintf("%s %s/%s is not owned by this fleet (no %s=%s label, or controlled by another owner); it is left alone: delete or relabel it to finish deleting the fleet",
			kindOf(obj), obj.GetNamespace(), obj.GetName(), v1.LabelFleetUID, s.fleet.UID))
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
