package children

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func ingressRouting() *v1.RoutingSpec {
	return &v1.RoutingSpec{
		Hostnames: []string{"app.example.com"},
		Source:    v1.RoutingSource{Namespace: "ingress-nginx", PodLabels: map[string]v1.LabelValue{"app": "ingress"}},
		Ingress:   &v1.IngressRouting{ClassName: "nginx", Annotations: map[string]string{"a.example.com/keep": "1", "b.example.com/drop": "2"}},
	}
}

func TestSwitchingGatewayToIngressDeletesTheHTTPRouteBeforeCreatingTheIngress(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-gateway", ns)
	name := f.Name + "-routing"
	converge(t, c, f, testFacts())
	setFinalizer(t, c, gvkHTTPRoute, ns, name, true) // the route controller holds it briefly

	f.Spec.Routing = ingressRouting()
	f.Generation++
	res := converge(t, c, f, testFacts())
	if !res.Requeue || res.Routing == nil || res.Routing.Reason != v1.ReasonRemovingRoute {
		t.Fatalf("while the old route disappears: result %+v; want a requeue with RemovingRoute", res)
	}
	if !slices.Contains(res.Deleted, "HTTPRoute/"+name) {
		t.Errorf("the HTTPRoute was not deleted: %v", res.Deleted)
	}
	if live(t, c, gvkIngress, ns, name) != nil {
		t.Fatal("the Ingress was created while the HTTPRoute still existed")
	}
	if live(t, c, gvkNetworkPolicy, ns, name) == nil {
		t.Fatal("the routing policy was removed during the switch")
	}
	// Still there: a second pass waits without deleting again.
	res = converge(t, c, f, testFacts())
	if !res.Requeue || len(res.Deleted) != 0 || live(t, c, gvkIngress, ns, name) != nil {
		t.Fatalf("second pass while the route is still deleting: %+v", res)
	}

	setFinalizer(t, c, gvkHTTPRoute, ns, name, false)
	eventually(t, "the HTTPRoute is gone", gone(c, gvkHTTPRoute, ns, name))
	res = converge(t, c, f, testFacts())
	if res.Requeue || !slices.Contains(res.Applied, "Ingress/"+name) {
		t.Fatalf("after the HTTPRoute disappeared: %+v; want the Ingress created", res)
	}
	ing := mustExist(t, c, gvkIngress, ns, name)
	if got := ing.GetAnnotations()[v1.AnnotationRoutingAnnotationKeys]; got != "a.example.com/keep,b.example.com/drop" {
		t.Errorf("routing-annotation-keys = %q", got)
	}
}

func TestRemovingRoutingDeletesTheRouteThenItsPolicy(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	name := f.Name + "-routing"
	converge(t, c, f, testFacts())
	setFinalizer(t, c, gvkIngress, ns, name, true)

	f.Spec.Routing = nil
	res := converge(t, c, f, testFacts())
	if !slices.Equal(res.Deleted, []string{"Ingress/" + name}) || !res.Requeue {
		t.Fatalf("first pass deleted %v (requeue %v); want only the Ingress, then wait", res.Deleted, res.Requeue)
	}
	if live(t, c, gvkNetworkPolicy, ns, name) == nil {
		t.Fatal("the routing policy was deleted before the route disappeared")
	}
	setFinalizer(t, c, gvkIngress, ns, name, false)
	eventually(t, "the Ingress is gone", gone(c, gvkIngress, ns, name))
	res = converge(t, c, f, testFacts())
	if !slices.Equal(res.Deleted, []string{"NetworkPolicy/" + name}) {
		t.Fatalf("second pass deleted %v; want the routing policy", res.Deleted)
	}
	if cond := RoutingStatus(context.Background(), c, f); cond.Reason != v1.ReasonRoutingDisabled || cond.Status != metav1.ConditionTrue {
		t.Errorf("RoutingReady = %s/%s; want True/Disabled", cond.Status, cond.Reason)
	}
}

func TestFleetDeletionClosesRoutingAtOnce(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	converge(t, c, f, testFacts())
	f.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	res := converge(t, c, f, testFacts())
	if !slices.Contains(res.Deleted, "Ingress/"+f.Name+"-routing") {
		t.Fatalf("deletion started but the route stayed: %+v", res)
	}
}

func TestARemovedManagedAnnotationIsPrunedWhileAControllerAnnotationStays(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	f.Spec.Routing = ingressRouting()
	name := f.Name + "-routing"
	converge(t, c, f, testFacts())

	// The Ingress controller records something of its own.
	ing := mustExist(t, c, gvkIngress, ns, name)
	patch := []byte(`{"metadata":{"annotations":{"controller.example.com/status":"synced"}}}`)
	if err := c.Patch(context.Background(), ing, client.RawPatch("application/merge-patch+json", patch), client.FieldOwner("ingress-controller")); err != nil {
		t.Fatal(err)
	}

	delete(f.Spec.Routing.Ingress.Annotations, "b.example.com/drop")
	converge(t, c, f, testFacts())
	ann := mustExist(t, c, gvkIngress, ns, name).GetAnnotations()
	if _, ok := ann["b.example.com/drop"]; ok {
		t.Error("a managed annotation removed from the spec is still on the Ingress")
	}
	if ann["a.example.com/keep"] != "1" {
		t.Error("a managed annotation still in the spec was removed")
	}
	if ann["controller.example.com/status"] != "synced" {
		t.Error("the controller's own annotation was removed")
	}
	if ann[v1.AnnotationRoutingAnnotationKeys] != "a.example.com/keep" {
		t.Errorf("routing-annotation-keys = %q", ann[v1.AnnotationRoutingAnnotationKeys])
	}
}

func TestAManagedAnnotationAlsoSetByAnotherManagerIsStillPruned(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	f.Spec.Routing = ingressRouting()
	name := f.Name + "-routing"
	converge(t, c, f, testFacts())
	// Another field manager (an older release, a migration tool) applied the same key and
	// value, so it co-owns the field and server-side apply alone would keep it.
	co := &unstructured.Unstructured{}
	co.SetGroupVersionKind(gvkIngress)
	co.SetName(name)
	co.SetNamespace(ns)
	co.SetAnnotations(map[string]string{"b.example.com/drop": "2"})
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(co), client.FieldOwner("celld-operator-v0")); err != nil {
		t.Fatal(err)
	}
	delete(f.Spec.Routing.Ingress.Annotations, "b.example.com/drop")
	converge(t, c, f, testFacts())
	if _, ok := mustExist(t, c, gvkIngress, ns, name).GetAnnotations()["b.example.com/drop"]; ok {
		t.Error("a co-owned managed annotation removed from the spec survived")
	}
}

func TestGatewayModeWithoutTheGatewayAPIKeepsTheExistingRoute(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	name := f.Name + "-routing"
	converge(t, c, f, testFacts())
	before := mustExist(t, c, gvkIngress, ns, name).GetResourceVersion()

	g := fleetIn(t, "routing-gateway", ns)
	f.Spec.Routing = g.Spec.Routing
	facts := testFacts()
	facts.GatewayAPIInstalled = false
	res := converge(t, c, f, facts)
	if res.Routing == nil || res.Routing.Reason != v1.ReasonGatewayAPIUnavailable || res.Routing.Status != metav1.ConditionFalse {
		t.Fatalf("RoutingReady = %+v; want False/GatewayAPIUnavailable", res.Routing)
	}
	if got := mustExist(t, c, gvkIngress, ns, name).GetResourceVersion(); got != before || live(t, c, gvkNetworkPolicy, ns, name) == nil {
		t.Error("a failed preflight changed the existing route or policy")
	}
}

func TestAForeignRouteIsReportedAndNeverAdopted(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	name := f.Name + "-routing"
	foreignIngress := &unstructured.Unstructured{}
	foreignIngress.SetGroupVersionKind(gvkIngress)
	foreignIngress.SetName(name)
	foreignIngress.SetNamespace(ns)
	_ = unstructured.SetNestedField(foreignIngress.Object, "other", "spec", "ingressClassName")
	_ = unstructured.SetNestedSlice(foreignIngress.Object, []any{map[string]any{"host": "other.example.com"}}, "spec", "rules")
	if err := c.Create(context.Background(), foreignIngress); err != nil {
		t.Fatal(err)
	}
	res := converge(t, c, f, testFacts())
	if res.Routing == nil || res.Routing.Reason != v1.ReasonServiceConflict || !strings.Contains(res.Routing.Message, "Ingress "+ns+"/"+name) {
		t.Fatalf("RoutingReady = %+v; want ServiceConflict naming the Ingress", res.Routing)
	}
	if live(t, c, gvkNetworkPolicy, ns, name) != nil {
		t.Error("the routing policy was created although the route is not ours")
	}
	if mustExist(t, c, gvkIngress, ns, name).GetResourceVersion() != foreignIngress.GetResourceVersion() {
		t.Error("the foreign Ingress was changed")
	}
	if len(res.Applied) != 4 {
		t.Errorf("a routing conflict must not block the other children: applied %v", res.Applied)
	}
}
