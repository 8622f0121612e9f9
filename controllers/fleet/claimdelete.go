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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

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
	return r.deleteClaimVerified(ctx, s, "member "+member, rec.Name, rec.UID, rec.ResourceVersion,
		func(live *corev1.PersistentVolumeClaim) string { return rec.changed(live, s.fleet.UID) }, why)
}

// deleteClaimVerified deletes the claim name of uid, read at resourceVersion rv, for whom (a
// member, or the deleted fleet). The delete carries UID and resourceVersion preconditions; when
// the resourceVersion moved, the claim is read again: gone, or another claim at the name, means
// the claim read is already gone (or going); a change keep reports (a reason not to delete) is
// returned, and nothing is deleted; otherwise only what keep does not look at moved (its status,
// say), and the delete is sent again with the fresh resourceVersion. A conflict is never taken
// for success. Past claimDeleteAttempts the conflict is returned and the next pass tries again.
func (r *Reconciler) deleteClaimVerified(ctx context.Context, s *scope, whom, name string, uid types.UID, rv string,
	keep func(live *corev1.PersistentVolumeClaim) string, why string) (change string, err error) {
	key := types.NamespacedName{Namespace: s.fleet.Namespace, Name: name}
	for attempt := 1; ; attempt++ {
		claim := &corev1.PersistentVolumeClaim{}
		claim.Namespace, claim.Name = key.Namespace, key.Name
		w := write{verb: "delete", object: "PersistentVolumeClaim/" + name, why: why}
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
