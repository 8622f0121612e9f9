package children

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

var testRenderer = func() *Renderer {
	r, err := NewFleetRenderer()
	if err != nil {
		panic(err)
	}
	return r
}()

// converge renders and applies once, failing the test on any error.
func converge(t *testing.T, c client.Client, f *v1.CelldFleet, facts OperatorFacts) Result {
	t.Helper()
	res, err := apply(t, c, f, facts)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return res
}

func apply(t *testing.T, c client.Client, f *v1.CelldFleet, facts OperatorFacts) (Result, error) {
	t.Helper()
	objs, err := testRenderer.Render(f, facts)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return (&Applier{}).Apply(context.Background(), c, f, objs)
}

func live(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := getLive(context.Background(), c, gvk, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustExist(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := live(t, c, gvk, ns, name)
	if u == nil {
		t.Fatalf("%s %s/%s does not exist", gvk.Kind, ns, name)
	}
	return u
}

func gone(c client.Client, gvk schema.GroupVersionKind, ns, name string) func() (bool, error) {
	return func() (bool, error) {
		u, err := getLive(context.Background(), c, gvk, ns, name)
		return u == nil, err
	}
}

// setFinalizer adds or removes a finalizer the way a route controller would, so a deletion
// waits for it.
func setFinalizer(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string, on bool) {
	t.Helper()
	u := mustExist(t, c, gvk, ns, name)
	if on {
		u.SetFinalizers([]string{"example.com/route-cleanup"})
	} else {
		u.SetFinalizers(nil)
	}
	if err := c.Update(context.Background(), u, client.FieldOwner("route-controller")); err != nil {
		t.Fatal(err)
	}
}

func TestApplyCreatesEveryChildLabelledWithOneFieldManagerAndASettledFleetWritesNothing(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-gateway", ns)
	f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{ControlPlaneNamespace: "istio-system", ApplicationAccess: v1.ApplicationAccessAllowAll}}
	facts := testFacts()

	res := converge(t, c, f, facts)
	want := []string{"NetworkPolicy/" + f.Name, "PodDisruptionBudget/" + f.Name, "Service/" + f.Name, "Service/" + f.Name + "-peers",
		"AuthorizationPolicy/" + f.Name + "-mesh", "NetworkPolicy/" + f.Name + "-routing", "HTTPRoute/" + f.Name + "-routing"}
	for _, w := range want {
		if !slices.Contains(res.Applied, w) {
			t.Errorf("first apply did not create %s (applied %v)", w, res.Applied)
		}
	}
	for _, w := range want {
		kind, name, _ := strings.Cut(w, "/")
		gvk := map[string]schema.GroupVersionKind{"NetworkPolicy": gvkNetworkPolicy, "PodDisruptionBudget": gvkPDB, "Service": gvkService,
			"AuthorizationPolicy": gvkAuthorizationPolicy, "HTTPRoute": gvkHTTPRoute}[kind]
		u := mustExist(t, c, gvk, ns, name)
		if u.GetLabels()[v1.LabelFleetUID] != string(f.UID) {
			t.Errorf("%s lacks the fleet UID label: %v", w, u.GetLabels())
		}
		if len(u.GetManagedFields()) == 0 {
			t.Errorf("%s has no managed fields", w)
		}
		for _, m := range u.GetManagedFields() {
			if m.Manager != FieldOwner {
				t.Errorf("%s has field manager %s (%s); every child must be written only as %s", w, m.Manager, m.Operation, FieldOwner)
			}
		}
	}

	counting := &countingClient{Client: c}
	res = converge(t, counting, f, facts)
	if n := counting.writes.Load(); n != 0 || res.Writes() != 0 {
		t.Fatalf("a settled fleet performed %d API writes (result %+v); it must perform none", n, res)
	}
	if res.Unchanged != len(want) {
		t.Errorf("unchanged = %d, want %d", res.Unchanged, len(want))
	}

	// A hand edit is drift: the hash still matches, the fields do not, so it is converged.
	np := mustExist(t, c, gvkNetworkPolicy, ns, f.Name)
	if err := unstructured.SetNestedSlice(np.Object, []any{}, "spec", "egress"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(context.Background(), np, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	res = converge(t, c, f, facts)
	if !slices.Equal(res.Applied, []string{"NetworkPolicy/" + f.Name}) {
		t.Fatalf("after a hand edit of the policy, applied %v; want only the policy", res.Applied)
	}
	egress, _, _ := unstructured.NestedSlice(mustExist(t, c, gvkNetworkPolicy, ns, f.Name).Object, "spec", "egress")
	if len(egress) < 5 {
		t.Errorf("the edited policy was not restored: %d egress rules", len(egress))
	}
}

func TestAForeignSameNamedServiceIsRefusedAndLeftUntouched(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name, Namespace: ns, Labels: map[string]string{"app": "someone-else"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if err := c.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	counting := &countingClient{Client: c}
	res, err := apply(t, counting, f, testFacts())
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Reason != v1.ReasonInfrastructureBlocked {
		t.Fatalf("apply over a foreign Service returned %v; want a BlockedError with InfrastructureBlocked", err)
	}
	if !strings.Contains(blocked.Message, "Service "+ns+"/"+f.Name) || !strings.Contains(blocked.Object, f.Name) {
		t.Errorf("the message must name the Service: %q", blocked.Message)
	}
	if res.Routing == nil || res.Routing.Reason != v1.ReasonServiceConflict {
		t.Errorf("RoutingReady = %+v; want ServiceConflict", res.Routing)
	}
	if n := counting.writes.Load(); n != 0 {
		t.Errorf("the operator wrote %d objects while a child was foreign; it must write none", n)
	}
	after := mustExist(t, c, gvkService, ns, f.Name)
	if after.GetResourceVersion() != svc.ResourceVersion || after.GetLabels()[v1.LabelFleetUID] != "" {
		t.Errorf("the foreign Service was changed")
	}
}

// emptyCache reads like a namespace cache that holds none of the fleet's objects yet (a new
// fleet, or an unlabelled object the cache never holds) and writes to the API server.
type emptyCache struct{ *countingClient }

func (emptyCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
}

// readCounter counts the reads of the API server the applier makes and the 404s among them.
type readCounter struct {
	client.Reader
	reads, missing atomic.Int64
}

func (r *readCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads.Add(1)
	err := r.Reader.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		r.missing.Add(1)
	}
	return err
}

// TestANewFleetsChildrenAreCreatedWithoutReadingWhatIsNotThere: with a cache that does not
// hold them, every child is created straight away (no read of the API server, so no 404); a
// foreign unlabelled Service at the fleet's name, which no cache of the fleet's objects can
// show, is found by its create (AlreadyExists), read once, named and left untouched.
func TestANewFleetsChildrenAreCreatedWithoutReadingWhatIsNotThere(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	objs := func(f *v1.CelldFleet) []*unstructured.Unstructured {
		out, err := testRenderer.Render(f, testFacts())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	f := fleetIn(t, "bucket", ns)
	direct := &readCounter{Reader: c}
	a := &Applier{Direct: direct}
	res, err := a.Apply(context.Background(), emptyCache{&countingClient{Client: c}}, f, objs(f))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != len(objs(f)) {
		t.Errorf("created %v; want every rendered child", res.Applied)
	}
	if n := direct.reads.Load(); n != 0 {
		t.Errorf("creating a new fleet's children read the API server %d times (%d of them 404); it must read nothing", n, direct.missing.Load())
	}

	g := fleetIn(t, "routing-ingress", ns)
	g.Name = "taken"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: ns, Labels: map[string]string{"app": "someone-else"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if err := c.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	direct = &readCounter{Reader: c}
	a = &Applier{Direct: direct}
	writes := &countingClient{Client: c}
	res, err = a.Apply(context.Background(), emptyCache{writes}, g, objs(g))
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Reason != v1.ReasonInfrastructureBlocked || !strings.Contains(blocked.Message, "Service "+ns+"/"+g.Name) {
		t.Fatalf("apply over a foreign Service returned %v; want InfrastructureBlocked naming Service %s/%s", err, ns, g.Name)
	}
	if res.Routing == nil || res.Routing.Reason != v1.ReasonServiceConflict {
		t.Errorf("RoutingReady = %+v; want ServiceConflict", res.Routing)
	}
	if n, m := direct.reads.Load(), direct.missing.Load(); n != 1 || m != 0 {
		t.Errorf("the conflict cost %d reads, %d of them 404; want exactly the one read of the object its create found", n, m)
	}
	after := mustExist(t, c, gvkService, ns, g.Name)
	if after.GetResourceVersion() != svc.ResourceVersion || after.GetLabels()[v1.LabelFleetUID] != "" {
		t.Errorf("the foreign Service was changed")
	}
	if slices.Contains(res.Applied, "Service/"+g.Name) {
		t.Errorf("the foreign Service is reported applied: %v", res.Applied)
	}

	// The fleet's own children, which a lagging cache does not show yet, are converged, not
	// refused: their creates find them, and the read shows they are the fleet's.
	res, err = (&Applier{Direct: c}).Apply(context.Background(), emptyCache{&countingClient{Client: c}}, f, objs(f))
	if err != nil || res.Writes() != 0 || res.Unchanged != len(objs(f)) {
		t.Errorf("a pass over the fleet's own uncached children returned %+v, %v; want every child unchanged", res, err)
	}
}

func TestAnObjectControlledByAnotherOwnerIsNotAdopted(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	pdb := &unstructured.Unstructured{}
	pdb.SetGroupVersionKind(gvkPDB)
	pdb.SetName(f.Name)
	pdb.SetNamespace(ns)
	pdb.SetLabels(map[string]string{v1.LabelFleetUID: string(f.UID)})
	pdb.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other", UID: types.UID("0f0f"), Controller: new(true)}})
	_ = unstructured.SetNestedField(pdb.Object, int64(0), "spec", "maxUnavailable")
	if err := c.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	_, err := apply(t, c, f, testFacts())
	var blocked *BlockedError
	if !errors.As(err, &blocked) || !strings.Contains(blocked.Message, "controlled by Deployment other") {
		t.Fatalf("apply returned %v; want a refusal naming the other controller", err)
	}
}

func TestPruneDeletesOnlyOwnedChildrenOfChartKinds(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	converge(t, c, f, testFacts())
	// An owned Service the chart does not render (an older release's name), and a ConfigMap
	// with the fleet label: only the first is the chart's to prune.
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: f.Name + "-old", Namespace: ns, Labels: map[string]string{v1.LabelFleetUID: string(f.UID)}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: f.Name + "-notes", Namespace: ns, Labels: map[string]string{v1.LabelFleetUID: string(f.UID)}}},
	} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	res := converge(t, c, f, testFacts())
	if !slices.Equal(res.Deleted, []string{"Service/" + f.Name + "-old"}) {
		t.Fatalf("pruned %v; want only the stale Service", res.Deleted)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: f.Name + "-notes"}, cm); err != nil {
		t.Fatalf("a labelled object of a kind the chart never renders was touched: %v", err)
	}
}

func TestMeshWithoutIstioAppliesTheRestAndBlocks(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "istio-mesh", ns)
	facts := testFacts()
	facts.IstioInstalled = false
	res, err := apply(t, c, f, facts)
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Reason != v1.ReasonInfrastructureBlocked || !strings.Contains(blocked.Message, "install Istio 1.22 or later") {
		t.Fatalf("apply returned %v; want InfrastructureBlocked asking to install Istio 1.22 or later", err)
	}
	if len(res.Applied) != 4 {
		t.Errorf("applied %v; the Services, policy and PDB should still be applied", res.Applied)
	}
}

// TestEveryRenderedChildIsCreatedExactlyAsRendered: every kind the chart can render is created
// under strict field validation, so a rendered field the API does not know fails the create
// instead of being dropped, and the stored object carries every rendered field as rendered.
func TestEveryRenderedChildIsCreatedExactlyAsRendered(t *testing.T) {
	goldens, err := filepath.Glob("testdata/golden/*.yaml")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden renders: %v", err)
	}
	c := apiServer(t)
	kinds := map[string]bool{}
	for _, path := range goldens {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(raw), "---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			j, err := yaml.YAMLToJSON([]byte(doc)) // as Render decodes the chart's output
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			want := &unstructured.Unstructured{}
			if err := want.UnmarshalJSON(j); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			id := fmt.Sprintf("%s: %s %s", filepath.Base(path), want.GetKind(), want.GetName())
			want.SetNamespace(newNamespace(t, c))
			got := want.DeepCopy()
			if err := c.Create(context.Background(), got, client.FieldOwner(FieldOwner), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			// What the server added (defaults, identity) is "+"; a rendered field lost or changed
			// is "-" or "~".
			if lost := notKept("", want.Object, got.Object); len(lost) > 0 {
				t.Errorf("%s: the stored object lost or changed rendered fields: %v", id, lost)
			}
			kinds[want.GetKind()] = true
		}
	}
	if len(kinds) != len(pruneKinds)+len(routeKinds) {
		t.Errorf("the goldens render %v; every kind the chart can render must be covered", kinds)
	}
	// The validation is strict: a field the API does not know is refused, not dropped.
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "strict", "namespace": newNamespace(t, c)},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(80)}}, "portz": "typo"}}}
	if err := c.Create(context.Background(), bad, client.FieldOwner(FieldOwner), client.FieldValidation(metav1.FieldValidationStrict)); err == nil || !strings.Contains(err.Error(), "portz") {
		t.Errorf("a create with an unknown field returned %v; want a strict-validation refusal naming it", err)
	}
}

// notKept names the paths of want whose value got does not hold (got may hold more: defaults).
func notKept(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, notKept(path+"."+k, v, g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, notKept(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{path}
	}
	return nil
}

// TestACreatedChildIsRememberedAsItsRenderingSoTheNextPassAsksNothing: the API server's answer
// to each create is what the applier remembers as verified, so the pass after the creates
// needs neither a write nor a dry-run for any kind.
func TestACreatedChildIsRememberedAsItsRenderingSoTheNextPassAsksNothing(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	gateway := fleetIn(t, "routing-gateway", ns)
	gateway.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{ControlPlaneNamespace: "istio-system", ApplicationAccess: v1.ApplicationAccessAllowAll}}
	mixed := testFacts()
	mixed.MeshMixed = true // renders the PeerAuthentication too
	ingress := fleetIn(t, "routing-ingress", ns)

	a := &Applier{}
	for _, fl := range []struct {
		f     *v1.CelldFleet
		facts OperatorFacts
	}{{gateway, mixed}, {ingress, testFacts()}} {
		objs, err := testRenderer.Render(fl.f, fl.facts)
		if err != nil {
			t.Fatal(err)
		}
		created, err := a.Apply(context.Background(), c, fl.f, objs)
		if err != nil || len(created.Applied) != len(objs) {
			t.Fatalf("first pass of %s: created %v of %d children, %v", fl.f.Name, created.Applied, len(objs), err)
		}
		counting := &countingClient{Client: c}
		res, err := a.Apply(context.Background(), counting, fl.f, objs)
		if err != nil {
			t.Fatal(err)
		}
		if w, d := counting.writes.Load(), counting.dryRuns.Load(); w != 0 || d != 0 {
			t.Errorf("the pass after creating %v sent %d writes and %d dry-runs (result %+v); the answers to the creates must be remembered as the rendering", created.Applied, w, d, res)
		}
	}
}
