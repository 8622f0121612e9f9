package children

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestSeedsALabelledObjectWithAForeignOwnerIsNeitherAdoptedNorPruned: seed 001, "Objects
// without the fleet's UID label, or with owner references, are refused". An object carrying the
// fleet's UID label and a non-controller owner reference to something else is not the fleet's:
// prune and RemoveAll leave it alone (it is not the operator's to delete), and Foreign names
// the owner, so the refusal says whom to ask. The fleet's own reference stays accepted.
func TestSeedsALabelledObjectWithAForeignOwnerIsNeitherAdoptedNorPruned(t *testing.T) {
	ctx := context.Background()
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	converge(t, c, f, testFacts())
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keeper"}}
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	stale := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: f.Name + "-old", Namespace: ns, Labels: map[string]string{v1.LabelFleetUID: string(f.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}},
	}
	if err := c.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	why := Foreign(stale, f)
	if !strings.Contains(why, "owner reference to ConfigMap keeper") {
		t.Fatalf("Foreign = %q; want it to name the owner ConfigMap keeper", why)
	}
	res := converge(t, c, f, testFacts())
	if len(res.Deleted) != 0 {
		t.Fatalf("pruned %v; a Service with a foreign owner is not the fleet's to delete", res.Deleted)
	}
	if _, err := (&Applier{}).RemoveAll(ctx, c, f); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stale), &corev1.Service{}); err != nil {
		t.Fatalf("the Service with a foreign owner was deleted: %v", err)
	}

	own := stale.DeepCopy()
	own.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet", Name: f.Name, UID: f.UID}}
	if why := Foreign(own, f); why != "" {
		t.Fatalf("a reference to the fleet itself is the fleet's own: %q", why)
	}
}

// TestSeedsRemainingNamesARouteAFinalizerHolds: once the members are gone, deletion waits for
// the children, and says which (a route held by another controller's finalizer, with the
// finalizer), so a fleet that does not go away tells whom it waits for.
func TestSeedsRemainingNamesARouteAFinalizerHolds(t *testing.T) {
	ctx := context.Background()
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "routing-ingress", ns)
	converge(t, c, f, testFacts())
	name := routingName(f)
	mustExist(t, c, gvkIngress, ns, name)
	setFinalizer(t, c, gvkIngress, ns, name, true)
	t.Cleanup(func() { setFinalizer(t, c, gvkIngress, ns, name, false) })

	a := &Applier{}
	left, err := a.Remaining(ctx, c, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the first pass deletes the children; they still exist")
	}
	left, err = a.Remaining(ctx, c, f)
	if err != nil {
		t.Fatal(err)
	}
	want := "Ingress " + ns + "/" + name + " (being deleted, held by finalizers "
	found := false
	for _, l := range left {
		found = found || strings.HasPrefix(l, want)
	}
	if !found {
		t.Fatalf("remaining %v; want %s…", left, want)
	}
	if n, err := a.RemoveAll(ctx, c, f); err != nil || n == 0 {
		t.Fatalf("RemoveAll counts %d children (%v); the held route is still there", n, err)
	}
}
