package fleet

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// intent is the replacement handoff recorded on the victim Pod: the only lifecycle record the
// operator keeps, and only for the moments between two separate API operations (the Pod
// delete, which commits, and the claim delete).
type intent struct {
	FleetUID             types.UID `json:"fleetUID"`
	ClaimUID             types.UID `json:"claimUID"`
	ClaimName            string    `json:"claimName"`
	ClaimResourceVersion string    `json:"claimResourceVersion"`
	Committed            bool      `json:"committed"`
	// Event and Message are the replacement's Warning event, so a pass that finishes a handoff
	// an earlier pass committed (the operator stopped in between) tells it too.
	Event   string `json:"event,omitempty"`
	Message string `json:"message,omitempty"`
}

// replace gives a member a fresh disk: hold the Pod, delete it, commit, delete the recorded
// claim, release. It reports whether it reached the commitment (the Pod or lone claim delete).
// A crash or error after that is finished by resumeReplacements on the next pass, one before it
// is aborted; a second claim is never deleted.
func (r *Reconciler) replace(ctx context.Context, s *scope, d lifecycle.Decision) (committed bool, err error) {
	claim := &corev1.PersistentVolumeClaim{}
	claim.Namespace, claim.Name = s.fleet.Namespace, d.Claim.Name
	if d.Pod.Name == "" { // no Pod holds the claim: the claim delete is the whole action
		uid, rv := d.Claim.UID, d.Claim.ResourceVersion
		err := r.Direct.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err == nil {
			logMutation(ctx, s, "delete", "PersistentVolumeClaim/"+claim.Name, d.Message)
			r.tell(s, d.Event, d.EventMessage)
			r.metrics.healed(s.fleet, d)
		}
		return err == nil, client.IgnoreNotFound(err)
	}
	pod := &corev1.Pod{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Namespace: s.fleet.Namespace, Name: d.Pod.Name}, pod); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if pod.UID != d.Pod.UID {
		return false, nil // the member moved on since the decision; decide again next pass
	}
	in := intent{FleetUID: s.fleet.UID, ClaimUID: d.Claim.UID, ClaimName: d.Claim.Name, ClaimResourceVersion: d.Claim.ResourceVersion,
		Event: d.Event, Message: d.EventMessage}
	if err := r.hold(ctx, pod, in); err != nil { // resourceVersion-guarded update
		return false, err
	}
	logMutation(ctx, s, "hold", "Pod/"+pod.Name, "the replacement handoff records claim "+d.Claim.Name+" before the Pod is deleted")
	uid, rv := pod.UID, pod.ResourceVersion
	if err := r.Direct.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		return false, fmt.Errorf("delete Pod %s/%s to replace its disk: %w", pod.Namespace, pod.Name, err)
	}
	logMutation(ctx, s, "delete", "Pod/"+pod.Name, d.Message+" (the handoff is committed)")
	// The Pod delete is the commitment: tell it now, not at the end of the pass, which a
	// crash may never reach. A later pass that finishes the handoff tells it again.
	r.tell(s, d.Event, d.EventMessage)
	r.metrics.healed(s.fleet, d)
	if r.AfterReplacementPodDelete != nil {
		r.AfterReplacementPodDelete(pod.Namespace, pod.Name)
	}
	return true, r.finishReplacement(ctx, s, pod)
}

func (r *Reconciler) hold(ctx context.Context, pod *corev1.Pod, in intent) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	controllerutil.AddFinalizer(pod, v1.FinalizerReplacingDisk)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Annotations[v1.AnnotationReplacementClaim] = string(raw)
	pod.Labels[v1.LabelReplacementFleet] = string(in.FleetUID)
	if err := r.Direct.Update(ctx, pod); err != nil {
		return fmt.Errorf("hold Pod %s/%s for the replacement handoff: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// finishReplacement re-reads the held Pod; if it is still the held Pod of this fleet, it
// commits, deletes exactly the recorded claim and releases the hold.
func (r *Reconciler) finishReplacement(ctx context.Context, s *scope, held *corev1.Pod) error {
	pod := &corev1.Pod{}
	if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(held), pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	in, ok := readIntent(pod)
	if pod.UID != held.UID || !ok || in.FleetUID != s.fleet.UID {
		return r.releaseHold(ctx, pod)
	}
	if !in.Committed {
		if err := r.commit(ctx, pod, held.UID); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	claim := &corev1.PersistentVolumeClaim{}
	claim.Namespace, claim.Name = pod.Namespace, in.ClaimName
	uid, rv := in.ClaimUID, in.ClaimResourceVersion
	err := r.Direct.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete claim %s/%s of replaced member %s: %w", claim.Namespace, claim.Name, pod.Name, err)
	}
	if err == nil {
		logMutation(ctx, s, "delete", "PersistentVolumeClaim/"+claim.Name, "the replacement of "+pod.Name+" is committed; exactly the recorded claim goes")
	}
	return r.releaseHold(ctx, pod)
}

// commit marks the hold committed. The victim is terminating and its status keeps changing
// (readiness, container states), so a conflict is retried against a fresh read, as long as it
// is still the same held Pod.
func (r *Reconciler) commit(ctx context.Context, pod *corev1.Pod, uid types.UID) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
		}
		first = false
		in, ok := readIntent(pod)
		if pod.UID != uid || !ok {
			return nil // released or replaced meanwhile: nothing left to commit
		}
		in.Committed = true
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		pod.Annotations[v1.AnnotationReplacementClaim] = string(raw)
		return r.Direct.Update(ctx, pod)
	})
}

// resumeReplacements finishes committed handoffs and aborts uncommitted ones, before any other
// action; paused fleets only release. It reports whether it handled one.
func (r *Reconciler) resumeReplacements(ctx context.Context, s *scope) (bool, error) {
	handled := false
	for i := range s.held {
		p := &s.held[i]
		handled = true
		in, ok := readIntent(p)
		if ok && in.Committed && in.FleetUID == s.fleet.UID && !paused(s.fleet) {
			// an earlier pass committed this replacement and stopped before finishing it: its
			// event may never have been sent (at least once beats never)
			r.tell(s, in.Event, in.Message+"; finished by a later pass, after the one that committed it stopped")
			if err := r.finishReplacement(ctx, s, p); err != nil {
				return true, err
			}
			continue
		}
		if err := r.releaseHold(ctx, p); err != nil { // abort: the claim stays
			return true, err
		}
	}
	return handled, nil
}

// tell records a replacement's Warning event at once, not with the pass's other events.
func (r *Reconciler) tell(s *scope, reason, message string) {
	if r.Recorder == nil || reason == "" {
		return
	}
	r.Recorder.Eventf(s.live, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", message)
}

func readIntent(p *corev1.Pod) (intent, bool) {
	var in intent
	raw, ok := p.Annotations[v1.AnnotationReplacementClaim]
	if !ok || json.Unmarshal([]byte(raw), &in) != nil || in.ClaimName == "" {
		return intent{}, false
	}
	return in, true
}

// releaseHolds drops the replacement-handoff finalizer from the fleet's Pods, so a deleting or
// paused fleet never keeps a Pod alive.
func (r *Reconciler) releaseHolds(ctx context.Context, s *scope) error {
	for i := range s.held {
		p := &s.held[i]
		if !controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) {
			continue
		}
		if err := r.releaseHold(ctx, p); err != nil {
			return fmt.Errorf("release the replacement hold on Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		logMutation(ctx, s, "release hold", "Pod/"+p.Name, "the fleet is paused or deleting: no disk is given up, the Pod is not kept")
	}
	return nil
}

// releaseHold removes the handoff's finalizer, annotation and label. The patch is guarded by
// resourceVersion so no other finalizer is lost; a conflict (the Pod's status keeps changing
// while it terminates) is retried against a fresh read of the same Pod.
func (r *Reconciler) releaseHold(ctx context.Context, p *corev1.Pod) error {
	uid, first := p.UID, true
	return client.IgnoreNotFound(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil || p.UID != uid {
				return err
			}
		}
		first = false
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(p, v1.FinalizerReplacingDisk)
		delete(p.Annotations, v1.AnnotationReplacementClaim)
		delete(p.Labels, v1.LabelReplacementFleet)
		return r.Direct.Patch(ctx, p, patch)
	}))
}
