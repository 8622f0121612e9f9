package preview

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// FieldOwner is the field manager of the preview reconciler's writes.
const FieldOwner = "celld-operator"

// resync re-examines a preview that waits for nothing a watch sees (a parent that has not
// appeared, a pool conflict somebody may resolve).
const resync = 30 * time.Second

// Reconciler drives CelldPreviews. Previews, fleets and parents are read from the manager's
// cache (Client); what safety depends on goes to the API server (Direct): the pool
// arbitration, the check that nothing exists at the generated fleet's name before it is
// created, and the re-read before the fleet is deleted.
type Reconciler struct {
	Client client.Client
	Direct client.Client
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Reconcile drives one CelldPreview one step, in three parts: observe reads what the pass
// needs (observe.go), decide makes the one decision, a pure plan of actions and the verdict
// (plan.go), act runs the actions (act.go), and report projects the plan and what the
// executor did on the preview's status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1.CelldPreview{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s, err := r.observe(ctx, p)
	var pl plan
	if err == nil {
		pl = decide(s)
		out := r.act(ctx, s, pl)
		if err = out.err; out.refused != nil {
			pl.v, pl.wait = *out.refused, out.wait
		}
	}
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: time.Second}, nil // a fresh read decides again
	}
	if err != nil {
		pl.v, pl.wait = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Retrying after an error: %v", err)}, 0
	}
	if p.DeletionTimestamp == nil || pl.v.phase != "" {
		if serr := r.report(ctx, s, pl); serr != nil && err == nil && !apierrors.IsNotFound(serr) {
			err = serr
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue(s, pl)}, nil
}

// requeue is how soon to look again: at expiry while the preview runs, sooner when the plan
// waits for what no watch reports.
func requeue(s *snapshot, pl plan) time.Duration {
	var after time.Duration
	if s.stage == running {
		after = max(s.expires.Sub(s.now), time.Second) // wake at expiry
	}
	if pl.wait > 0 && (after == 0 || pl.wait < after) {
		after = pl.wait
	}
	return after
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// report projects the plan and what the executor did on the preview's status, written only
// when it changed.
func (r *Reconciler) report(ctx context.Context, s *snapshot, pl plan) error {
	p := s.p
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.Phase = pl.v.phase
	st.ParentFleetName = p.Spec.FleetRef.Name
	st.ExpiresAt = &metav1.Time{Time: s.expires}
	if pl.named || p.Annotations[v1.AnnotationPreviewFleet] != "" {
		st.FleetName = s.fleet
	}
	if pl.storageURL != "" && st.FleetName != "" {
		st.StorageURL = pl.storageURL
	}
	if pl.url != "" && st.FleetName != "" {
		st.URL = pl.url
	}
	status := metav1.ConditionFalse
	if pl.v.ready() {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: status,
		Reason: pl.v.reason, Message: pl.v.message, ObservedGeneration: p.Generation})
	if equality.Semantic.DeepEqual(st, &p.Status) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Status = *st
	if err := r.Client.Status().Patch(ctx, p, patch, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("write the status of CelldPreview %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
