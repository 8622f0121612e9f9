package children

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/tests/handedit"
)

// additions are real optional fields of each child kind, placed where a person widening access
// or tuning by hand would put them: inside the rules and items the chart renders.
var additions = map[schema.GroupVersionKind][]handedit.Addition{
	gvkNetworkPolicy: {
		{Path: "spec.ingress[*].from[*]", Key: "namespaceSelector", Value: map[string]any{}},
		{Path: "spec.egress[*].to[*]", Key: "namespaceSelector", Value: map[string]any{}},
		{Path: "spec.ingress[*].ports[*]", Key: "endPort", Value: int64(65535)},
		{Path: "spec.egress[*].ports[*]", Key: "endPort", Value: int64(65535)},
		{Path: "spec.ingress[*]", Key: "from", Value: []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}},
		{Path: "spec.podSelector", Key: "matchExpressions", Value: []any{map[string]any{"key": "x", "operator": "Exists"}}},
	},
	gvkService: {
		{Path: "spec", Key: "externalIPs", Value: []any{"192.0.2.10"}},
		{Path: "spec", Key: "sessionAffinity", Value: "ClientIP"},
		{Path: "spec", Key: "publishNotReadyAddresses", Value: true},
		{Path: "spec.ports[*]", Key: "appProtocol", Value: "http"},
		{Path: "spec", Key: "externalName", Value: "elsewhere.example.com"},
	},
	gvkPDB: {
		{Path: "spec", Key: "unhealthyPodEvictionPolicy", Value: "AlwaysAllow"},
		{Path: "spec.selector", Key: "matchExpressions", Value: []any{map[string]any{"key": "x", "operator": "Exists"}}},
	},
	gvkHTTPRoute: {
		{Path: "spec.rules[*].backendRefs[*]", Key: "weight", Value: int64(5)},
		{Path: "spec.rules[*]", Key: "filters", Value: []any{map[string]any{"type": "RequestHeaderModifier",
			"requestHeaderModifier": map[string]any{"set": []any{map[string]any{"name": "X-Hand", "value": "1"}}}}}},
		{Path: "spec.rules[*].matches[*]", Key: "headers", Value: []any{map[string]any{"name": "X-Hand", "value": "1"}}},
	},
	gvkIngress: {
		{Path: "spec", Key: "defaultBackend", Value: map[string]any{"service": map[string]any{"name": "elsewhere", "port": map[string]any{"number": int64(80)}}}},
		{Path: "spec", Key: "tls", Value: []any{map[string]any{"hosts": []any{"app.example.com"}, "secretName": "hand"}}},
	},
	gvkAuthorizationPolicy: {
		{Path: "spec.rules[*].from[*].source", Key: "namespaces", Value: []any{"elsewhere"}},
		{Path: "spec.rules[*].to[*].operation", Key: "paths", Value: []any{"/admin"}},
		{Path: "spec.rules[*]", Key: "when", Value: []any{map[string]any{"key": "request.headers[x-hand]", "values": []any{"1"}}}},
	},
	gvkPeerAuthentication: {
		{Path: "spec", Key: "portLevelMtls", Value: map[string]any{"8081": map[string]any{"mode": "DISABLE"}}},
	},
}

// ownLabels are label keys the chart sets on every child. The fleet-UID label is left out on
// purpose: a child without it is no longer the fleet's, and is refused, never adopted.
var ownLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of"}

// TestAnyHandEditOfAChildComesBackAndTheNextPassWritesNothing is the drift property test of
// the static children: for every kind the chart renders, random hand edits of every shape
// (through Update as kubectl edit does, and through a foreign server-side apply manager as a
// GitOps tool does) are applied to a real API server; one pass of the applier must bring the
// object back to the operator's rendering in every field the operator renders, leave edits of
// labels and annotations it does not set alone, and the pass after it must send no request but
// reads. CELLD_DRIFT_SEED replays a run; CELLD_DRIFT_EDITS sets the edits per child.
func TestAnyHandEditOfAChildComesBackAndTheNextPassWritesNothing(t *testing.T) {
	c := apiServer(t)
	rng, perChild := handedit.Seed(t, 24)

	ns := newNamespace(t, c)
	gateway := fleetIn(t, "routing-gateway", ns)
	gateway.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{ControlPlaneNamespace: "istio-system", ApplicationAccess: v1.ApplicationAccessPolicies}}
	gateway.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
	ingress := fleetIn(t, "routing-ingress", ns)
	ingress.Spec.Routing = ingressRouting()
	gatewayFacts := testFacts()
	gatewayFacts.MeshMixed = true // a joining fleet: the PeerAuthentication is rendered too

	a := &Applier{}
	type child struct {
		gvk   schema.GroupVersionKind
		name  string
		fleet *v1.CelldFleet
		facts OperatorFacts
	}
	var kids []child
	for _, fl := range []struct {
		f     *v1.CelldFleet
		facts OperatorFacts
	}{{gateway, gatewayFacts}, {ingress, testFacts()}} {
		objs, err := testRenderer.Render(fl.f, fl.facts)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := a.Apply(context.Background(), c, fl.f, objs); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range objs {
			kids = append(kids, child{o.GroupVersionKind(), o.GetName(), fl.f, fl.facts})
		}
	}
	kinds := map[string]bool{}
	for _, k := range kids {
		kinds[k.gvk.Kind] = true
	}
	for _, want := range []schema.GroupVersionKind{gvkService, gvkNetworkPolicy, gvkPDB, gvkHTTPRoute, gvkIngress, gvkAuthorizationPolicy, gvkPeerAuthentication} {
		if !kinds[want.Kind] {
			t.Fatalf("the test fleets render no %s; the property would not cover it", want.Kind)
		}
	}

	var tally handedit.Tally
	for _, k := range kids {
		objs, err := testRenderer.Render(k.fleet, k.facts)
		if err != nil {
			t.Fatal(err)
		}
		handedit.Property{
			Name:      fmt.Sprintf("%s %s", k.gvk.Kind, k.name),
			Read:      func() *unstructured.Unstructured { return mustExist(t, c, k.gvk, ns, k.name) },
			Additions: additions[k.gvk],
			OwnLabels: ownLabels,
			Pass: func() (int64, int64) {
				counting := &countingClient{Client: c}
				if _, err := a.Apply(context.Background(), counting, k.fleet, objs); err != nil {
					t.Fatalf("apply %s %s: %v", k.gvk.Kind, k.name, err)
				}
				return counting.writes.Load(), counting.dryRuns.Load()
			},
		}.Check(t, c, rng, perChild, &tally)
	}
	t.Log(tally)
	for _, op := range []string{handedit.OpAdd, handedit.OpRemove, handedit.OpScalar, handedit.OpForeignLabel, handedit.OpOwnLabel} {
		if tally.Applied[op] == 0 {
			t.Errorf("no %s edit was applied; the run did not cover that shape (raise CELLD_DRIFT_EDITS or change the seed)", op)
		}
	}
}

// TestANetworkPolicyWidenedInsideARuleIsRestored: the two widenings the hash-and-key-presence
// check used to miss, each a key added inside an existing rule: an empty namespaceSelector
// beside the fleet peer's podSelector (8081 from every namespace), and an endPort on a port
// (a range up to 65535).
func TestANetworkPolicyWidenedInsideARuleIsRestored(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "persistent", ns)
	a := &Applier{}
	objs, err := testRenderer.Render(f, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Apply(context.Background(), c, f, objs); err != nil {
			t.Fatal(err)
		}
	}
	rendering, err := drift.Content(mustExist(t, c, gvkNetworkPolicy, ns, f.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range []struct {
		what string
		path []string
		key  string
		val  any
	}{
		{"namespaceSelector {} beside the fleet peer", []string{"spec", "ingress", "0", "from", "0"}, "namespaceSelector", map[string]any{}},
		{"endPort 65535 on the peer port", []string{"spec", "ingress", "0", "ports", "0"}, "endPort", int64(65535)},
	} {
		np := mustExist(t, c, gvkNetworkPolicy, ns, f.Name)
		target := np.Object
		var cur any = target
		for _, p := range edit.path {
			switch x := cur.(type) {
			case map[string]any:
				cur = x[p]
			case []any:
				i, _ := strconv.Atoi(p)
				cur = x[i]
			}
		}
		cur.(map[string]any)[edit.key] = edit.val
		if err := c.Update(context.Background(), np, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatalf("%s: %v", edit.what, err)
		}
		widened, _ := drift.Content(mustExist(t, c, gvkNetworkPolicy, ns, f.Name))
		if drift.Diff(rendering, widened) == nil {
			t.Fatalf("%s: the edit did not change the live policy", edit.what)
		}
		counting := &countingClient{Client: c}
		res, err := a.Apply(context.Background(), counting, f, objs)
		if err != nil {
			t.Fatal(err)
		}
		restored, _ := drift.Content(mustExist(t, c, gvkNetworkPolicy, ns, f.Name))
		if d := drift.Diff(rendering, restored); d != nil || counting.writes.Load() != 1 {
			t.Fatalf("%s: after one pass (%d writes, applied %v) the policy still differs at %q", edit.what, counting.writes.Load(), res.Applied, d)
		}
	}
}

// TestAChildFromAnEarlierReleaseLosesTheFleetAsItsController: children carry no owner reference
// (a cascade would delete them before the members are gone); one an earlier release set is
// removed on the next pass. (A reference to any other owner makes the child foreign, seed 001:
// TestSeedsALabelledObjectWithAForeignOwnerIsNeitherAdoptedNorPruned.)
func TestAChildFromAnEarlierReleaseLosesTheFleetAsItsController(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "persistent", ns)
	objs, err := testRenderer.Render(f, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if len(o.GetOwnerReferences()) != 0 {
			t.Fatalf("%s %s is rendered with owner references %v", o.GetKind(), o.GetName(), o.GetOwnerReferences())
		}
	}
	a := &Applier{}
	if _, err := a.Apply(context.Background(), c, f, objs); err != nil {
		t.Fatal(err)
	}
	np := mustExist(t, c, gvkNetworkPolicy, ns, f.Name)
	np.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet", Name: f.Name, UID: f.UID, Controller: new(true), BlockOwnerDeletion: new(false)},
	})
	if err := c.Update(context.Background(), np, client.FieldOwner("celld-operator-v0")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(context.Background(), c, f, objs); err != nil {
		t.Fatal(err)
	}
	refs := mustExist(t, c, gvkNetworkPolicy, ns, f.Name).GetOwnerReferences()
	if len(refs) != 0 {
		t.Fatalf("owner references = %v; want none", refs)
	}
}
