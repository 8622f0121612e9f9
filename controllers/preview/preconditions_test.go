package preview

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// These tests make another writer's write at the moment of the preview reconciler's
// precondition-guarded or optimistic-lock write, through an interceptor in front of its
// clients, against a real API server: the fleet reconciler and the application observer write
// the generated fleet's status all the time, a person or a GitOps tool labels a preview. The
// outcome is written after the fresh state was verified, or the conflict ends the pass and the
// next pass decides again; never a silent success. docs/reliability.md ("Preconditions and
// other controllers' writes") lists the sites.

// race calls other before each of the reconciler's writes of verb ("update" (dry runs
// excluded), "patch", "delete") on an object match accepts, with the count of such writes so
// far, from 1.
type race struct {
	verb  string
	match func(client.Object) bool
	other func(n int)
	n     atomic.Int32
}

func (rc *race) client() client.WithWatch {
	before := func(verb string, obj client.Object) {
		if rc.other != nil && verb == rc.verb && rc.match(obj) {
			rc.other(int(rc.n.Add(1)))
		}
	}
	return interceptor.NewClient(unwatched{admin}, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			uo := &client.UpdateOptions{}
			uo.ApplyOptions(opts)
			if len(uo.DryRun) == 0 {
				before("update", obj)
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			before("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			before("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// unwatched is a client that does not watch: the reconciler never does.
type unwatched struct{ client.Client }

func (unwatched) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the preview reconciler does not watch")
}

func isFleet(o client.Object) bool   { _, ok := o.(*v1.CelldFleet); return ok }
func isPreview(o client.Object) bool { _, ok := o.(*v1.CelldPreview); return ok }

// fleetStatus writes the generated fleet's status, as the fleet reconciler does after each of
// its passes; n makes every write a change.
func fleetStatus(t *testing.T, key types.NamespacedName, n int) {
	t.Helper()
	f := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), key, f); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&f.Status.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue,
		Reason: "Provisioning", Message: fmt.Sprintf("pass %d", n), ObservedGeneration: f.Generation})
	if err := admin.Status().Update(context.Background(), f); err != nil {
		t.Fatalf("the fleet reconciler's status write: %v", err)
	}
}

// labelPreview labels the preview, as a person or a GitOps tool does.
func labelPreview(t *testing.T, p *v1.CelldPreview, n int) {
	t.Helper()
	live := get(t, p)
	metav1.SetMetaDataLabel(&live.ObjectMeta, "example.com/touched", fmt.Sprint(n))
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatalf("the other writer's label: %v", err)
	}
}

func result(r *Reconciler, p *v1.CelldPreview) (ctrl.Result, error) {
	return r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
}

func expectDecidedAgain(t *testing.T, res ctrl.Result, err error) {
	t.Helper()
	if err != nil || res.RequeueAfter != time.Second {
		t.Fatalf("a conflict must end the pass and ask for a fresh one within a second, got %+v, %v", res, err)
	}
}

// TestARestoreOfTheGeneratedFleetMeetsItsStatusWriters covers act.go restore. The
// restore rests on the fleet's spec alone, while the fleet reconciler and the application
// observer write its status all the time: a conflict is verified on a fresh read and the spec
// written again on it, within the pass. It used to end the pass, and a fleet whose status
// kept moving went unrestored.
func TestARestoreOfTheGeneratedFleetMeetsItsStatusWriters(t *testing.T) {
	cases := []struct {
		name string
		// other is the other writer's change at the reconciler's n-th update of the fleet
		other func(t *testing.T, key types.NamespacedName, n int)
		// restored: in the hooked pass; restoredNext: by the next pass
		restored, restoredNext bool
	}{
		{name: "the fleet reconciler writes the fleet's status", restored: true,
			other: func(t *testing.T, key types.NamespacedName, n int) {
				if n == 1 {
					fleetStatus(t, key, n)
				}
			}},
		{name: "the status moves at every attempt", restoredNext: true,
			other: func(t *testing.T, key types.NamespacedName, n int) { fleetStatus(t, key, n) }},
		{name: "someone takes the preview's label off the fleet",
			other: func(t *testing.T, key types.NamespacedName, n int) {
				if n != 1 {
					return
				}
				f := &v1.CelldFleet{}
				if err := admin.Get(context.Background(), key, f); err != nil {
					t.Fatal(err)
				}
				delete(f.Labels, v1.LabelPreviewUID)
				if err := admin.Update(context.Background(), f); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r, _ := newReconciler()
			ns := namespace(t)
			createParent(t, ns, "development", ns+"-pool")
			p := createPreview(t, ns, "pr-1", "development", 0)
			reconcileOnce(t, r, p)
			reconcileOnce(t, r, p)
			key := types.NamespacedName{Namespace: ns, Name: FleetName(get(t, p))}
			f := &v1.CelldFleet{}
			if err := admin.Get(ctx, key, f); err != nil {
				t.Fatal(err)
			}
			f.Spec.Replicas = new(int32(3)) // a hand edit
			if err := admin.Update(ctx, f); err != nil {
				t.Fatal(err)
			}
			rc := &race{verb: "update", match: isFleet, other: func(n int) { tc.other(t, key, n) }}
			r.Direct = rc.client()
			replicas := func() int32 {
				if err := admin.Get(ctx, key, f); err != nil {
					t.Fatal(err)
				}
				return *f.Spec.Replicas
			}

			res, err := result(r, p)
			switch {
			case tc.restored:
				if err != nil || replicas() != 1 {
					t.Fatalf("the restore must be verified on a fresh read and made in the pass: %+v, %v, replicas %d", res, err, replicas())
				}
				if c := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionProgressing); c == nil || c.Message != "pass 1" {
					t.Fatalf("the fleet reconciler's status was lost: %+v", c)
				}
			case tc.restoredNext:
				expectDecidedAgain(t, res, err)
				if replicas() != 3 {
					t.Fatal("a restore whose every attempt conflicted was made anyway")
				}
				rc.other = nil
				reconcileOnce(t, r, p)
				if replicas() != 1 {
					t.Fatal("the next pass must restore the fleet")
				}
			default:
				if err != nil || replicas() != 3 {
					t.Fatalf("a fleet that is no longer the preview's is not restored: %+v, %v, replicas %d", res, err, replicas())
				}
			}
		})
	}
}

// TestAPreviewsOwnWritesMeetAnotherWriter covers act.go's addFinalizer, recordIntent (the intent
// annotation written before the fleet is created) and release (the finalizer's removal):
// optimistic-lock merge patches of the preview, which a person or a GitOps tool labels. The
// conflict ends the pass, nothing is written from the stale read (no fleet is created without
// its intent recorded), and the next pass writes. It also covers deleteFleet: a delete bound to
// the fleet's UID only, because the fleet's status moves all the time and what the delete
// rests on (the preview's label) was read from the API server just before.
func TestAPreviewsOwnWritesMeetAnotherWriter(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare makes the preview the hooked pass finds
		prepare func(t *testing.T, r *Reconciler, ns string) *v1.CelldPreview
		verb    string
		match   func(client.Object) bool
		at      int
		// done says whether the reconciler's write is made
		done func(t *testing.T, p *v1.CelldPreview) bool
		// through: the write goes through the other writer's change (deleteFleet)
		through bool
	}{
		{name: "finalizer", verb: "patch", match: isPreview, at: 1,
			prepare: func(t *testing.T, r *Reconciler, ns string) *v1.CelldPreview {
				return createPreview(t, ns, "pr-1", "development", 0)
			},
			done: func(t *testing.T, p *v1.CelldPreview) bool {
				return controllerutil.ContainsFinalizer(get(t, p), v1.FinalizerPreviewProtection)
			}},
		{name: "create's intent", verb: "patch", match: isPreview, at: 2,
			prepare: func(t *testing.T, r *Reconciler, ns string) *v1.CelldPreview {
				return createPreview(t, ns, "pr-1", "development", 0)
			},
			done: func(t *testing.T, p *v1.CelldPreview) bool {
				recorded := get(t, p).Annotations[v1.AnnotationPreviewFleet] != ""
				if n := len(fleets(t, p.Namespace)); !recorded && n != 0 || n > 1 {
					t.Fatalf("a fleet is created only after its intent is recorded, and once: intent %v, %d fleets", recorded, n)
				}
				return recorded
			}},
		{name: "deleting's finalizer removal", verb: "patch", match: isPreview, at: 1,
			prepare: func(t *testing.T, r *Reconciler, ns string) *v1.CelldPreview {
				p := createPreview(t, ns, "pr-1", "development", 0)
				reconcileOnce(t, r, p)
				reconcileOnce(t, r, p)
				key := types.NamespacedName{Namespace: ns, Name: FleetName(get(t, p))}
				if err := admin.Delete(ctx, &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
					t.Fatal(err)
				}
				if err := admin.Delete(ctx, get(t, p)); err != nil {
					t.Fatal(err)
				}
				return p
			},
			done: func(t *testing.T, p *v1.CelldPreview) bool {
				return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(p), &v1.CelldPreview{}))
			}},
		{name: "deleteFleet", verb: "delete", match: isFleet, at: 1, through: true,
			prepare: func(t *testing.T, r *Reconciler, ns string) *v1.CelldPreview {
				p := createPreview(t, ns, "pr-1", "development", 0)
				reconcileOnce(t, r, p)
				reconcileOnce(t, r, p)
				if err := admin.Delete(ctx, get(t, p)); err != nil { // held by its own finalizer
					t.Fatal(err)
				}
				return p
			},
			done: func(t *testing.T, p *v1.CelldPreview) bool { return len(fleets(t, p.Namespace)) == 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newReconciler()
			ns := namespace(t)
			createParent(t, ns, "development", ns+"-pool")
			p := tc.prepare(t, r, ns)
			rc := &race{verb: tc.verb, match: tc.match, other: func(n int) {
				if n != tc.at {
					return
				}
				if tc.through {
					fleetStatus(t, types.NamespacedName{Namespace: ns, Name: FleetName(get(t, p))}, n)
					return
				}
				labelPreview(t, p, n)
			}}
			c := rc.client()
			r.Client, r.Direct = c, c

			res, err := result(r, p)
			if rc.n.Load() < int32(tc.at) {
				t.Fatalf("setup: the reconciler made %d such writes, the test races the %d-th", rc.n.Load(), tc.at)
			}
			if tc.through {
				if err != nil || !tc.done(t, p) {
					t.Fatalf("a delete bound to the UID alone goes through a status write: %+v, %v", res, err)
				}
				return
			}
			expectDecidedAgain(t, res, err)
			if got := rc.n.Load(); got != int32(tc.at) {
				t.Fatalf("the pass must end at the conflicting write; it made %d such writes", got)
			}
			if tc.done(t, p) {
				t.Fatal("the write from the stale read was made (or taken as made) although it conflicted")
			}
			if get(t, p).Labels["example.com/touched"] != fmt.Sprint(tc.at) {
				t.Fatal("the other writer's label was lost")
			}

			rc.other = nil
			if _, err := result(r, p); err != nil {
				t.Fatal(err)
			}
			if !tc.done(t, p) {
				t.Fatal("the next pass must make the write on its fresh read")
			}
		})
	}
}
