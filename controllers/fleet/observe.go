package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// observe reads the workload, the fleet's Pods and its claims once for the whole pass.
func (r *Reconciler) observe(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	s.reservationName = reservation.Name(f.Spec.Storage.Bucket, f.Spec.Storage.Prefix)
	sts, d := &appsv1.StatefulSet{}, &appsv1.Deployment{}
	for _, w := range []struct {
		obj  client.Object
		into func()
	}{{sts, func() { s.sts = sts }}, {d, func() { s.deploy = d }}} {
		if err := r.Direct.Get(ctx, s.key, w.obj); err == nil {
			w.into()
		} else if !apierrors.IsNotFound(err) {
			return true, err
		}
	}
	// A workload of the other layout's kind at the fleet's name is never converted or adopted:
	// the layout is fixed at creation, and a foreign object is left alone.
	var other client.Object
	switch {
	case s.isStatefulSet() && s.deploy != nil:
		other = s.deploy
	case !s.isStatefulSet() && s.sts != nil:
		other = s.sts
	}
	if other != nil && f.DeletionTimestamp == nil {
		s.verdict(v1.ReasonLifecycleBlocked, fmt.Sprintf("%s %s/%s exists, but this fleet's layout runs as a %s; a layout is never converted or adopted: delete or rename the %s, or create the fleet under another name",
			kindOf(other), f.Namespace, f.Name, layoutKind(s), kindOf(other)))
		return true, nil
	}
	owned := client.MatchingLabels{v1.LabelFleetUID: string(f.UID)}
	pods := &corev1.PodList{}
	if err := r.Direct.List(ctx, pods, client.InNamespace(f.Namespace), owned); err != nil {
		return true, err
	}
	s.pods = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	slices.SortFunc(s.pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	if f.Spec.Profile == v1.ProfilePersistentFleet {
		// Every claim of the namespace, not only the fleet's: a claim at a member's name
		// without the fleet's label must be seen to be refused (StorageIdentityConflict).
		claims := &corev1.PersistentVolumeClaimList{}
		if err := r.Direct.List(ctx, claims, client.InNamespace(f.Namespace)); err != nil {
			return true, err
		}
		s.namedClaims = claims.Items
		for _, c := range claims.Items {
			if c.Labels[v1.LabelFleetUID] == string(f.UID) {
				s.claims = append(s.claims, c)
			}
		}
	}
	return false, nil
}

func layoutKind(s *scope) string {
	if s.isStatefulSet() {
		return "StatefulSet"
	}
	return "Deployment"
}

// validate fails closed on a fleet that bypassed admission.
func (r *Reconciler) validate(_ context.Context, s *scope) (bool, error) {
	errs := s.fleet.Validate()
	if len(errs) == 0 {
		return false, nil
	}
	s.verdict(v1.ReasonInvalidConfiguration, fmt.Sprintf("CelldFleet %s/%s is invalid and was not provisioned: %s; fix the spec (kubectl explain celldfleet.spec)",
		s.fleet.Namespace, s.fleet.Name, summarize(errs)))
	return true, nil
}

func summarize(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Field+": "+e.Detail)
	}
	if len(msgs) > 5 {
		msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(errs)-5))
	}
	return strings.Join(msgs, "; ")
}

// finalizer adds the lifecycle-protection finalizer with an optimistic-lock merge patch, so
// the fleet cannot disappear before its workload and claims are gone.
func (r *Reconciler) finalizer(ctx context.Context, s *scope) (bool, error) {
	live := &v1.CelldFleet{}
	if err := r.Client.Get(ctx, s.key, live); err != nil {
		return true, err
	}
	if controllerutil.ContainsFinalizer(live, v1.FinalizerLifecycleProtection) {
		return false, nil
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(live, v1.FinalizerLifecycleProtection)
	if err := r.Client.Patch(ctx, live, patch); err != nil {
		return true, fmt.Errorf("add finalizer %s to CelldFleet %s/%s: %w", v1.FinalizerLifecycleProtection, live.Namespace, live.Name, err)
	}
	logMutation(ctx, s, "add finalizer", "CelldFleet/"+live.Name+" "+v1.FinalizerLifecycleProtection, "the fleet may not disappear before its workload and claims")
	s.fleet.Finalizers = live.Finalizers
	return false, nil
}
