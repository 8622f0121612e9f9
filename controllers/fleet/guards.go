package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/lifecycle"
)

// guards refuses to provision a fleet whose prerequisites are missing: lifecycle.Guard, the
// pure chain of the checks, on what observeGuards read. A missing prerequisite is a blocker:
// nothing is created or changed, but the pass goes on to heal the members that already run (a
// prerequisite removed under a running fleet must not leave a member stuck on a lost node).
func (r *Reconciler) guards(_ context.Context, s *scope) (bool, error) {
	if s.guardErr != nil {
		return true, s.guardErr
	}
	if b := lifecycle.Guard(s.guard); b != nil {
		s.find.Block(b.Reason, b.Message)
	}
	return false, nil
}

// observeGuards reads what the guards check: whether the runtime ServiceAccount exists (from
// the namespace's cache) and, for a PersistentFleet, its StorageClass (from the manager's
// cache). Nothing is read without the NetworkPolicy attestation, which comes first, nor for a
// fleet being deleted. A read that fails is the guards' error, so it ends only a pass that
// reaches them.
func (r *Reconciler) observeGuards(ctx context.Context, s *scope) {
	f := s.fleet
	s.guard = lifecycle.GuardInput{NetworkPolicyEnforced: r.Options.NetworkPolicyEnforced, Namespace: f.Namespace,
		ServiceAccount: f.Spec.ServiceAccountName, Bucket: f.Spec.Storage.Bucket,
		Persistent: f.Spec.Profile == v1.ProfilePersistentFleet, Provisioners: r.Options.StorageProvisioners}
	if !s.guard.NetworkPolicyEnforced || f.DeletionTimestamp != nil {
		return
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := s.read.Get(ctx, types.NamespacedName{Namespace: f.Namespace, Name: f.Spec.ServiceAccountName}, sa)
	s.guard.ServiceAccountExists = err == nil
	if client.IgnoreNotFound(err) != nil {
		s.guardErr = fmt.Errorf("read ServiceAccount %s/%s: %w", f.Namespace, f.Spec.ServiceAccountName, err)
		return
	}
	if !s.guard.Persistent || !s.guard.ServiceAccountExists || f.Spec.Storage.StorageClassName == nil {
		return
	}
	s.guard.StorageClassName = *f.Spec.Storage.StorageClassName
	sc := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: s.guard.StorageClassName}, sc); err == nil {
		s.guard.StorageClass = sc
	} else if !apierrors.IsNotFound(err) {
		s.guardErr = fmt.Errorf("read StorageClass %s: %w", s.guard.StorageClassName, err)
	}
}

// foreignWorkload is the sentence naming a workload at the fleet's name that the fleet does not
// own, and why (children.Foreign: the missing label, or the owner it names), worded as the
// children's conflicts are.
func foreignWorkload(s *scope, obj client.Object) string {
	return fmt.Sprintf("%s %s/%s exists and %s (this fleet's objects carry %s=%s and no owner reference)",
		kindOf(obj), obj.GetNamespace(), obj.GetName(), children.Foreign(obj, s.fleet), v1.LabelFleetUID, s.fleet.UID)
}
