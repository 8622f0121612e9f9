package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// StatefulSet renders the PersistentFleet StatefulSet, or the Ordered Bucket StatefulSet, at
// replicas. Both roll one member at a time (RollingUpdate, partition 0, highest ordinal first,
// each waiting for readiness) and start members in parallel, because celld recovers a member
// from its peers and every member must be able to start at once after a full stop. Claims are
// retained on scale-in and on deletion: only the operator deletes a fleet's claims, after the
// workload is gone. The Ordered layout has the same shape without claims.
//
// The result carries its SpecHash in annotation v1.AnnotationSpecHash.
func StatefulSet(f *v1.CelldFleet, o Options, replicas int32) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: objectMeta(f),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            new(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: Selector(f)},
			ServiceName:         PeersService(f.Name),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(0))},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: PodTemplate(f, o),
		},
	}
	if f.Spec.Profile == v1.ProfilePersistentFleet {
		s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{claimTemplate(f, o)}
	}
	s.Annotations = map[string]string{v1.AnnotationSpecHash: SpecHash(s)}
	return s
}

// Deployment renders the Bucket Deployment at replicas. maxSurge 0 and maxUnavailable 1 replace
// one member at a time without ever running more members than declared: a surge member would
// take a node the spread and anti-affinity reserve for the fleet.
//
// The result carries its SpecHash in annotation v1.AnnotationSpecHash.
func Deployment(f *v1.CelldFleet, o Options, replicas int32) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: objectMeta(f),
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: Selector(f)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: new(intstr.FromInt32(1)),
					MaxSurge:       new(intstr.FromInt32(0)),
				},
			},
			Template: PodTemplate(f, o),
		},
	}
	d.Annotations = map[string]string{v1.AnnotationSpecHash: SpecHash(d)}
	return d
}

// objectMeta names the workload after the fleet. No owner references: see the package comment.
func objectMeta(f *v1.CelldFleet) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: f.Name, Namespace: f.Namespace, Labels: Labels(f)}
}

// claimTemplate is the member disk: ReadWriteOncePod, so a member's disk is never mounted by
// two Pods even on one node, of the fleet's StorageClass and size. It is labelled with the fleet
// UID (the proof a claim belongs to this fleet, checked before growth) and annotated with the
// reservation that binds the bucket to the fleet.
func claimTemplate(f *v1.CelldFleet, o Options) corev1.PersistentVolumeClaim {
	c := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:   v1.ClaimTemplateName,
			Labels: Selector(f),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: gibibytes(f.Spec.Storage.SizeGiB)},
			},
		},
	}
	if sc := f.Spec.Storage.StorageClassName; sc != nil {
		c.Spec.StorageClassName = new(*sc)
	}
	if o.ReservationName != "" {
		c.Annotations = map[string]string{v1.AnnotationStorageReservation: o.ReservationName}
	}
	return c
}
