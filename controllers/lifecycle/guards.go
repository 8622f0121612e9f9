package lifecycle

import (
	"fmt"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// GuardInput is what the checks before a fleet is provisioned read: the operator's
// NetworkPolicy attestation, whether the fleet's runtime ServiceAccount exists, and for a
// PersistentFleet its StorageClass (nil when it does not exist) and the provisioners the
// operator accepts.
type GuardInput struct {
	NetworkPolicyEnforced bool
	Namespace             string
	ServiceAccount        string
	ServiceAccountExists  bool
	Bucket                string
	Persistent            bool
	StorageClassName      string
	StorageClass          *storagev1.StorageClass
	Provisioners          []string
}

// Guard is the chain of the fleet's prerequisites, in precedence order, each with its reason:
// the administrator's attestation that the CNI enforces NetworkPolicy (IsolationUnverified),
// the runtime ServiceAccount (ServiceAccountMissing), and for a PersistentFleet a StorageClass
// that exists (StorageClassMissing) and can hold fleet disks: it deletes volumes with their
// claims, binds on first consumer and comes from an accepted provisioner (InvalidStorageClass,
// every problem named). It returns the blocker of the first check that fails, nil when every
// check passes. A blocker holds provisioning back; the members that run are still healed.
func Guard(in GuardInput) *Verdict {
	if !in.NetworkPolicyEnforced {
		return &Verdict{v1.ReasonIsolationUnverified, "Administrator must verify a NetworkPolicy enforcing CNI and enable --network-policy-enforced (chart value networkPolicyEnforced) before provisioning"}
	}
	if !in.ServiceAccountExists {
		return &Verdict{v1.ReasonServiceAccountMissing, fmt.Sprintf("ServiceAccount %s/%s does not exist; create it (with the IAM role that reaches bucket %s) before the fleet can be provisioned",
			in.Namespace, in.ServiceAccount, in.Bucket)}
	}
	if !in.Persistent {
		return nil
	}
	sc := in.StorageClass
	if sc == nil {
		return &Verdict{v1.ReasonStorageClassMissing, fmt.Sprintf("StorageClass %s does not exist; create it or set spec.storage.storageClassName to an existing class at fleet creation", in.StorageClassName)}
	}
	var problems []string
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != "Delete" {
		problems = append(problems, "reclaimPolicy must be Delete")
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		problems = append(problems, "volumeBindingMode must be WaitForFirstConsumer so each disk is created in its member's zone")
	}
	if !slices.Contains(in.Provisioners, sc.Provisioner) {
		problems = append(problems, fmt.Sprintf("provisioner %s is not one of the accepted %s (operator flag --storage-provisioners)", sc.Provisioner, strings.Join(in.Provisioners, ", ")))
	}
	if len(problems) > 0 {
		return &Verdict{v1.ReasonInvalidStorageClass, fmt.Sprintf("StorageClass %s cannot hold fleet disks: %s; use a class that satisfies this", in.StorageClassName, strings.Join(problems, "; "))}
	}
	return nil
}
