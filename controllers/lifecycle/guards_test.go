package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestGuardChecksInOrderEachWithItsReason: the prerequisites of provisioning, row by row, in
// their precedence (the first failing check is the blocker); an InvalidStorageClass names
// every problem of the class.
func TestGuardChecksInOrderEachWithItsReason(t *testing.T) {
	class := func(reclaim corev1.PersistentVolumeReclaimPolicy, mode storagev1.VolumeBindingMode, provisioner string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, ReclaimPolicy: &reclaim, VolumeBindingMode: &mode, Provisioner: provisioner}
	}
	good := class(corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingWaitForFirstConsumer, "ebs.csi.aws.com")
	cases := []struct {
		name   string
		edit   func(*GuardInput)
		reason string // empty: no blocker
		says   []string
	}{
		{"every prerequisite met", func(*GuardInput) {}, "", nil},
		{"a Bucket fleet needs no StorageClass", func(in *GuardInput) { in.Persistent, in.StorageClass = false, nil }, "", nil},
		{"no NetworkPolicy attestation", func(in *GuardInput) { in.NetworkPolicyEnforced = false },
			v1.ReasonIsolationUnverified, []string{"--network-policy-enforced", "networkPolicyEnforced"}},
		{"the attestation comes before everything else", func(in *GuardInput) {
			in.NetworkPolicyEnforced, in.ServiceAccountExists, in.StorageClass = false, false, nil
		}, v1.ReasonIsolationUnverified, nil},
		{"no ServiceAccount", func(in *GuardInput) { in.ServiceAccountExists = false },
			v1.ReasonServiceAccountMissing, []string{"ServiceAccount apps/celld does not exist", "bucket acme-data"}},
		{"the ServiceAccount comes before the StorageClass", func(in *GuardInput) { in.ServiceAccountExists, in.StorageClass = false, nil },
			v1.ReasonServiceAccountMissing, nil},
		{"no StorageClass", func(in *GuardInput) { in.StorageClass = nil },
			v1.ReasonStorageClassMissing, []string{"StorageClass gp3 does not exist"}},
		{"a class that retains volumes", func(in *GuardInput) {
			in.StorageClass = class(corev1.PersistentVolumeReclaimRetain, storagev1.VolumeBindingWaitForFirstConsumer, "ebs.csi.aws.com")
		}, v1.ReasonInvalidStorageClass, []string{"reclaimPolicy must be Delete"}},
		{"a class that binds at once", func(in *GuardInput) {
			in.StorageClass = class(corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingImmediate, "ebs.csi.aws.com")
		}, v1.ReasonInvalidStorageClass, []string{"volumeBindingMode must be WaitForFirstConsumer"}},
		{"a class of another provisioner", func(in *GuardInput) {
			in.StorageClass = class(corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingWaitForFirstConsumer, "other.csi.example")
		}, v1.ReasonInvalidStorageClass, []string{"provisioner other.csi.example is not one of the accepted ebs.csi.aws.com, pd.csi.storage.gke.io"}},
		{"every problem of a class is named", func(in *GuardInput) {
			in.StorageClass = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "other.csi.example"}
		}, v1.ReasonInvalidStorageClass, []string{"reclaimPolicy must be Delete; volumeBindingMode must be WaitForFirstConsumer", "provisioner other.csi.example"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := GuardInput{NetworkPolicyEnforced: true, Namespace: "apps", ServiceAccount: "celld", ServiceAccountExists: true,
				Bucket: "acme-data", Persistent: true, StorageClassName: "gp3", StorageClass: good,
				Provisioners: []string{"ebs.csi.aws.com", "pd.csi.storage.gke.io"}}
			c.edit(&in)
			b := Guard(in)
			if c.reason == "" {
				if b != nil {
					t.Fatalf("blocked by %s: %s", b.Reason, b.Message)
				}
				return
			}
			if b == nil || b.Reason != c.reason {
				t.Fatalf("Guard = %+v, want %s", b, c.reason)
			}
			for _, w := range c.says {
				if !strings.Contains(b.Message, w) {
					t.Errorf("the message %q does not say %q", b.Message, w)
				}
			}
		})
	}
}
