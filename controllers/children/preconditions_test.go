package children

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// These tests make another controller's write at the moment of the applier's precondition-
// guarded write of a child, through an interceptor in front of the applier's client, against
// a real API server: the disruption controller writes a PDB's status whenever the Pods it
// covers change, an Ingress controller writes its route's address. A conflict is never taken
// for done: the write is not made from the stale read, and the next pass writes on a fresh one.
// docs/reliability.md ("Preconditions and other controllers' writes") lists the sites.

// race calls other before each of the applier's writes of verb ("update" (dry runs excluded),
// "delete") on an object of kind, with the count of such writes so far, from 1.
type race struct {
	verb, kind string
	other      func(n int)
	n          atomic.Int32
}

func (rc *race) client(t *testing.T) client.Client {
	t.Helper()
	c := apiServer(t)
	inner, err := client.NewWithWatch(env.Config(), client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	before := func(verb string, obj client.Object) {
		if rc.other != nil && verb == rc.verb && obj.GetObjectKind().GroupVersionKind().Kind == rc.kind {
			rc.other(int(rc.n.Add(1)))
		}
	}
	return interceptor.NewClient(inner, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			uo := &client.UpdateOptions{}
			uo.ApplyOptions(opts)
			if len(uo.DryRun) == 0 {
				before("update", obj)
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			before("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// disruptionController writes the PDB's status, as the disruption controller does when the
// Pods it covers change; n makes every write a change.
func disruptionController(t *testing.T, c client.Client, ns, name string, n int) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status.ObservedGeneration = pdb.Generation
	pdb.Status.ExpectedPods, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy = int32(n+1), int32(n), int32(n)
	if err := c.Status().Update(context.Background(), pdb); err != nil {
		t.Fatalf("the disruption controller's write: %v", err)
	}
}

// ingressController writes the Ingress's address, as an Ingress controller does.
func ingressController(t *testing.T, c client.Client, ns, name string, n int) {
	t.Helper()
	ing := &networkingv1.Ingress{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ing); err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: fmt.Sprintf("10.0.0.%d", n)}}
	if err := c.Status().Update(context.Background(), ing); err != nil {
		t.Fatalf("the Ingress controller's write: %v", err)
	}
}

func getPDB(t *testing.T, c client.Client, ns, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pdb)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return pdb
}

func applyWith(t *testing.T, c client.Client, f *v1.CelldFleet) (Result, error) {
	t.Helper()
	objs, err := testRenderer.Render(f, testFacts())
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return (&Applier{}).Apply(context.Background(), c, f, objs)
}

// TestAChildDeleteThatMeetsAnotherWriterIsNeverTakenForDone covers apply.go deleteExact, the
// one delete behind prune, RemoveAll and the routing order. Its UID and resourceVersion
// preconditions protect the ownership the delete rests on; on a conflict the child is not
// reported deleted, RemoveAll still counts it, Requeue asks for the next pass, and that pass
// decides on a fresh read: it deletes a child whose status moved, and keeps one that is no
// longer the fleet's.
func TestAChildDeleteThatMeetsAnotherWriterIsNeverTakenForDone(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare converges the fleet and returns the kind and name of the child whose delete
		// meets the other writer
		prepare func(t *testing.T, c client.Client, f *v1.CelldFleet) (kind, name string)
		// other is the other writer's change
		other func(t *testing.T, c client.Client, ns, name string, n int)
		// step is the applier's pass: Apply, or RemoveAll once the members are gone
		removeAll bool
		// deletedNext: the next pass deletes the child
		deletedNext bool
		// sample is the fleet's sample; bucket when empty
		sample string
	}{
		{name: "prune: the disruption controller writes a PDB the chart no longer renders", deletedNext: true,
			prepare: func(t *testing.T, c client.Client, f *v1.CelldFleet) (string, string) {
				return "PodDisruptionBudget", stalePDB(t, c, f)
			},
			other: disruptionController},
		{name: "prune: someone takes the fleet's label off a PDB the chart no longer renders",
			prepare: func(t *testing.T, c client.Client, f *v1.CelldFleet) (string, string) {
				return "PodDisruptionBudget", stalePDB(t, c, f)
			},
			other: func(t *testing.T, c client.Client, ns, name string, _ int) {
				pdb := getPDB(t, c, ns, name)
				delete(pdb.Labels, v1.LabelFleetUID)
				if err := c.Update(context.Background(), pdb); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "RemoveAll: the disruption controller writes the fleet's PDB", removeAll: true, deletedNext: true,
			prepare: func(t *testing.T, c client.Client, f *v1.CelldFleet) (string, string) {
				converge(t, c, f, testFacts())
				return "PodDisruptionBudget", f.Name
			},
			other: disruptionController},
		{name: "routing: the Ingress controller writes the route being removed", deletedNext: true, sample: "routing-ingress",
			prepare: func(t *testing.T, c client.Client, f *v1.CelldFleet) (string, string) {
				converge(t, c, f, testFacts())
				f.Spec.Routing = nil
				f.Generation++
				return "Ingress", f.Name + "-routing"
			},
			other: ingressController},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := apiServer(t)
			ns := newNamespace(t, c)
			sample := tc.sample
			if sample == "" {
				sample = "bucket"
			}
			f := fleetIn(t, sample, ns)
			kind, name := tc.prepare(t, c, f)
			gvk := gvkPDB
			if kind == "Ingress" {
				gvk = gvkIngress
			}
			rc := &race{verb: "delete", kind: kind, other: func(n int) {
				if n == 1 {
					tc.other(t, c, ns, name, n)
				}
			}}
			rcc := rc.client(t)
			pass := func() (Result, int, error) {
				if tc.removeAll {
					remaining, err := (&Applier{}).RemoveAll(ctx, rcc, f)
					return Result{}, remaining, err
				}
				res, err := applyWith(t, rcc, f)
				return res, 0, err
			}

			res, remaining, err := pass()
			if err != nil {
				t.Fatalf("a conflicting delete is not an error of the pass: %v", err)
			}
			if rc.n.Load() != 1 {
				t.Fatalf("setup: the applier deleted %s %s %d times", kind, name, rc.n.Load())
			}
			if slices.Contains(res.Deleted, kind+"/"+name) {
				t.Fatalf("a delete that conflicted was reported done: %v", res.Deleted)
			}
			if tc.removeAll && remaining == 0 {
				t.Fatal("RemoveAll must count a child whose delete conflicted as remaining")
			}
			if !tc.removeAll && !res.Requeue {
				t.Fatal("a delete that conflicted must ask for the next pass")
			}
			if u := live(t, c, gvk, ns, name); u == nil || u.GetDeletionTimestamp() != nil {
				t.Fatal("the child was deleted although its delete conflicted")
			}

			rc.other = nil
			if _, _, err := pass(); err != nil {
				t.Fatal(err)
			}
			u := live(t, c, gvk, ns, name)
			deleted := u == nil || u.GetDeletionTimestamp() != nil
			if deleted != tc.deletedNext {
				t.Fatalf("after a fresh read the child is deleted = %v, want %v", deleted, tc.deletedNext)
			}
		})
	}
}

// stalePDB converges f and creates a PDB of the fleet the chart does not render (an earlier
// release's name), which the next Apply prunes.
func stalePDB(t *testing.T, c client.Client, f *v1.CelldFleet) string {
	t.Helper()
	converge(t, c, f, testFacts())
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name + "-old",
		Labels: map[string]string{v1.LabelFleetUID: string(f.UID)}},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "old"}}}}
	if err := c.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	return pdb.Name
}

// TestARestoreThatMeetsAnotherWriterEndsThePass covers apply.go apply's restore: the update
// that replaces a drifted child carries the read's resourceVersion, and the object it writes is
// merged from the whole live object. The disruption controller's status write between the read
// and the update makes it a conflict, returned: nothing is written from the stale read, and the
// next pass restores the child, the controller's status kept.
func TestARestoreThatMeetsAnotherWriterEndsThePass(t *testing.T) {
	ctx := context.Background()
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	converge(t, c, f, testFacts())
	pdb := getPDB(t, c, ns, f.Name)
	two := intstr.FromInt32(2)
	pdb.Spec.MaxUnavailable = &two // a hand edit
	if err := c.Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	rc := &race{verb: "update", kind: "PodDisruptionBudget", other: func(n int) {
		if n == 1 {
			disruptionController(t, c, ns, f.Name, n)
		}
	}}

	_, err := applyWith(t, rc.client(t), f)
	if !apierrors.IsConflict(err) {
		t.Fatalf("the restore's conflict must end the pass, got %v", err)
	}
	pdb = getPDB(t, c, ns, f.Name)
	if pdb.Spec.MaxUnavailable.IntValue() != 2 || pdb.Status.CurrentHealthy != 1 {
		t.Fatalf("nothing may be written from the stale read: maxUnavailable %s, currentHealthy %d", pdb.Spec.MaxUnavailable, pdb.Status.CurrentHealthy)
	}

	rc.other = nil
	if _, err := applyWith(t, rc.client(t), f); err != nil {
		t.Fatal(err)
	}
	pdb = getPDB(t, c, ns, f.Name)
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Status.CurrentHealthy != 1 {
		t.Fatalf("the next pass restores the PDB and keeps the controller's status: maxUnavailable %s, currentHealthy %d",
			pdb.Spec.MaxUnavailable, pdb.Status.CurrentHealthy)
	}
}

// TestACreateThatFindsItsNameTakenAndThenFreedAsksForTheNextPass: the create of a child meets
// AlreadyExists, and what held the name is gone by the read that follows. The child is not
// reported applied, and Apply asks for the next pass within a second instead of waiting for
// an event that may not come.
func TestACreateThatFindsItsNameTakenAndThenFreedAsksForTheNextPass(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	inner, err := client.NewWithWatch(env.Config(), client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	var taken atomic.Int32
	racing := interceptor.NewClient(inner, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == "PodDisruptionBudget" && taken.Add(1) == 1 {
				// somebody held the name at the create and deleted it before the read
				return apierrors.NewAlreadyExists(policyv1.Resource("poddisruptionbudgets"), obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	objs, err := testRenderer.Render(f, testFacts())
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Applier{}).Apply(context.Background(), racing, f, objs)
	if err != nil {
		t.Fatal(err)
	}
	if taken.Load() != 1 {
		t.Fatalf("the PDB was created %d times, want the one refused create", taken.Load())
	}
	if slices.Contains(res.Applied, "PodDisruptionBudget/"+f.Name) {
		t.Fatalf("the PDB whose create found the name taken is reported applied: %v", res.Applied)
	}
	if !res.Requeue {
		t.Fatal("Apply did not ask for the next pass after a create found its name taken and then freed")
	}
	if res, err = (&Applier{}).Apply(context.Background(), racing, f, objs); err != nil || !slices.Contains(res.Applied, "PodDisruptionBudget/"+f.Name) {
		t.Fatalf("the next pass did not create the PDB: applied %v, %v", res.Applied, err)
	}
}
