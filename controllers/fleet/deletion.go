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
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// deletion runs while the fleet is being deleted. lifecycle.PlanDeletion decides the pass's
// steps from what observe saw, and this is their executor: routing closes at once, then the workload
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
	if s.fleet.DeletionTimestamp == nil {
		return false, nil
	}
	plan := lifecycle.PlanDeletion(deletionInput(s))
	if plan.Done {
		return true, nil
	}
	s.find.Deletion = plan.Verdict
	closing := ""
	for _, step := range plan.Steps {
		stop, err := r.deletionStep(ctx, s, step, &closing)
		if err != nil {
			return true, fmt.Errorf("%s: %w", step, err)
		}
		if stop {
			break
		}
	}
	if closing != "" {
		if s.find.Deletion != nil {
			s.find.Deletion.Message += "; routing has not closed yet, which does not delay the members' shutdown: " + closing
		}
		s.again(5 * time.Second)
	}
	return true, nil
}

// deletionInput is what the deletion is planned from: the pass's observation.
func deletionInput(s *scope) lifecycle.DeletionInput {
	in := lifecycle.DeletionInput{
		Finalizer: controllerutil.ContainsFinalizer(s.fleet, v1.FinalizerLifecycleProtection),
		Pods:      len(s.pods), Claims: len(s.claims),
	}
	if obj := s.workloadObject(); obj != nil {
		in.Workload, in.WorkloadDeleting = true, obj.GetDeletionTimestamp() != nil
		if !s.fleet.Owns(obj) {
			in.Foreign = foreignWorkload(s, obj)
		}
	}
	return in
}

// workloadObject is the StatefulSet or Deployment at the fleet's name as observed, of either
// layout (a deletion removes a workload of the other layout too, unlike workload()), nil when
// there is none.
func (s *scope) workloadObject() client.Object {
	switch {
	case s.sts != nil:
		return s.sts
	case s.deploy != nil:
		return s.deploy
	}
	return nil
}

// deletionStep runs one step of the deletion plan; stop ends the pass after it. Closing routing
// records in closing what keeps a route open, and never stops or fails the pass.
func (r *Reconciler) deletionStep(ctx context.Context, s *scope, step lifecycle.DeletionStep, closing *string) (stop bool, err error) {
	switch step {
	case lifecycle.CancelSeed:
		return r.cancelSeed(ctx, s)
	case lifecycle.CloseRouting:
		*closing = r.closeRouting(ctx, s)
	case lifecycle.ReleaseHolds:
		return false, r.releaseHolds(ctx, s)
	case lifecycle.DeleteWorkload:
		return false, r.deleteWorkload(ctx, s)
	case lifecycle.DeleteClaims:
		return false, r.deleteClaims(ctx, s)
	case lifecycle.RemoveChildren:
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
	case lifecycle.ConfirmGone:
		gone, err := r.goneForSure(ctx, s)
		if err != nil || !gone {
			s.deleting(v1.ReasonDeleting, "Members, disks and children are gone from the operator's cache; waiting for the API server to confirm before the fleet is released")
			s.again(time.Second)
			return true, err
		}
	case lifecycle.RemoveFinalizer:
		live := s.live
		w := write{verb: "remove finalizer", object: "CelldFleet/" + live.Name + " " + v1.FinalizerLifecycleProtection, why: "the workload and every claim are gone"}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error {
			patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(live, v1.FinalizerLifecycleProtection)
			return r.Client.Patch(ctx, live, patch)
		})); err != nil {
			return true, client.IgnoreNotFound(err)
		}
	}
	return false, nil
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

// deleteWorkload deletes the fleet's own workload in the foreground (members drain on SIGTERM),
// with the UID and resourceVersion the plan was made on: a workload relabelled since is
// decided again by the next pass.
func (r *Reconciler) deleteWorkload(ctx context.Context, s *scope) error {
	obj := s.workloadObject()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	w := write{verb: "delete", object: kindOf(obj) + "/" + obj.GetName(), why: "the fleet is being deleted: the workload goes first, members drain"}
	return client.IgnoreNotFound(r.do(ctx, s, w, sent(func(ctx context.Context) error {
		return r.Direct.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &uid, ResourceVersion: &rv})
	})))
}

// deleteClaims deletes every claim carrying the fleet's UID label that is not already
// deleting (deleteFleetClaim).
func (r *Reconciler) deleteClaims(ctx context.Context, s *scope) error {
	for i := range s.claims {
		c := &s.claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		if err := r.deleteFleetClaim(ctx, s, c); err != nil {
			return err
		}
	}
	return nil
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
