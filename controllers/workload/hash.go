package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpecHash is the hex SHA-256 of the operator-owned part of a rendered workload: for a
// StatefulSet its selector, service name, pod management, update strategy, claim retention,
// claim templates and Pod template; for a Deployment its selector, strategy and Pod template.
// Replicas are excluded: the replica count is applied on its own, step by step, and must not
// make an unchanged spec look changed. Anything else (a Pod template, say) is hashed whole.
//
// Hash only what a builder rendered, never a live object: the API server fills defaults into
// the live spec, so its hash would never match. The builders store the hash in annotation
// v1.AnnotationSpecHash so a person can tell which rendering an object carries; whether the
// live workload needs a write is judged by content (controllers/drift), never by this hash.
func SpecHash(obj any) string {
	var owned any
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		owned = statefulSetOwned(&w.Spec)
	case *appsv1.Deployment:
		owned = deploymentOwned(&w.Spec)
	default:
		owned = obj
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(owned); err != nil {
		// Rendered workloads are plain API structs, which always marshal.
		panic(fmt.Sprintf("workload: hash %T: %v", obj, err))
	}
	return hex.EncodeToString(h.Sum(nil))
}

type statefulSetSpec struct {
	Selector             *metav1.LabelSelector                                   `json:"selector"`
	ServiceName          string                                                  `json:"serviceName"`
	PodManagementPolicy  appsv1.PodManagementPolicyType                          `json:"podManagementPolicy"`
	UpdateStrategy       appsv1.StatefulSetUpdateStrategy                        `json:"updateStrategy"`
	RetentionPolicy      *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"retention"`
	VolumeClaimTemplates []corev1.PersistentVolumeClaim                          `json:"claims"`
	Template             *corev1.PodTemplateSpec                                 `json:"template"`
}

func statefulSetOwned(s *appsv1.StatefulSetSpec) statefulSetSpec {
	return statefulSetSpec{
		Selector:             s.Selector,
		ServiceName:          s.ServiceName,
		PodManagementPolicy:  s.PodManagementPolicy,
		UpdateStrategy:       s.UpdateStrategy,
		RetentionPolicy:      s.PersistentVolumeClaimRetentionPolicy,
		VolumeClaimTemplates: s.VolumeClaimTemplates,
		Template:             &s.Template,
	}
}

type deploymentSpec struct {
	Selector *metav1.LabelSelector     `json:"selector"`
	Strategy appsv1.DeploymentStrategy `json:"strategy"`
	Template *corev1.PodTemplateSpec   `json:"template"`
}

func deploymentOwned(s *appsv1.DeploymentSpec) deploymentSpec {
	return deploymentSpec{Selector: s.Selector, Strategy: s.Strategy, Template: &s.Template}
}
