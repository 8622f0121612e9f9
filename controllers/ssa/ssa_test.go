package ssa

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

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

func rendered(apiVersion, kind string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": "f", "namespace": "ns"}, "spec": spec}}
}

func TestFromUnstructuredIsTypedForBuiltInKindsAndRoutes(t *testing.T) {
	for _, c := range []struct {
		obj  *unstructured.Unstructured
		want any
	}{
		{rendered("v1", "Service", map[string]any{"clusterIP": "None"}), &corev1ac.ServiceApplyConfiguration{}},
		{rendered("networking.k8s.io/v1", "NetworkPolicy", map[string]any{"podSelector": map[string]any{}}), &networkingv1ac.NetworkPolicyApplyConfiguration{}},
		{rendered("networking.k8s.io/v1", "Ingress", map[string]any{"ingressClassName": "nginx"}), &networkingv1ac.IngressApplyConfiguration{}},
		{rendered("policy/v1", "PodDisruptionBudget", map[string]any{"maxUnavailable": int64(1)}), &policyv1ac.PodDisruptionBudgetApplyConfiguration{}},
		{rendered("gateway.networking.k8s.io/v1", "HTTPRoute", map[string]any{"hostnames": []any{"a.example.com"}}), &gatewayv1ac.HTTPRouteApplyConfiguration{}},
	} {
		cfg, err := FromUnstructured(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.TypeOf(cfg) != reflect.TypeOf(c.want) {
			t.Errorf("%s is applied as %T, want the typed %T", c.obj.GetKind(), cfg, c.want)
		}
		if got := encode(t, cfg); !reflect.DeepEqual(got, c.obj.Object) {
			t.Errorf("%s: the apply would send %v, want exactly the rendering %v", c.obj.GetKind(), got, c.obj.Object)
		}
	}
}

// Istio's generated configurations drop `action: ALLOW` (an enum's zero value); the rendering
// must reach the API server whole.
func TestFromUnstructuredAppliesIstioKindsAsRendered(t *testing.T) {
	obj := rendered("security.istio.io/v1", "AuthorizationPolicy", map[string]any{"action": "ALLOW", "rules": []any{map[string]any{}}})
	cfg, err := FromUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	if got := encode(t, cfg); !reflect.DeepEqual(got, obj.Object) {
		t.Fatalf("the apply would send %v, want exactly the rendering %v", got, obj.Object)
	}
	if err := json.Unmarshal([]byte(`{"apiVersion":"security.istio.io/v1","kind":"AuthorizationPolicy","metadata":{"name":"other"}}`), cfg); err != nil {
		t.Fatal(err)
	}
	if obj.GetName() != "f" {
		t.Fatal("the server's answer, written into the configuration, must not change the caller's rendering")
	}
}

func TestAnswerIsTheServersObjectInUnstructuredForm(t *testing.T) {
	cfg := corev1ac.Service("f", "ns").WithSpec(corev1ac.ServiceSpec().WithClusterIP("None"))
	answer := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"f","namespace":"ns","uid":"u1","resourceVersion":"7"},` +
		`"spec":{"clusterIP":"None","ports":[{"port":8080,"protocol":"TCP","targetPort":8080}],"sessionAffinity":"None"}}`
	if err := json.Unmarshal([]byte(answer), cfg); err != nil { // what Apply does with the answer
		t.Fatal(err)
	}
	got, err := Answer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &unstructured.Unstructured{}
	if err := want.UnmarshalJSON([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Fatalf("Answer = %v, want the answer as a client reads it %v", got.Object, want.Object)
	}
}

func encode(t *testing.T, cfg any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u.Object
}
