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
// about it changed. The delete carries UID and resourceVersion preconditions; when the
// resourceVersion moved, the claim is read again: gone, or another claim at the name, means
// the recorded claim is already gone (or going); a change that matters is returned, and
// nothing is deleted; a change of status or metadata alone is verified and the delete is sent
// again with the fresh resourceVersion. A conflict is never taken for success. why is the
// mutation log's reason.
func (r *Reconciler) deleteRecordedClaim(ctx context.Context, s *scope, member string, rec claimRecord, why string) (change string, err error) {
	key := types.NamespacedName{Namespace: s.fleet.Namespace, Name: rec.Name}
	uid, rv := rec.UID, rec.ResourceVersion
	for attempt := 1; ; attempt++ {
		claim := &corev1.PersistentVolumeClaim{}
		claim.Namespace, claim.Name = key.Namespace, key.Name
		err := r.Direct.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			logMutation(ctx, s, "delete", "PersistentVolumeClaim/"+rec.Name, why)
			return "", nil
		case apierrors.IsNotFound(err):
			return "", nil // the recorded claim is already gone
		case !apierrors.IsConflict(err):
			return "", fmt.Errorf("delete claim %s of member %s: %w", key, member, err)
		case attempt >= claimDeleteAttempts:
			return "", fmt.Errorf("delete claim %s of member %s: its resourceVersion kept moving through %d verified attempts: %w", key, member, attempt, err)
		}
		live := &corev1.PersistentVolumeClaim{}
		if err := r.Direct.Get(ctx, key, live); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", fmt.Errorf("re-read claim %s of member %s after its delete met a precondition: %w", key, member, err)
		}
		if live.UID != rec.UID || live.DeletionTimestamp != nil {
			// The recorded claim is gone or already going; a claim now at its name is another
			// claim (the member's fresh disk, say), and it stays.
			return "", nil
		}
		if change := rec.changed(live, s.fleet.UID); change != "" {
			return change, nil
		}
		log.FromContext(ctx).Info("claim changed in status or metadata only (spec and volume as recorded); deleting it again",
			"fleet", s.key.String(), "claim", rec.Name, "member", member, "resourceVersion", live.ResourceVersion)
		rv = live.ResourceVersion
	}
}
