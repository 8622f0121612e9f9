package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	acv1 "github.com/celld/celld-operator/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// These tests prove what each of the operator's precondition-guarded or optimistic-lock
// writes does when another controller writes the same object between the operator's read and
// its write: the kubelet and the scheduler on Pods, the PV binder, the PVC protection and the
// unused-since controllers on claims, the StatefulSet controller on StatefulSets, the
// application observer on the fleet's status, a seed executor on a reservation's status, a
// user anywhere. The other controller's write is made by the test at exactly that moment,
// through an interceptor in front of the operator's client, against a real API server. The
// outcome is always one of: written (or deleted) after the fresh state was verified, or the
// conflict returned so the next pass decides again, with nothing wrongly done. Never a silent
// success. docs/reliability.md ("Preconditions and other controllers' writes") lists the
// sites.

// race is a client whose writes pass through an interceptor: before each of the operator's
// writes of verb ("update", "patch", "delete", "status update", "status patch"; dry runs
// excluded) on an object match accepts, other is called with the count of such writes so far,
// from 1. other makes the other controller's write, through another client.
type race struct {
	verb  string
	match func(client.Object) bool
	other func(n int)
	n     atomic.Int32
}

func (rc *race) client(t *testing.T) client.WithWatch {
	t.Helper()
	inner, err := client.NewWithWatch(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(inner, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			uo := &client.UpdateOptions{}
			uo.ApplyOptions(opts)
			if len(uo.DryRun) == 0 {
				rc.before("update", obj)
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			rc.before("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			rc.before("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			rc.before(sub+" update", obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			rc.before(sub+" patch", obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

func (rc *race) before(verb string, obj client.Object) {
	if rc.other == nil || verb != rc.verb || !rc.match(obj) {
		return
	}
	rc.other(int(rc.n.Add(1)))
}

// stop ends the race: the operator's next writes meet nobody.
func (rc *race) stop() { rc.other = nil }

func isPod(o client.Object) bool         { _, ok := o.(*corev1.Pod); return ok }
func isClaim(o client.Object) bool       { _, ok := o.(*corev1.PersistentVolumeClaim); return ok }
func isStatefulSet(o client.Object) bool { _, ok := o.(*appsv1.StatefulSet); return ok }
func isFleet(o client.Object) bool       { _, ok := o.(*v1.CelldFleet); return ok }
func isReservation(o client.Object) bool { _, ok := o.(*v1.CelldStorageReservation); return ok }

func first(n int) bool { return n == 1 }

func nth(want int) func(int) bool { return func(n int) bool { return n == want } }

// when calls do only at the writes at accepts.
func when(at func(int) bool, do func(n int)) func(int) {
	return func(n int) {
		if at(n) {
			do(n)
		}
	}
}

// edit reads obj's current state through admin, applies change and writes it back, in its
// status when status is set.
func edit[T client.Object](t *testing.T, admin client.Client, key client.ObjectKey, obj T, status bool, change func(T)) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Get(ctx, key, obj); err != nil {
		t.Fatalf("the other controller's read: %v", err)
	}
	change(obj)
	var err error
	if status {
		err = admin.Status().Update(ctx, obj)
	} else {
		err = admin.Update(ctx, obj)
	}
	if err != nil {
		t.Fatalf("the other controller's write: %v", err)
	}
}

// kubelet writes a Pod's status, as the kubelet does when a container restarts or readiness
// moves: n makes every write a change.
func kubelet(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
	t.Helper()
	edit(t, admin, key, &corev1.Pod{}, true, func(p *corev1.Pod) {
		setPodCondition(p, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse,
			Reason: "ContainersNotReady", Message: fmt.Sprintf("containers with unready status: [celld] (restart %d)", n), LastTransitionTime: metav1.Now()})
	})
}

// scheduler records that a gated Pod waits for its gates, as the scheduler does right after the
// Pod is created.
func scheduler(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
	t.Helper()
	edit(t, admin, key, &corev1.Pod{}, true, func(p *corev1.Pod) {
		setPodCondition(p, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "SchedulingGated", Message: fmt.Sprintf("Scheduling is blocked due to non-empty scheduling gates (%d)", n), LastTransitionTime: metav1.Now()})
	})
}

func setPodCondition(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// observer applies ApplicationConverged to the fleet's status with the application observer's
// field manager, as it does after each collection; n makes every write a change.
func observer(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
	t.Helper()
	cond := metav1ac.Condition().WithType(v1.ConditionApplicationConverged).WithStatus(metav1.ConditionTrue).
		WithReason("Converged").WithMessage(fmt.Sprintf("collection %d", n)).WithLastTransitionTime(metav1.Now())
	cfg := acv1.CelldFleet(key.Name, key.Namespace).WithStatus(acv1.CelldFleetStatus().WithConditions(cond))
	if err := admin.Status().Apply(context.Background(), cfg, client.FieldOwner("celld-operator-observer"), client.ForceOwnership); err != nil {
		t.Fatalf("the observer's status write: %v", err)
	}
}

func pass(r *Reconciler, key client.ObjectKey) (ctrl.Result, error) {
	return r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
}

// expectDecidedAgain: the pass met the conflict and ended, asking for a fresh pass in a
// second, without an error and without writing status from the state that is gone.
func expectDecidedAgain(t *testing.T, res ctrl.Result, err error) {
	t.Helper()
	if err != nil || res.RequeueAfter != time.Second {
		t.Fatalf("a conflict must end the pass and ask for a fresh one within a second, got %+v, %v", res, err)
	}
}

func getPod(t *testing.T, admin client.Client, key client.ObjectKey) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	err := admin.Get(context.Background(), key, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func memberPod(ns, name string, labels map[string]string, gated bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: "celld"}}}}
	if gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v1.SchedulingGateBucketZone}}
	}
	return p
}

// TestAZoneGateIsReleasedOnAFreshReadWhenTheSchedulerWroteThePod covers act.go
// releaseZoneGate. The scheduler writes a gated Pod's status (PodScheduled=False,
// SchedulingGated) right after the StatefulSet controller creates it, so the operator's
// update from its read conflicts. That conflict used to be skipped like a missing Pod: the gate
// stayed, and the pass reported nothing.
func TestAZoneGateIsReleasedOnAFreshReadWhenTheSchedulerWroteThePod(t *testing.T) {
	cases := []struct {
		name string
		// other is the other writer's change at the operator's n-th update of the Pod
		other func(t *testing.T, admin client.Client, key client.ObjectKey, n int)
		// released: the gate is lifted and the member pinned to its zone by this pass;
		// reported: the pass reports it could not release the gate
		released, reported bool
		// kept: the Pod at the name is left exactly as the other writer left it
		kept bool
	}{
		{name: "the scheduler records SchedulingGated", released: true,
			other: func(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
				if n == 1 {
					scheduler(t, admin, key, n)
				}
			}},
		{name: "someone labels the Pod", released: true,
			other: func(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
				if n == 1 {
					edit(t, admin, key, &corev1.Pod{}, false, func(p *corev1.Pod) { p.Labels["example.com/team"] = "storage" })
				}
			}},
		{name: "the status moves at every attempt", reported: true,
			other: func(t *testing.T, admin client.Client, key client.ObjectKey, n int) { scheduler(t, admin, key, n) }},
		{name: "the Pod is replaced meanwhile", kept: true,
			other: func(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
				if n != 1 {
					return
				}
				old := getPod(t, admin, key)
				if err := admin.Delete(context.Background(), old); err != nil { // never scheduled: gone at once
					t.Fatal(err)
				}
				if err := admin.Create(context.Background(), memberPod(key.Namespace, key.Name, old.Labels, true)); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "someone else lifts the gate", kept: true,
			other: func(t *testing.T, admin client.Client, key client.ObjectKey, n int) {
				if n == 1 {
					edit(t, admin, key, &corev1.Pod{}, false, func(p *corev1.Pod) { p.Spec.SchedulingGates = nil })
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			f := corpus.Bucket()
			f.Namespace, f.Name, f.UID = ns, "ordered", types.UID("uid-"+ns)
			f.Spec.BucketWorkload = v1.BucketWorkloadOrdered
			s := newScope(f, time.Now())
			key := client.ObjectKey{Namespace: ns, Name: v1.MemberName(f.Name, 1)}
			pod := memberPod(ns, key.Name, map[string]string{v1.LabelFleetUID: string(f.UID)}, true)
			if err := admin.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			s.pods = []corev1.Pod{*getPod(t, admin, key)} // the pass's read
			rc := &race{verb: "update", match: isPod, other: func(n int) { tc.other(t, admin, key, n) }}
			r.Direct = rc.client(t)
			var before *corev1.Pod
			if tc.kept {
				rc.other = func(n int) { tc.other(t, admin, key, n); before = getPod(t, admin, key) }
			}

			release := []lifecycle.ZoneRelease{{Member: 1, Pod: lifecycle.Ref{Name: key.Name, UID: s.pods[0].UID}, Zone: lifecycle.OrderedZone(f.Spec.Placement.Zones, 1)}}
			if err := r.releaseZoneGates(ctx, s, release); err != nil {
				t.Fatal(err)
			}

			live := getPod(t, admin, key)
			gated := lifecycle.ZoneGated(live)
			zone := live.Spec.NodeSelector[zoneLabel]
			switch {
			case tc.released:
				if gated || zone != "us-east-1b" || s.find.ZoneGate != nil {
					t.Fatalf("the gate must be lifted on the fresh read and the member pinned to us-east-1b: gates %v, zone %q, finding %+v",
						live.Spec.SchedulingGates, zone, s.find.ZoneGate)
				}
				if tc.name == "someone labels the Pod" && live.Labels["example.com/team"] != "storage" {
					t.Fatalf("the other writer's label was lost: %v", live.Labels)
				}
			case tc.reported:
				if !gated || s.find.ZoneGate == nil || !strings.Contains(s.find.ZoneGate.Message, "Could not release the zone gate of member "+key.Name) ||
					!strings.Contains(s.find.ZoneGate.Message, "kept moving") {
					t.Fatalf("a gate the operator could not lift must be reported, not skipped: gates %v, finding %+v", live.Spec.SchedulingGates, s.find.ZoneGate)
				}
			case tc.kept:
				if live.UID != before.UID || live.ResourceVersion != before.ResourceVersion {
					t.Fatalf("the Pod the other writer left was written by a decision made on another Pod: %s@%s, then %s@%s",
						before.UID, before.ResourceVersion, live.UID, live.ResourceVersion)
				}
				if s.find.ZoneGate != nil || s.soon != time.Second {
					t.Fatalf("the next pass must come within a second and decide on what it finds: finding %+v, soon %s", s.find.ZoneGate, s.soon)
				}
			}
		})
	}
}

// TestAFleetClaimIsDeletedOnlyWhileItStillCarriesTheFleetsLabel covers act.go deleteFleetClaim
// deleteFleetClaim, the claim deletes of a deleted fleet. They carried a UID precondition
// only, so a claim relabelled after the pass's read (someone keeping that disk) was deleted
// anyway. With the resourceVersion precondition, the writes of the PV binder, the PVC
// protection and the unused-since controllers conflict; they are verified and the delete sent
// again.
func TestAFleetClaimIsDeletedOnlyWhileItStillCarriesTheFleetsLabel(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*corev1.PersistentVolumeClaim)
		status  bool
		always  bool
		deleted bool
		failed  bool
	}{
		{name: "the unused-since controller writes the claim's status", status: true, deleted: true,
			change: func(c *corev1.PersistentVolumeClaim) {
				c.Status.Conditions = append(c.Status.Conditions, corev1.PersistentVolumeClaimCondition{
					Type: "Unused", Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
			}},
		{name: "the PV binder annotates the claim", deleted: true,
			change: func(c *corev1.PersistentVolumeClaim) {
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, "pv.kubernetes.io/bind-completed", "yes")
			}},
		{name: "someone takes the fleet's label off to keep the disk",
			change: func(c *corev1.PersistentVolumeClaim) { delete(c.Labels, v1.LabelFleetUID) }},
		{name: "the status keeps moving at every attempt", status: true, always: true, failed: true,
			change: func(c *corev1.PersistentVolumeClaim) {
				c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Unused", Status: corev1.ConditionTrue,
					Message: time.Now().String(), LastTransitionTime: metav1.Now()}}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			f := createFleet(t, admin, ns, "gone", ns+"-gone", nil)
			live := &v1.CelldFleet{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
				t.Fatal(err)
			}
			s := newScope(live, time.Now())
			key := client.ObjectKey{Namespace: ns, Name: v1.ClaimName(f.Name, 0)}
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name,
				Labels: map[string]string{v1.LabelFleetUID: string(live.UID)}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
			if err := admin.Create(ctx, claim); err != nil {
				t.Fatal(err)
			}
			s.claims = []corev1.PersistentVolumeClaim{*claim} // the pass's read
			rc := &race{verb: "delete", match: isClaim, other: func(n int) {
				if n == 1 || tc.always {
					edit(t, admin, key, &corev1.PersistentVolumeClaim{}, tc.status, tc.change)
				}
			}}
			r.Direct = rc.client(t)

			err := r.deleteClaims(ctx, s)
			gone := claimGone(t, admin, key)
			switch {
			case tc.failed:
				if !apierrors.IsConflict(err) || gone {
					t.Fatalf("a claim whose resourceVersion never stops moving must end the pass with the conflict and stay, got %v (gone %v)", err, gone)
				}
			case err != nil:
				t.Fatal(err)
			case gone != tc.deleted:
				t.Fatalf("claim deleted = %v, want %v: a conflict is verified, never taken for success, and a claim that is no longer the fleet's stays", gone, tc.deleted)
			}
		})
	}
}

// claimGone: the claim is gone or being deleted (the PVC protection admission gives every
// claim a finalizer, which no controller removes here).
func claimGone(t *testing.T, admin client.Client, key client.ObjectKey) bool {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{}
	err := admin.Get(context.Background(), key, c)
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.DeletionTimestamp != nil
}

// deletingFleet is a fleet with a workload (two passes), then deleted: its finalizer holds it.
func deletingFleet(t *testing.T, r *Reconciler, admin client.Client, name string) (*v1.CelldFleet, client.ObjectKey) {
	t.Helper()
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, name, ns+"-"+name, nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), &appsv1.StatefulSet{}); err != nil {
		t.Fatalf("setup: the fleet's StatefulSet: %v", err)
	}
	if err := admin.Delete(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f, client.ObjectKeyFromObject(f)
}

// TestTheWorkloadDeleteIsDecidedAgainWhenTheStatefulSetMoved covers act.go deleteWorkload:
// its UID and resourceVersion preconditions protect the ownership the delete rests on (the
// fleet's label, no other controller). A conflict ends the pass, and the next pass decides on
// a fresh read: it deletes a StatefulSet whose status moved, and leaves one relabelled away.
func TestTheWorkloadDeleteIsDecidedAgainWhenTheStatefulSetMoved(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*appsv1.StatefulSet)
		status  bool
		deleted bool
	}{
		{name: "the StatefulSet controller writes status", status: true, deleted: true,
			change: func(s *appsv1.StatefulSet) {
				s.Status.ObservedGeneration = s.Generation
				s.Status.Replicas, s.Status.CurrentReplicas = 1, 1
			}},
		{name: "someone takes the fleet's label off",
			change: func(s *appsv1.StatefulSet) { delete(s.Labels, v1.LabelFleetUID) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			f, key := deletingFleet(t, r, admin, "wl")
			rc := &race{verb: "delete", match: isStatefulSet, other: func(n int) {
				if n == 1 {
					edit(t, admin, key, &appsv1.StatefulSet{}, tc.status, tc.change)
				}
			}}
			r.Direct = rc.client(t)

			res, err := pass(r, key)
			expectDecidedAgain(t, res, err)
			sts := &appsv1.StatefulSet{}
			if err := admin.Get(context.Background(), key, sts); err != nil || sts.DeletionTimestamp != nil {
				t.Fatalf("the StatefulSet must stay after the conflicting delete: %v %v", err, sts.DeletionTimestamp)
			}

			rc.stop()
			_, _ = pass(r, key)
			err = admin.Get(context.Background(), key, sts)
			deleted := apierrors.IsNotFound(err) || (err == nil && sts.DeletionTimestamp != nil)
			if deleted != tc.deleted {
				t.Fatalf("after a fresh read the StatefulSet is deleted = %v, want %v (fleet %s)", deleted, tc.deleted, f.Name)
			}
		})
	}
}

// TestAnOptimisticLockOnTheFleetEndsThePassAndTheNextPassWrites covers the CelldFleet's
// optimistic-lock merge patches: plan.go finalizer, act.go rememberMesh,
// report.go dropLegacyConditions and act.go's finalizer removal (deletionStep). A merge patch replaces a
// list whole (finalizers, conditions), so the lock keeps another writer's entry; the
// application observer writes the fleet's status after every collection and moves the
// resourceVersion. The conflict ends the pass (the status write's: an error, retried with
// backoff), nothing is written from the stale read, and the next pass writes.
func TestAnOptimisticLockOnTheFleetEndsThePassAndTheNextPassWrites(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// prepare makes the fleet the hooked pass finds; verb is the write that meets the
		// observer
		prepare func(t *testing.T, r *Reconciler, admin client.Client, ns string) client.ObjectKey
		verb    string
		// done says whether the operator's write is in the live fleet (nil: gone)
		done func(f *v1.CelldFleet) bool
		// reportErr: the conflict comes from the status write, which returns it
		reportErr bool
	}{
		{name: "observe.go finalizer", verb: "patch",
			prepare: func(t *testing.T, r *Reconciler, admin client.Client, ns string) client.ObjectKey {
				return client.ObjectKeyFromObject(createFleet(t, admin, ns, "fin", ns+"-fin", nil))
			},
			done: func(f *v1.CelldFleet) bool {
				return controllerutil.ContainsFinalizer(f, v1.FinalizerLifecycleProtection)
			}},
		{name: "act.go rememberMesh", verb: "patch",
			prepare: func(t *testing.T, r *Reconciler, admin client.Client, ns string) client.ObjectKey {
				f := createFleet(t, admin, ns, "mesh", ns+"-mesh", nil)
				reconcileOnce(t, r, f)
				edit(t, admin, client.ObjectKeyFromObject(f), &v1.CelldFleet{}, false, func(f *v1.CelldFleet) {
					f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{ControlPlaneNamespace: "istio-system", ApplicationAccess: v1.ApplicationAccessAllowAll}}
				})
				return client.ObjectKeyFromObject(f)
			},
			done: func(f *v1.CelldFleet) bool { return f.Annotations[v1.AnnotationIstioControlPlane] == "istio-system" }},
		{name: "report.go dropLegacyConditions", verb: "status patch", reportErr: true,
			prepare: func(t *testing.T, r *Reconciler, admin client.Client, ns string) client.ObjectKey {
				f := createFleet(t, admin, ns, "legacy", ns+"-legacy", nil)
				reconcileOnce(t, r, f)
				edit(t, admin, client.ObjectKeyFromObject(f), &v1.CelldFleet{}, true, func(f *v1.CelldFleet) {
					f.Status.Conditions = append(f.Status.Conditions, metav1.Condition{Type: "LifecycleBlocked", Status: metav1.ConditionFalse,
						Reason: "Earlier", Message: "written by v0.0.5", LastTransitionTime: metav1.Now()})
				})
				return client.ObjectKeyFromObject(f)
			},
			done: func(f *v1.CelldFleet) bool {
				return meta.FindStatusCondition(f.Status.Conditions, "LifecycleBlocked") == nil
			}},
		{name: "act.go deletionStep: the finalizer removal", verb: "patch",
			prepare: func(t *testing.T, r *Reconciler, admin client.Client, ns string) client.ObjectKey {
				f := createFleet(t, admin, ns, "bye", ns+"-bye", func(f *v1.CelldFleet) {
					f.Finalizers = []string{v1.FinalizerLifecycleProtection} // nothing of it was created yet
				})
				if err := admin.Delete(ctx, f); err != nil {
					t.Fatal(err)
				}
				return client.ObjectKeyFromObject(f)
			},
			done: func(f *v1.CelldFleet) bool { return f == nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			key := tc.prepare(t, r, admin, ns)
			rc := &race{verb: tc.verb, match: isFleet, other: func(n int) { observer(t, admin, key, n) }}
			c := rc.client(t)
			r.Client, r.Direct = c, c
			live := func() *v1.CelldFleet {
				f := &v1.CelldFleet{}
				if err := admin.Get(ctx, key, f); apierrors.IsNotFound(err) {
					return nil
				} else if err != nil {
					t.Fatal(err)
				}
				return f
			}

			res, err := pass(r, key)
			if tc.reportErr {
				if !apierrors.IsConflict(err) {
					t.Fatalf("the status write's conflict must be returned for a retry, got %+v, %v", res, err)
				}
			} else {
				expectDecidedAgain(t, res, err)
			}
			f := live()
			if f == nil || tc.done(f) {
				t.Fatal("the write from the stale read was made (or taken as made) although it conflicted")
			}
			if meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged) == nil {
				t.Fatal("the observer's status write was lost")
			}

			rc.stop()
			if _, err := pass(r, key); err != nil {
				t.Fatal(err)
			}
			f = live()
			if !tc.done(f) {
				t.Fatalf("the next pass must make the write on its fresh read, got %+v", f)
			}
			if f != nil && meta.FindStatusCondition(f.Status.Conditions, v1.ConditionApplicationConverged) == nil {
				t.Fatal("the observer's status write was lost by the next pass")
			}
		})
	}
}

// TestARecreateOrForceDeleteMeetsTheKubeletsStatusWrite covers act.go act. DeletePod
// (MemberRecreated) rests on the Pod's readiness and revision, which are its status: the
// resourceVersion precondition makes a kubelet write since the confirmation read a conflict,
// returned, so the next pass decides again on the new status. ForceDeletePod rests on the Pod
// being stuck terminating, which no status write undoes: its UID precondition only lets a
// kubelet write pass, and still refuses another Pod at the name.
func TestARecreateOrForceDeleteMeetsTheKubeletsStatusWrite(t *testing.T) {
	cases := []struct {
		name    string
		action  lifecycle.Action
		replace bool
		deleted bool
	}{
		{name: "DeletePod after the kubelet wrote the Pod's status", action: lifecycle.DeletePod},
		{name: "ForceDeletePod after the kubelet wrote the Pod's status", action: lifecycle.ForceDeletePod, deleted: true},
		{name: "ForceDeletePod after the Pod was replaced", action: lifecycle.ForceDeletePod, replace: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			f := createFleet(t, admin, ns, "heal", ns+"-heal", nil)
			s := newScope(f, time.Now())
			key := client.ObjectKey{Namespace: ns, Name: v1.MemberName(f.Name, 1)}
			if err := admin.Create(ctx, memberPod(ns, key.Name, map[string]string{v1.LabelFleetUID: "x"}, false)); err != nil {
				t.Fatal(err)
			}
			read := getPod(t, admin, key)
			d := lifecycle.Decision{Action: tc.action, Ordinal: 1, Pod: lifecycle.Ref{Name: key.Name, UID: read.UID},
				Reason: v1.ReasonLifecycleProgress, Message: "healing " + key.Name}
			if tc.action == lifecycle.DeletePod {
				d.Pod.ResourceVersion = read.ResourceVersion
			}
			var successor types.UID
			rc := &race{verb: "delete", match: isPod, other: func(n int) {
				if n != 1 {
					return
				}
				if !tc.replace {
					kubelet(t, admin, key, n)
					return
				}
				if err := admin.Delete(ctx, getPod(t, admin, key)); err != nil {
					t.Fatal(err)
				}
				if err := admin.Create(ctx, memberPod(ns, key.Name, read.Labels, false)); err != nil {
					t.Fatal(err)
				}
				successor = getPod(t, admin, key).UID
			}}
			r.Direct = rc.client(t)

			err := r.act(ctx, s, d)
			live := getPod(t, admin, key)
			switch {
			case tc.deleted:
				if err != nil || (live != nil && live.DeletionTimestamp == nil) {
					t.Fatalf("a force delete bound to the UID must pass a status write: %v, Pod %v", err, live)
				}
			case !apierrors.IsConflict(err):
				t.Fatalf("the conflict must be returned so the next pass decides again, got %v", err)
			case live == nil || live.DeletionTimestamp != nil:
				t.Fatal("the Pod was deleted although its delete conflicted")
			case tc.replace && live.UID != successor:
				t.Fatal("another Pod at the name was touched")
			}
		})
	}
}

// TestAWorkloadUpdateThatMeetsTheStatefulSetControllerIsDecidedAgain covers act.go
// converge: the update that restores the workload carries the read's resourceVersion, and the
// merged object it writes is made from the whole live object. The StatefulSet controller
// writes the status while members come and go; the conflict ends the pass and the next pass
// restores the workload from a fresh read, the controller's status kept.
func TestAWorkloadUpdateThatMeetsTheStatefulSetControllerIsDecidedAgain(t *testing.T) {
	ctx := context.Background()
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "conv", ns+"-conv", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	key := client.ObjectKeyFromObject(f)
	sts := &appsv1.StatefulSet{}
	edit(t, admin, key, sts, false, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "hand/edited:1" })
	rc := &race{verb: "update", match: isStatefulSet, other: func(n int) {
		if n == 1 {
			edit(t, admin, key, &appsv1.StatefulSet{}, true, func(s *appsv1.StatefulSet) {
				s.Status.ObservedGeneration, s.Status.Replicas, s.Status.CurrentReplicas = s.Generation, 1, 1
			})
		}
	}}
	r.Direct = rc.client(t)

	res, err := pass(r, key)
	expectDecidedAgain(t, res, err)
	if err := admin.Get(ctx, key, sts); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Template.Spec.Containers[0].Image != "hand/edited:1" || sts.Status.Replicas != 1 {
		t.Fatalf("nothing may be written from the stale read: image %s, status replicas %d", sts.Spec.Template.Spec.Containers[0].Image, sts.Status.Replicas)
	}

	rc.stop()
	if _, err := pass(r, key); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, key, sts); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Template.Spec.Containers[0].Image == "hand/edited:1" || sts.Status.Replicas != 1 {
		t.Fatalf("the next pass must restore the template and keep the controller's status: image %s, status replicas %d",
			sts.Spec.Template.Spec.Containers[0].Image, sts.Status.Replicas)
	}
}

const testDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// seeded is a preview fleet with a seed request (not stored: the functions under test take the
// scope), and its reservation, created.
func seeded(t *testing.T, admin client.Client, ns string) (*scope, *v1.CelldStorageReservation) {
	t.Helper()
	f := corpus.Persistent()
	f.Namespace, f.Name, f.UID = ns, "pr", types.UID("uid-"+ns)
	f.Spec.Storage.Bucket, f.Spec.Storage.Prefix = ns+"-pool", "pr"
	f.Spec.Storage.Seed = &v1.SeedRequest{Executor: "snapshot", Source: "production", Alarms: "Clear",
		SourceFleet: v1.SeedFleetRef{Namespace: "prod", Name: "shop", UID: "u-1"},
		Objects:     []v1.SeedObject{{Class: "Cart", ID: "c-1"}},
		Preview:     v1.SeedPreviewRef{Name: "pr", UID: "p-uid"}}
	s := newScope(f, time.Now())
	res := &v1.CelldStorageReservation{ObjectMeta: metav1.ObjectMeta{Name: reservation.Name(f.Spec.Storage.Bucket, f.Spec.Storage.Prefix)},
		Spec: v1.CelldStorageReservationSpec{Bucket: f.Spec.Storage.Bucket, Prefix: f.Spec.Storage.Prefix, InitialReplicas: 1,
			FleetNamespace: ns, FleetName: f.Name, FleetUID: string(f.UID), SpecHash: "h", Seed: s.fleet.Spec.Storage.Seed.DeepCopy()}}
	if err := admin.Create(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	return s, res
}

// executor writes status.seed as the seed executor does, on a fresh read.
func executor(t *testing.T, admin client.Client, name string, change func(*v1.SeedResult) *v1.SeedResult) {
	t.Helper()
	edit(t, admin, client.ObjectKey{Name: name}, &v1.CelldStorageReservation{}, true, func(r *v1.CelldStorageReservation) {
		r.Status.Seed = change(r.Status.Seed)
	})
}

func claimed(msg string) func(*v1.SeedResult) *v1.SeedResult {
	return func(*v1.SeedResult) *v1.SeedResult {
		return &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1", StartedAt: new(metav1.Now()), Message: msg}
	}
}

func progress(msg string) func(*v1.SeedResult) *v1.SeedResult {
	return func(s *v1.SeedResult) *v1.SeedResult { s.Message = msg; return s }
}

func succeeded(s *v1.SeedResult) *v1.SeedResult {
	s.Phase, s.CompletedAt = v1.SeedSucceeded, new(metav1.Now())
	s.Objects = []v1.SeededObject{{Class: "Cart", ID: "c-1", Digest: testDigest}}
	return s
}

func getReservationNamed(t *testing.T, admin client.Client, name string) *v1.CelldStorageReservation {
	t.Helper()
	res := &v1.CelldStorageReservation{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestASeedsCancellationIsDecidedAgainWhenTheExecutorWrites covers plan.go cancelSeed (and act.go cancelStep).
// Its writes carry the resourceVersion read, and the status write copies the seed result it
// read; an executor writes that status while it works (its claim, its progress, its result).
// A conflict used to end the pass, and the next one decided again from the cache: an executor
// reporting progress faster than that starved the cancellation for as long as the copy ran.
// Now the cancellation is decided again at once on the API server's copy.
func TestASeedsCancellationIsDecidedAgainWhenTheExecutorWrites(t *testing.T) {
	cases := []struct {
		name    string
		initial func(*v1.SeedResult) *v1.SeedResult // nil: unclaimed
		other   func(*v1.SeedResult) *v1.SeedResult
		always  bool
		// check is the outcome on the reservation and the cancelSeed answer
		check func(t *testing.T, res *v1.CelldStorageReservation, stop bool, err error)
	}{
		{name: "the executor reports progress", initial: claimed("copying 0/1"), other: progress("copying 1/1"),
			check: func(t *testing.T, res *v1.CelldStorageReservation, stop bool, err error) {
				got := res.Status.Seed
				if err != nil || !stop || got.CancelRequestedAt == nil || got.Message != "copying 1/1" || got.Phase != v1.SeedRunning || got.ExecutorID != "w-1" {
					t.Fatalf("the cancellation must be requested on the fresh read, keeping the executor's progress: %v %v %+v", stop, err, got)
				}
			}},
		{name: "the executor claims the seed", other: claimed("claimed"),
			check: func(t *testing.T, res *v1.CelldStorageReservation, stop bool, err error) {
				got := res.Status.Seed
				if err != nil || !stop || got.Phase != v1.SeedRunning || got.CancelRequestedAt == nil || got.ExecutorID != "w-1" {
					t.Fatalf("a seed claimed meanwhile gets cancelRequestedAt, never Canceled over the claim: %v %v %+v", stop, err, got)
				}
			}},
		{name: "the executor finishes", initial: claimed("copying 0/1"), other: succeeded,
			check: func(t *testing.T, res *v1.CelldStorageReservation, stop bool, err error) {
				if err != nil || stop || res.Annotations[v1.AnnotationSeedGate] != v1.SeedGateClosed || res.Status.Seed.Phase != v1.SeedSucceeded ||
					res.Status.Seed.CancelRequestedAt != nil {
					t.Fatalf("a seed finished meanwhile is final: the gate closes and the result stays: %v %v %v %+v", stop, err, res.Annotations, res.Status.Seed)
				}
			}},
		{name: "the executor reports progress at every attempt", initial: claimed("copying 0/1"), always: true,
			other: func(s *v1.SeedResult) *v1.SeedResult { s.Message = time.Now().Format(time.RFC3339Nano); return s },
			check: func(t *testing.T, res *v1.CelldStorageReservation, stop bool, err error) {
				if !apierrors.IsConflict(err) || !stop || res.Status.Seed.CancelRequestedAt != nil {
					t.Fatalf("a reservation that never stops moving ends the pass with the conflict, nothing written: %v %v %+v", stop, err, res.Status.Seed)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			s, res := seeded(t, admin, ns)
			if tc.initial != nil {
				executor(t, admin, res.Name, tc.initial)
			}
			rc := &race{match: isReservation, other: func(n int) {
				if n == 1 || tc.always {
					executor(t, admin, res.Name, tc.other)
				}
			}}
			rc.verb = "status update"
			c := rc.client(t)
			r.Client, r.Direct = c, c

			stop, err := r.cancelSeed(context.Background(), s)
			tc.check(t, getReservationNamed(t, admin, res.Name), stop, err)
		})
	}
}

// TestAReservationWriteThatMeetsAnotherWriterEndsThePass covers the reservation's other writes:
// plan.go seedGate (the gate opens), act.go writeRecords (an earlier
// release's record is rewritten; the record of a fleet without spec.capacity is removed) and
// act.go writeHistory (a capacity step is recorded). Each carries the
// resourceVersion of the read it decided on (writeHistory's is a fresh read right before).
// Once a seed is final nobody but the operator writes a reservation, so a conflict means a
// person or a tool edited it: the write is not made, the conflict is returned (writeHistory's
// is logged by its caller: the step stays taken, its record is lost), and the other writer's
// edit is kept. The tuning record's conflict is TestATuningRecordWriteIsNeverRetriedWithARefreshedResourceVersion.
func TestAReservationWriteThatMeetsAnotherWriterEndsThePass(t *testing.T) {
	legacy := `{"operation":{"kind":"RollingRestart","id":"op-7","phase":"Draining"},"claims":{"data-legacy-0":"uid-a"}}`
	cases := []struct {
		name string
		// write makes the operator's write on the reservation the test created; before is the
		// record annotation that reservation carries
		before string
		write  func(r *Reconciler, s *scope, res *v1.CelldStorageReservation) error
		// unchanged: the operator's write is not in the live reservation
		unchanged func(res *v1.CelldStorageReservation) bool
		seeded    bool
	}{
		{name: "plan.go seedGate", seeded: true,
			write: func(r *Reconciler, s *scope, res *v1.CelldStorageReservation) error {
				_, err := r.seedGate(context.Background(), s, res)
				return err
			},
			unchanged: func(res *v1.CelldStorageReservation) bool { return res.Annotations[v1.AnnotationSeedGate] == "" }},
		{name: "act.go writeRecords: an earlier release's record", before: legacy,
			write: func(r *Reconciler, s *scope, res *v1.CelldStorageReservation) error {
				_, err := r.writeRecords(context.Background(), s, res)
				return err
			},
			unchanged: func(res *v1.CelldStorageReservation) bool {
				return res.Annotations[v1.AnnotationCurrentOperation] == legacy
			}},
		{name: "act.go writeRecords: the record of a fleet without spec.capacity", before: "capacity",
			write: func(r *Reconciler, s *scope, res *v1.CelldStorageReservation) error {
				_, err := r.writeRecords(context.Background(), s, res)
				return err
			},
			unchanged: func(res *v1.CelldStorageReservation) bool {
				return res.Annotations[v1.AnnotationCurrentOperation] != ""
			}},
		{name: "act.go writeHistory",
			write: func(r *Reconciler, s *scope, res *v1.CelldStorageReservation) error {
				s.reservationName = res.Name
				return r.writeHistory(context.Background(), s, []byte(`{"steps":[]}`))
			},
			unchanged: func(res *v1.CelldStorageReservation) bool {
				return res.Annotations[v1.AnnotationCurrentOperation] == ""
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			ns := setup(t, admin)
			var s *scope
			var res *v1.CelldStorageReservation
			if tc.seeded {
				s, res = seeded(t, admin, ns)
				executor(t, admin, res.Name, claimed("copying"))
				executor(t, admin, res.Name, succeeded)
			} else {
				f := corpus.Persistent()
				f.Namespace, f.Name, f.UID = ns, "rec", types.UID("uid-"+ns)
				f.Spec.Storage.Bucket = ns + "-rec"
				s = newScope(f, time.Now())
				res = reservation.Desired(s.fleet)
				if tc.before != "" {
					value := tc.before
					if value == "capacity" {
						var err error
						if value, err = reservation.CapacityAnnotation(f.UID, json.RawMessage(`{"steps":[]}`)); err != nil {
							t.Fatal(err)
						}
					}
					metav1.SetMetaDataAnnotation(&res.ObjectMeta, v1.AnnotationCurrentOperation, value)
				}
				if err := admin.Create(ctx, res); err != nil {
					t.Fatal(err)
				}
			}
			res = getReservationNamed(t, admin, res.Name) // the pass's read
			rc := &race{verb: "update", match: isReservation, other: func(n int) {
				if n == 1 {
					edit(t, admin, client.ObjectKey{Name: res.Name}, &v1.CelldStorageReservation{}, false, func(r *v1.CelldStorageReservation) {
						metav1.SetMetaDataLabel(&r.ObjectMeta, "example.com/touched", "yes")
					})
				}
			}}
			r.Direct = rc.client(t)

			err := tc.write(r, s, res)
			live := getReservationNamed(t, admin, res.Name)
			if !apierrors.IsConflict(err) {
				t.Fatalf("the write must fail with the conflict, never be taken as made: %v", err)
			}
			if !tc.unchanged(live) || live.Labels["example.com/touched"] != "yes" {
				t.Fatalf("nothing may be written over the other writer's edit: annotations %v, labels %v", live.Annotations, live.Labels)
			}
			if rc.n.Load() != 1 {
				t.Fatalf("the write is not retried in the pass, got %d attempts", rc.n.Load())
			}
		})
	}
}

// replacementCase is a member's Pod and claim on a real API server, a fleet scope, and the
// replacement decision for them.
func replacementCase(t *testing.T, r *Reconciler, admin client.Client) (*scope, lifecycle.Decision, client.ObjectKey, client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "rep", ns+"-rep", nil)
	live := &v1.CelldFleet{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	s := newScope(live, time.Now())
	labels := map[string]string{v1.LabelFleetUID: string(live.UID)}
	podKey := client.ObjectKey{Namespace: ns, Name: v1.MemberName(f.Name, 1)}
	claimKey := client.ObjectKey{Namespace: ns, Name: v1.ClaimName(f.Name, 1)}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimKey.Name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pod := memberPod(ns, podKey.Name, labels, false)
	if err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	msg := "Replacing member " + podKey.Name + ": down while the rest of the fleet is ready; it returns on a fresh disk"
	d := lifecycle.Decision{Action: lifecycle.ReplaceMember, Ordinal: 1,
		Pod:    lifecycle.Ref{Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Claim:  lifecycle.Ref{Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
		Reason: v1.ReasonLifecycleProgress, Message: msg, Event: v1.EventMemberReplaced, EventMessage: msg}
	return s, d, podKey, claimKey
}

// TestAReplacementsPodWritesMeetTheKubelet covers handoff.go's writes of the victim Pod, whose
// status the kubelet writes while it fails and while it terminates: the hold (an update with
// the read's resourceVersion: a conflict ends the replacement before anything is given up),
// the Pod delete (UID and resourceVersion: a conflict ends it too, and the next pass aborts the
// uncommitted hold), the commit and the release (retried on a fresh read of the same Pod).
func TestAReplacementsPodWritesMeetTheKubelet(t *testing.T) {
	cases := []struct {
		name string
		verb string
		at   func(int) bool
		// committed: the replacement went through (Pod deleted, claim deleted, hold released)
		committed bool
	}{
		{name: "the kubelet writes before the hold", verb: "update", at: first},
		{name: "the kubelet writes before the Pod delete", verb: "delete", at: first},
		{name: "the kubelet writes before the commit", verb: "update", at: nth(2), committed: true},
		{name: "the kubelet writes before the release", verb: "patch", at: first, committed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var writes atomic.Int64
			r, admin := newReconciler(t, testOptions(), &writes)
			s, d, podKey, claimKey := replacementCase(t, r, admin)
			rc := &race{verb: tc.verb, match: isPod, other: when(tc.at, func(n int) { kubelet(t, admin, podKey, n) })}
			r.Direct = rc.client(t)

			committed, err := r.replace(ctx, s, d)
			claimDeleted := claimGone(t, admin, claimKey)
			pod := getPod(t, admin, podKey)
			if rc.n.Load() == 0 {
				t.Fatal("setup: the kubelet's write was never made")
			}
			if tc.committed {
				if err != nil || !committed || !claimDeleted || pod != nil {
					t.Fatalf("a retried commit or release must finish the replacement: committed %v, %v, claim gone %v, Pod %v", committed, err, claimDeleted, pod)
				}
				return
			}
			if !apierrors.IsConflict(err) || committed || claimDeleted {
				t.Fatalf("the conflict must end the replacement before anything is given up: committed %v, %v, claim gone %v", committed, err, claimDeleted)
			}
			if pod == nil || pod.DeletionTimestamp != nil {
				t.Fatal("the Pod was deleted although the replacement ended")
			}
			if !controllerutil.ContainsFinalizer(pod, v1.FinalizerReplacingDisk) {
				return // the hold was never written
			}
			// the next pass aborts the uncommitted hold: the claim stays, the Pod is released
			rc.stop()
			s.held = []corev1.Pod{*pod}
			if _, err := r.resumeReplacements(ctx, s); err != nil {
				t.Fatal(err)
			}
			if p := getPod(t, admin, podKey); p == nil || controllerutil.ContainsFinalizer(p, v1.FinalizerReplacingDisk) {
				t.Fatalf("the next pass must abort the uncommitted hold and keep the Pod: %v", p)
			}
			if claimGone(t, admin, claimKey) {
				t.Fatal("an aborted replacement deleted the claim")
			}
		})
	}
}
