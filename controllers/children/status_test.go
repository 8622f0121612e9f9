package children

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func routeCondition(t, status string, gen int64) map[string]any {
	return map[string]any{"type": t, "status": status, "reason": "Test", "message": t + " " + status,
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func setRouteStatus(t *testing.T, f *v1.CelldFleet, section string, conds ...map[string]any) {
	t.Helper()
	c := apiServer(t)
	u := mustExist(t, c, gvkHTTPRoute, f.Namespace, f.Name+"-routing")
	ref := map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": f.Spec.Routing.Gateway.Name, "namespace": f.Spec.Routing.Gateway.Namespace}
	if section != "" {
		ref["sectionName"] = section
	}
	parent := map[string]any{"parentRef": ref, "controllerName": "example.com/gateway", "conditions": toAny(conds)}
	if err := unstructured.SetNestedSlice(u.Object, []any{parent}, "status", "parents"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func toAny(ms []map[string]any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

func TestRoutingReadyFollowsTheConfiguredParentOfTheCurrentGeneration(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-gateway", ns)
	converge(t, c, f, testFacts())
	gen := mustExist(t, c, gvkHTTPRoute, ns, f.Name+"-routing").GetGeneration()
	section := f.Spec.Routing.Gateway.SectionName

	steps := []struct {
		name    string
		section string
		conds   []map[string]any
		status  metav1.ConditionStatus
		reason  string
	}{
		{"no parent status yet", "", nil, metav1.ConditionUnknown, v1.ReasonAwaitingAcceptance},
		{"accepted with resolved refs", section, []map[string]any{routeCondition("Accepted", "True", gen), routeCondition("ResolvedRefs", "True", gen)}, metav1.ConditionTrue, v1.ReasonRouteAccepted},
		{"accepted by another listener only", "other", []map[string]any{routeCondition("Accepted", "True", gen), routeCondition("ResolvedRefs", "True", gen)}, metav1.ConditionUnknown, v1.ReasonAwaitingAcceptance},
		{"refs unresolved", section, []map[string]any{routeCondition("Accepted", "True", gen), routeCondition("ResolvedRefs", "False", gen)}, metav1.ConditionFalse, v1.ReasonRouteRejected},
		{"rejected", section, []map[string]any{routeCondition("Accepted", "False", gen), routeCondition("ResolvedRefs", "True", gen)}, metav1.ConditionFalse, v1.ReasonRouteRejected},
		{"an older generation's acceptance", section, []map[string]any{routeCondition("Accepted", "True", gen-1), routeCondition("ResolvedRefs", "True", gen-1)}, metav1.ConditionUnknown, v1.ReasonAwaitingAcceptance},
	}
	for _, s := range steps {
		if s.conds != nil {
			setRouteStatus(t, f, s.section, s.conds...)
		}
		got := RoutingStatus(context.Background(), c, f)
		if got.Status != s.status || got.Reason != s.reason || got.Type != v1.ConditionRoutingReady || got.ObservedGeneration != f.Generation {
			t.Errorf("%s: RoutingReady = %s/%s (%s); want %s/%s", s.name, got.Status, got.Reason, got.Message, s.status, s.reason)
		}
	}
}

func TestRoutingReadyForAnIngressIsItsAddress(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	converge(t, c, f, testFacts())
	if got := RoutingStatus(context.Background(), c, f); got.Status != metav1.ConditionUnknown || got.Reason != v1.ReasonAwaitingAddress {
		t.Fatalf("without an address: %s/%s; want Unknown/AwaitingAddress", got.Status, got.Reason)
	}
	u := mustExist(t, c, gvkIngress, ns, f.Name+"-routing")
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"hostname": "lb.example.com"}}, "status", "loadBalancer", "ingress")
	if err := c.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if got := RoutingStatus(context.Background(), c, f); got.Status != metav1.ConditionTrue || got.Reason != v1.ReasonAddressAssigned {
		t.Fatalf("with an address: %s/%s; want True/AddressAssigned", got.Status, got.Reason)
	}
}

func TestAPIsDetectsTheInstalledCRDs(t *testing.T) {
	apiServer(t)
	d, err := discovery.NewDiscoveryClientForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	gw, istio, err := APIs(d)
	if err != nil || !gw || !istio {
		t.Fatalf("APIs = %v, %v, %v; the test server serves both", gw, istio, err)
	}
}
