package children

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
	seed := uint64(1)
	if s, err := strconv.ParseUint(os.Getenv("CELLD_DRIFT_SEED"), 10, 64); err == nil {
		seed = s
	}
	perChild := 24
	if n, err := strconv.Atoi(os.Getenv("CELLD_DRIFT_EDITS")); err == nil && n > 0 {
		perChild = n
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("seed %d (CELLD_DRIFT_SEED=%d replays this run), %d edits per child", seed, seed, perChild)

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

	content := func(u *unstructured.Unstructured) map[string]any {
		m, err := drift.Content(u)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	applied, refused, noop := map[string]int{}, 0, 0
	for _, k := range kids {
		for i := range perChild {
			before := mustExist(t, c, k.gvk, ns, k.name)
			rendering := content(before)
			op := handedit.Ops[rng.IntN(len(handedit.Ops))]
			edited := before.DeepCopy()
			edit, ok := handedit.Random(rng, edited, op, additions[k.gvk], ownLabels)
			if !ok {
				continue
			}
			viaApply := rng.IntN(2) == 0
			if err := handedit.Write(context.Background(), c, edited, viaApply); err != nil {
				refused++ // the API server refused the edit: not an edit
				continue
			}
			after := mustExist(t, c, k.gvk, ns, k.name)
			if drift.Diff(rendering, content(after)) == nil {
				noop++ // the server normalised the edit away
				continue
			}
			applied[op]++
			what := fmt.Sprintf("%s %s edit %d (%s via %s: %s)", k.gvk.Kind, k.name, i, op, handedit.Via(viaApply), edit.What)
			objs, err := testRenderer.Render(k.fleet, k.facts)
			if err != nil {
				t.Fatal(err)
			}
			counting := &countingClient{Client: c}
			res, err := a.Apply(context.Background(), counting, k.fleet, objs)
			if err != nil {
				t.Fatalf("%s: apply: %v", what, err)
			}
			restored := content(mustExist(t, c, k.gvk, ns, k.name))
			if edit.Foreign {
				if counting.writes.Load() != 0 {
					t.Fatalf("%s: an edit of metadata the operator does not set caused %d writes (%v)", what, counting.writes.Load(), res.Applied)
				}
				if drift.Diff(content(after), restored) != nil {
					t.Fatalf("%s: the operator changed an object whose only edit was someone else's metadata: %q", what, drift.Diff(content(after), restored))
				}
			} else if d := drift.Diff(rendering, restored); d != nil {
				t.Fatalf("%s: not restored to the rendering; still differs at %q (applied %v)", what, d, res.Applied)
			}
			again := &countingClient{Client: c}
			if _, err := a.Apply(context.Background(), again, k.fleet, objs); err != nil {
				t.Fatal(err)
			}
			if w, dr := again.writes.Load(), again.dryRuns.Load(); w != 0 || dr != 0 {
				t.Fatalf("%s: the pass after the repair sent %d writes and %d dry-runs; a restored child must cost nothing", what, w, dr)
			}
		}
	}
	total := 0
	for _, n := range applied {
		total += n
	}
	t.Logf("%d edits applied and repaired %v; %d refused by the API server, %d normalised away", total, applied, refused, noop)
	for _, op := range []string{handedit.OpAdd, handedit.OpRemove, handedit.OpScalar, handedit.OpForeignLabel, handedit.OpOwnLabel} {
		if applied[op] == 0 {
			t.Errorf("no %s edit was applied; the run did not cover that shape (raise CELLD_DRIFT_EDITS or change the seed)", op)
		}
	}
}
