package ssa

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	acv1 "github.com/celld/celld-operator/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

func TestIntoKeepsExactlyTheSetFields(t *testing.T) {
	st := v1.CelldFleetStatus{ReadyReplicas: 2, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Provisioned"}}}
	cfg, err := Into(&st, &acv1.CelldFleetStatusApplyConfiguration{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReadyReplicas == nil || *cfg.ReadyReplicas != 2 || len(cfg.Conditions) != 1 || *cfg.Conditions[0].Reason != "Provisioned" {
		t.Fatalf("the set fields must be carried: %+v", cfg)
	}
	if cfg.AppliedReplicas != nil || cfg.Capacity != nil {
		t.Fatalf("fields left empty must not be applied (they would be owned as zero): %+v", cfg)
	}
}

func TestIntoBuildsClientGoConfigurations(t *testing.T) {
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns"}, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3))}}
	cfg, err := Into(sts, &appsv1ac.StatefulSetApplyConfiguration{})
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Kind != "StatefulSet" || *cfg.Name != "f" || *cfg.Spec.Replicas != 3 {
		t.Fatalf("the StatefulSet's identity and spec must be carried: %+v", cfg)
	}
}

func TestIntoRefusesAFieldTheConfigurationHasNoPlaceFor(t *testing.T) {
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": map[string]any{"replicas": 1, "replicaCount": 3}}
	if _, err := Into(obj, &appsv1ac.StatefulSetApplyConfiguration{}); err == nil || !strings.Contains(err.Error(), "replicaCount") {
		t.Fatalf("a field the configuration cannot hold must fail the conversion, not be left out of the apply: %v", err)
	}
}
