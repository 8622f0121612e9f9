package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const (
	// ProvisionerName is the provisioner (and CSI driver) of the default StorageClass. The
	// operator accepts it through its flag listing accepted provisioners.
	ProvisionerName = "zonal.csi.celld.eric.dev"
	// StorageClassName is the default StorageClass of the local cluster.
	StorageClassName = "zonal"
)

// installStorage creates the default StorageClass and the CSIDriver object that matches the
// PVs the provisioner creates. WaitForFirstConsumer lets the scheduler pick the node first,
// so the provisioner can pin the volume to that node's zone.
func installStorage(ctx context.Context, cs kubernetes.Interface) error {
	bind := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	expand := true
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:          ProvisionerName,
		VolumeBindingMode:    &bind,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: &expand,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass: %w", err)
	}
	attach, podInfo := false, false
	drv := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: ProvisionerName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: &attach, PodInfoOnMount: &podInfo},
	}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, drv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CSIDriver: %w", err)
	}
	return nil
}

// runProvisioner runs the zonal provisioner until ctx ends.
func runProvisioner(ctx context.Context, cs kubernetes.Interface) {
	pc := controller.NewProvisionController(ctx, cs, ProvisionerName, &zonalProvisioner{client: cs},
		controller.LeaderElection(false), controller.Threadiness(4), controller.ExponentialBackOffOnError(false))
	pc.Run(ctx)
}

// zonalProvisioner creates CSI PVs with a node affinity on the zone of the node the scheduler
// selected, which is what a cloud block-storage driver does. There is no backing storage.
type zonalProvisioner struct{ client kubernetes.Interface }

// Provision implements controller.Provisioner.
func (p *zonalProvisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("claim %s/%s has no selected node; the StorageClass must use WaitForFirstConsumer", o.PVC.Namespace, o.PVC.Name)
	}
	node, err := p.client.CoreV1().Nodes().Get(ctx, o.SelectedNodeName, metav1.GetOptions{})
	if err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("get selected node %s: %w", o.SelectedNodeName, err)
	}
	zone := node.Labels[zoneLabel]
	if zone == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("node %s has no %s label", node.Name, zoneLabel)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName, Labels: map[string]string{zoneLabel: zone}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    o.PVC.Spec.VolumeMode,
			MountOptions:                  o.StorageClass.MountOptions,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:           ProvisionerName,
				VolumeHandle:     o.PVName,
				VolumeAttributes: map[string]string{"zone": zone, "selectedNode": node.Name},
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete implements controller.Provisioner: there is no backing volume to remove.
func (p *zonalProvisioner) Delete(context.Context, *corev1.PersistentVolume) error { return nil }
