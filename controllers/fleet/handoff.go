package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
	// ClaimSpecHash and ClaimVolume are what matters about the claim (claimRecord); an intent
	// an earlier release wrote has neither.
	ClaimSpecHash string `json:"claimSpecHash,omitempty"`
	ClaimVolume   string `json:"claimVolume,omitempty"`
	Committed     bool   `json:"committed"`
	// Event and Message are the replacement's Warning event, so a pass that finishes a handoff
	// an earlier pass committed (the operator stopped in between) tells it too.
	Event   string `json:"event,omitempty"`
	Message string `json:"message,omitempty"`
}

func (in intent) claim() claimRecord {
	return claimRecord{Name: in.ClaimName, UID: in.ClaimUID, ResourceVersion: in.ClaimResourceVersion,
		SpecHash: in.ClaimSpecHash, Volume: in.ClaimVolume}
}

// announce logs a replacement before its first write: the one line that names the member, its
// claim and why, whatever happens next. The commitment (the Pod delete, or the claim delete
// when no Pod holds the claim) is what its event tells, and an operator killed right after
// sending it never tells it, nor logs the write (mutation lines follow the API server's
// answer); with no Pod there is no hold to finish it from either. This line, written before the
// write is sent, is the operator's record of the replacement then (grep the log for
// "replacement").
func announce(ctx context.Context, s *scope, member, claim, why string) {
	log.FromContext(ctx).Info("replacement", "fleet", s.key.String(), "member", member, "claim", claim, "why", why)
}

// replace gives a member a fresh disk: read the claim, hold the Pod, delete it, commit, delete
// the recorded claim, release. It reports whether it reached the commitment (the Pod or lone
// claim delete). A crash or error after that is finished by resumeReplacements on the next
// pass, one before it is aborted; a second claim is never deleted.
func (r *Reconciler) replace(ctx context.Context, s *scope, d lifecycle.Decision) (committed bool, err error) {
	// The claim is recorded as the API server has it now: its resourceVersion, and what a
	// change by someone else must not slip past (its spec and volume).
	rec, err := r.readClaimRecord(ctx, s, d.Claim)
	if err != nil || rec == nil {
		return false, err
	}
	if d.Pod.Name == "" { // no Pod holds the claim: the claim delete is the whole action
		member := v1.MemberName(s.fleet.Name, d.Ordinal)
		announce(ctx, s, member, rec.Name, d.Message)
		change, err := r.deleteRecordedClaim(ctx, s, member, *rec, d.Message)
		if err != nil {
			return false, err
		}
		if change != "" {
			r.abandon(s, member, rec.Name, change)
			return false, nil
		}
		r.tell(s, d.Event, d.EventMessage)
		r.metrics.healed(s.fleet, d)
		return true, nil
	}
	pod := &corev1.Pod{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Namespace: s.fleet.Namespace, Name: d.Pod.Name}, pod); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if pod.UID != d.Pod.UID {
		return false, nil // the member moved on since the decision; decide again next pass
	}
	announce(ctx, s, pod.Name, rec.Name, d.Message)
	in := intent{FleetUID: s.fleet.UID, ClaimUID: rec.UID, ClaimName: rec.Name, ClaimResourceVersion: rec.ResourceVersion,
		ClaimSpecHash: rec.SpecHash, ClaimVolume: rec.Volume, Event: d.Event, Message: d.EventMessage}
	held := write{verb: "hold", object: "Pod/" + pod.Name, member: pod.Name, why: "the replacement handoff records claim " + d.Claim.Name + " before the Pod is deleted"}
	if err := r.do(ctx, s, held, sent(func(ctx context.Context) error { return r.hold(ctx, pod, in) })); err != nil {
		return false, err // a resourceVersion-guarded update
	}
	uid, rv := pod.UID, pod.ResourceVersion
	del := write{verb: "delete", object: "Pod/" + pod.Name, why: d.Message + " (the handoff is committed)", member: pod.Name, takesDown: true}
	if err := r.do(ctx, s, del, sent(func(ctx context.Context) error {
		return r.Direct.Delete(ctx, pod, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	})); err != nil {
		// Not committed: the Pod changed since the hold (someone else may have deleted it), so
		// the hold goes now and the claim stays. A held Pod found terminating by a later pass
		// is then one this delete removed (resumeReplacements).
		if releaseErr := r.releaseHold(ctx, s, pod, "the Pod changed since the hold: the replacement is not committed and the claim stays"); releaseErr != nil {
			err = fmt.Errorf("%w; and release the hold: %v", err, releaseErr)
		}
		return false, fmt.Errorf("replace the disk of member %s: %w", pod.Name, err)
	}
	// The Pod delete is the commitment: tell it now, not at the end of the pass, which a
	// crash may never reach. A later pass that finishes the handoff tells it again.
	r.tell(s, d.Event, d.EventMessage)
	r.metrics.healed(s.fleet, d)
	if r.AfterReplacementPodDelete != nil {
		r.AfterReplacementPodDelete(pod.Namespace, pod.Name)
	}
	return true, r.finishReplacement(ctx, s, pod)
}

// abandon reports a committed replacement whose claim was not deleted because the claim
// changed: a Warning event, and the pass's healing finding, both naming the member, the claim
// and the change. The claim stays; the next pass decides again from what it then finds.
func (r *Reconciler) abandon(s *scope, member, claim, change string) {
	msg := fmt.Sprintf("Replacement of member %s abandoned: claim %s/%s changed while it was under way (%s); the claim is kept and the member returns on it, and the next pass decides again",
		member, s.fleet.Namespace, claim, change)
	r.tell(s, v1.EventReplacementAbandoned, msg)
	s.abandoned = &lifecycle.Decision{Ordinal: -1, Reason: v1.ReasonProvisioning, Message: msg}
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
	return r.Direct.Update(ctx, pod)
}

// finishReplacement re-reads the held Pod; if it is still the held Pod of this fleet, it
// commits, deletes exactly the recorded claim and releases the hold. A claim that changed
// meanwhile is kept and the replacement abandoned, visibly; an error keeps the committed hold,
// so the next pass finishes it.
func (r *Reconciler) finishReplacement(ctx context.Context, s *scope, held *corev1.Pod) error {
	pod := &corev1.Pod{}
	if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(held), pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	in, ok := readIntent(pod)
	if pod.UID != held.UID || !ok || in.FleetUID != s.fleet.UID {
		return r.releaseHold(ctx, s, pod, "the held Pod is another Pod now or not this fleet's: nothing of the replacement is left to finish")
	}
	if !in.Committed {
		w := write{verb: "commit", object: "Pod/" + pod.Name, member: pod.Name, why: "the Pod delete committed the replacement; the hold records it before the claim goes"}
		if err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) { return r.commit(ctx, pod, held.UID) }); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	change, err := r.deleteRecordedClaim(ctx, s, pod.Name, in.claim(), "the replacement of "+pod.Name+" is committed; exactly the recorded claim goes")
	if err != nil {
		return err
	}
	why := "the replacement is finished: the recorded claim is gone"
	if change != "" {
		r.abandon(s, pod.Name, in.ClaimName, change)
		why = "the replacement is abandoned: its claim changed and stays"
	}
	return r.releaseHold(ctx, s, pod, why)
}

// commit marks the hold committed. The victim is terminating and its status keeps changing
// (readiness, container states), so a conflict is retried against a fresh read, as long as it
// is still the same held Pod.
// It reports whether it wrote the mark.
func (r *Reconciler) commit(ctx context.Context, pod *corev1.Pod, uid types.UID) (bool, error) {
	first, wrote := true, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
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
		err = r.Direct.Update(ctx, pod)
		wrote = err == nil
		return err
	})
	return wrote, err
}

// resumeReplacements finishes committed handoffs and aborts uncommitted ones, before any other
// action; paused fleets only release. It reports whether it handled one. The Pod delete is the
// commitment, and the Committed mark is a separate write after it: a held Pod that is
// terminating was deleted by the replacement (a failed delete releases its hold at once), so
// it is committed even when the pass that deleted it stopped before marking it. Aborting it
// would keep the claim after MemberReplaced was told.
func (r *Reconciler) resumeReplacements(ctx context.Context, s *scope) (bool, error) {
	handled := false
	for i := range s.held {
		p := &s.held[i]
		handled = true
		in, ok := readIntent(p)
		committed := in.Committed || p.DeletionTimestamp != nil
		if ok && committed && in.FleetUID == s.fleet.UID && !paused(s.fleet) {
			// an earlier pass committed this replacement and stopped before finishing it: its
			// event may never have been sent (at least once beats never)
			r.tell(s, in.Event, in.Message+"; finished by a later pass, after the one that committed it stopped")
			if err := r.finishReplacement(ctx, s, p); err != nil {
				return true, err
			}
			continue
		}
		if err := r.releaseHold(ctx, s, p, "an uncommitted replacement is aborted (or the fleet is paused): the claim stays"); err != nil {
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
		if err := r.releaseHold(ctx, s, p, "the fleet is paused or deleting: no disk is given up, the Pod is not kept"); err != nil {
			return err
		}
	}
	return nil
}

// releaseHold removes the handoff's finalizer, annotation and label, through the executor (why
// is its reason). The patch is guarded by resourceVersion so no other finalizer is lost; a
// conflict (the Pod's status keeps changing while it terminates) is retried against a fresh
// read of the same Pod. A Pod gone, or another Pod at the name, is no write.
func (r *Reconciler) releaseHold(ctx context.Context, s *scope, p *corev1.Pod, why string) error {
	uid, first := p.UID, true
	w := write{verb: "release hold", object: "Pod/" + p.Name, member: p.Name, why: why}
	return r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
		wrote := false
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
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
			err := r.Direct.Patch(ctx, p, patch)
			wrote = err == nil
			return err
		})
		return wrote, client.IgnoreNotFound(err)
	})
}

// claimRecord is what a replacement records of the claim it gives up: exactly that claim (its
// UID), the resourceVersion it was read at, and what matters about it: its spec, which names
// the volume it is bound to. Its status is not part of it. Other controllers write a claim's
// status and metadata at any moment (the PV binder its phase, the unused-since controller its
// Unused condition as soon as the Pod stops running, the PVC protection controller its
// finalizer), and every such write moves the resourceVersion: a precondition on the
// resourceVersion alone would cancel the very replacements the rule exists for.
type claimRecord struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	SpecHash        string
	Volume          string
}

// claimDeleteAttempts bounds how often a recorded claim's delete is tried again after its
// resourceVersion moved without a change that matters. Past it the delete reports an error and
// the committed hold stays, so the next pass tries again.
const claimDeleteAttempts = 5

func recordClaim(c *corev1.PersistentVolumeClaim) claimRecord {
	return claimRecord{Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion, SpecHash: claimSpecHash(c), Volume: c.Spec.VolumeName}
}

// claimSpecHash is a digest of the claim's whole spec (requests, access modes, storage class,
// selector, data source, volume name, volume mode).
func claimSpecHash(c *corev1.PersistentVolumeClaim) string {
	raw, err := json.Marshal(c.Spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// changed says what about the live claim differs from the record in a way that cancels the
// replacement, or "" when only its status or other metadata moved. A claim that stopped
// carrying the fleet's UID label is no longer the fleet's to delete.
func (rec claimRecord) changed(live *corev1.PersistentVolumeClaim, fleet types.UID) string {
	switch {
	case live.Labels[v1.LabelFleetUID] != string(fleet):
		return fmt.Sprintf("it no longer carries the label %s=%s", v1.LabelFleetUID, fleet)
	case rec.SpecHash == "":
		return "the replacement was recorded by an earlier operator release, which did not record the claim's spec, so a change to it cannot be ruled out"
	case live.Spec.VolumeName != rec.Volume:
		return fmt.Sprintf("it is now bound to volume %q, not %q", live.Spec.VolumeName, rec.Volume)
	case claimSpecHash(live) != rec.SpecHash:
		return "its spec changed (storage request, access modes, storage class, selector or data source)"
	}
	return ""
}

// deleteRecordedClaim deletes exactly the recorded claim, and only while nothing that matters
// about it changed (claimRecord.changed). why is the mutation log's reason.
func (r *Reconciler) deleteRecordedClaim(ctx context.Context, s *scope, member string, rec claimRecord, why string) (change string, err error) {
	return r.deleteClaimVerified(ctx, s, member, "member "+member, rec.Name, rec.UID, rec.ResourceVersion,
		func(live *corev1.PersistentVolumeClaim) string { return rec.changed(live, s.fleet.UID) }, why)
}

// deleteClaimVerified deletes the claim name of uid, read at resourceVersion rv, for whom (a
// member, or the deleted fleet; member names the member, "" for the deleted fleet). The delete carries UID and resourceVersion preconditions; when
// the resourceVersion moved, the claim is read again: gone, or another claim at the name, means
// the claim read is already gone (or going); a change keep reports (a reason not to delete) is
// returned, and nothing is deleted; otherwise only what keep does not look at moved (its status,
// say), and the delete is sent again with the fresh resourceVersion. A conflict is never taken
// for success. Past claimDeleteAttempts the conflict is returned and the next pass tries again.
func (r *Reconciler) deleteClaimVerified(ctx context.Context, s *scope, member, whom, name string, uid types.UID, rv string,
	keep func(live *corev1.PersistentVolumeClaim) string, why string) (change string, err error) {
	key := types.NamespacedName{Namespace: s.fleet.Namespace, Name: name}
	for attempt := 1; ; attempt++ {
		claim := &corev1.PersistentVolumeClaim{}
		claim.Namespace, claim.Name = key.Namespace, key.Name
		w := write{verb: "delete", object: "PersistentVolumeClaim/" + name, member: member, why: why}
		err := r.do(ctx, s, w, sent(func(ctx context.Context) error {
			return r.Direct.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		}))
		switch {
		case err == nil:
			return "", nil
		case apierrors.IsNotFound(err):
			return "", nil // already gone
		case !apierrors.IsConflict(err):
			return "", fmt.Errorf("the claim of %s: %w", whom, err)
		case attempt >= claimDeleteAttempts:
			return "", fmt.Errorf("the claim of %s: its resourceVersion kept moving through %d verified attempts: %w", whom, attempt, err)
		}
		live := &corev1.PersistentVolumeClaim{}
		if err := r.Direct.Get(ctx, key, live); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", fmt.Errorf("re-read claim %s of %s after its delete met a precondition: %w", key, whom, err)
		}
		if live.UID != uid || live.DeletionTimestamp != nil {
			// The claim read is gone or already going; a claim now at its name is another
			// claim (a member's fresh disk, say), and it stays.
			return "", nil
		}
		if change := keep(live); change != "" {
			return change, nil
		}
		log.FromContext(ctx).Info("claim changed in what its delete does not depend on; deleting it again",
			"fleet", s.key.String(), "claim", name, "of", whom, "resourceVersion", live.ResourceVersion)
		rv = live.ResourceVersion
	}
}
