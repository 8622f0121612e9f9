package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
)

// guards refuses to provision a fleet whose prerequisites are missing: the NetworkPolicy
// attestation, the runtime ServiceAccount and, for PersistentFleet, a suitable StorageClass.
// A missing prerequisite is a blocker: nothing is created or changed, but the pass goes on to
// heal the members that already run (a prerequisite removed under a running fleet must not
// leave a member stuck on a lost node).
func (r *Reconciler) guards(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if !r.Options.NetworkPolicyEnforced {
		s.find.Block(v1.ReasonIsolationUnverified, "Administrator must verify a NetworkPolicy enforcing CNI and enable --network-policy-enforced (chart value networkPolicyEnforced) before provisioning")
		return false, nil
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	if err := s.read.Get(ctx, types.NamespacedName{Namespace: f.Namespace, Name: f.Spec.ServiceAccountName}, sa); err != nil {
		if !apierrors.IsNotFound(err) {
			return true, err
		}
		s.find.Block(v1.ReasonServiceAccountMissing, fmt.Sprintf("ServiceAccount %s/%s does not exist; create it (with the IAM role that reaches bucket %s) before the fleet can be provisioned",
			f.Namespace, f.Spec.ServiceAccountName, f.Spec.Storage.Bucket))
		return false, nil
	}
	if f.Spec.Profile == v1.ProfilePersistentFleet {
		reason, msg, err := r.storageClass(ctx, *f.Spec.Storage.StorageClassName)
		if err != nil {
			return true, err
		}
		if reason != "" {
			s.find.Block(reason, msg)
		}
	}
	return false, nil
}

// storageClass checks the class a PersistentFleet's disks come from: it must exist, delete its
// volumes with their claims (only fleet deletion removes claims), bind on first consumer (so
// a disk is created in the zone the scheduler picked) and come from an accepted provisioner.
func (r *Reconciler) storageClass(ctx context.Context, name string) (reason, msg string, err error) {
	sc := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, sc); err != nil {
		if apierrors.IsNotFound(err) {
			return v1.ReasonStorageClassMissing, fmt.Sprintf("StorageClass %s does not exist; create it or set spec.storage.storageClassName to an existing class at fleet creation", name), nil
		}
		return "", "", err
	}
	var problems []string
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != "Delete" {
		problems = append(problems, "reclaimPolicy must be Delete")
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		problems = append(problems, "volumeBindingMode must be WaitForFirstConsumer so each disk is created in its member's zone")
	}
	if !slices.Contains(r.Options.StorageProvisioners, sc.Provisioner) {
		problems = append(problems, fmt.Sprintf("provisioner %s is not one of the accepted %s (operator flag --storage-provisioners)", sc.Provisioner, strings.Join(r.Options.StorageProvisioners, ", ")))
	}
	if len(problems) > 0 {
		return v1.ReasonInvalidStorageClass, fmt.Sprintf("StorageClass %s cannot hold fleet disks: %s; use a class that satisfies this", name, strings.Join(problems, "; ")), nil
	}
	return "", "", nil
}

// foreignWorkload is the sentence naming a workload at the fleet's name that the fleet does not
// own, and why (children.Foreign: the missing label, or the owner it names), worded as the
// children's conflicts are.
func foreignWorkload(s *scope, obj client.Object) string {
	return fmt.Sprintf("%s %s/%s exists and %s (this fleet's objects carry %s=%s and no owner reference)",
		kindOf(obj), obj.GetNamespace(), obj.GetName(), children.Foreign(obj, s.fleet), v1.LabelFleetUID, s.fleet.UID)
}
