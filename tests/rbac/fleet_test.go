package rbac

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/localcluster"
)

const fleetName = "pf"

// newFleet is a three-member PersistentFleet on the local cluster's zonal StorageClass with a
// short shutdown budget, on a bucket of its own (reservations are permanent).
func newFleet(ns string) *v1.CelldFleet {
	f := corpus.Persistent()
	f.Namespace, f.Name = ns, fleetName
	f.Spec.Replicas = new(int32(3))
	f.Spec.Storage.Bucket = "rbac-" + ns
	f.Spec.Storage.StorageClassName = new(localcluster.StorageClassName)
	f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 2, TerminationGraceSeconds: 10}
	return f
}

// fleetNamespace creates ns with the runtime ServiceAccount the fleet's Pods run as.
func fleetNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	ensureNamespace(ctx, t, ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "celld-runtime"}}
	if err := admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// driveLifecycle creates a fleet in ns and follows it to Ready, through a restartToken rollout
// and through deletion, with op as the only operator. The fleet is created before its runtime
// ServiceAccount, so it is first Blocked (ServiceAccountMissing): the Warning and the "No
// longer blocked" events exercise the operator's event writes in the fleet namespace.
func driveLifecycle(ctx context.Context, t *testing.T, op *operator, ns string) {
	t.Helper()
	ensureNamespace(ctx, t, ns)
	f := newFleet(ns)
	if err := admin.Create(ctx, f); err != nil {
		t.Fatalf("create the fleet: %v", err)
	}
	key := client.ObjectKeyFromObject(f)
	t.Cleanup(func() { removeFleet(t, key) })
	diag := func(ctx context.Context) string { return describeNamespace(ctx, key) }
	start := time.Now()
	op.poll(ctx, t, 30*time.Second, "the fleet without its runtime ServiceAccount is Blocked", func(ctx context.Context) (bool, error) {
		live := &v1.CelldFleet{}
		if err := admin.Get(ctx, key, live); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonServiceAccountMissing, nil
	}, diag)
	fleetNamespace(ctx, t, ns)
	op.poll(ctx, t, 90*time.Second, "the fleet becomes Ready", fleetReady(key, 3), diag)
	t.Logf("%s: Ready after %s", ns, time.Since(start).Round(100*time.Millisecond))

	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}, &policyv1.PodDisruptionBudget{}} {
		if err := admin.Get(ctx, key, obj); err != nil {
			t.Errorf("%T %s of a Ready fleet: %v", obj, key, err)
		}
	}
	claims := claimUIDs(ctx, t, ns)
	if len(claims) != 3 {
		t.Fatalf("a Ready 3-member fleet has %d claims: %v", len(claims), claims)
	}
	resKey := types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}
	if err := admin.Get(ctx, resKey, &v1.CelldStorageReservation{}); err != nil {
		t.Fatalf("the fleet's bucket reservation: %v", err)
	}

	// A rolling restart replaces every member on its own disk.
	old := map[string]types.UID{}
	for i := range 3 {
		p := &corev1.Pod{}
		name := fmt.Sprintf("%s-%d", fleetName, i)
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			t.Fatalf("member %s: %v", name, err)
		}
		old[name] = p.UID
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maintenance":{"restartToken":"r1"}}}`))
	if err := admin.Patch(ctx, &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleetName}}, patch); err != nil {
		t.Fatalf("set restartToken: %v", err)
	}
	start = time.Now()
	ready := fleetReady(key, 3)
	op.poll(ctx, t, 120*time.Second, "the restartToken rollout replaces every member and the fleet is Ready", func(ctx context.Context) (bool, error) {
		for name, uid := range old {
			p := &corev1.Pod{}
			if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if p.UID == uid || p.Annotations[v1.AnnotationRestartToken] != "r1" {
				return false, nil
			}
		}
		return ready(ctx)
	}, diag)
	t.Logf("%s: rollout done after %s", ns, time.Since(start).Round(100*time.Millisecond))
	if got := claimUIDs(ctx, t, ns); fmt.Sprint(got) != fmt.Sprint(claims) {
		t.Errorf("the rollout changed the claims: before %v, after %v", claims, got)
	}

	// Deletion: the workload, then the claims, then the finalizer; the reservation stays.
	if err := admin.Delete(ctx, &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleetName}}); err != nil {
		t.Fatalf("delete the fleet: %v", err)
	}
	start = time.Now()
	op.poll(ctx, t, 90*time.Second, "the fleet, its StatefulSet and its claims are deleted", func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, key, &v1.CelldFleet{}); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		if err := admin.Get(ctx, key, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		list := &corev1.PersistentVolumeClaimList{}
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	}, diag)
	t.Logf("%s: deleted after %s", ns, time.Since(start).Round(100*time.Millisecond))
	if err := admin.Get(ctx, resKey, &v1.CelldStorageReservation{}); err != nil {
		t.Errorf("the bucket reservation must outlive the fleet: %v", err)
	}
}

// fleetReady is a poll condition: Ready True/Provisioned with n ready members at the current
// generation. NamespaceAccessDenied ends the poll at once.
func fleetReady(key types.NamespacedName, n int32) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		f := &v1.CelldFleet{}
		if err := admin.Get(ctx, key, f); err != nil {
			return false, err
		}
		for _, c := range f.Status.Conditions {
			if c.Reason == v1.ReasonNamespaceAccessDenied {
				return false, fatal("fleet %s is stuck with %s=%s/%s: %s", key, c.Type, c.Status, c.Reason, c.Message)
			}
		}
		ready := meta.FindStatusCondition(f.Status.Conditions, v1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || ready.Reason != v1.ReasonProvisioned {
			return false, fmt.Errorf("Ready is %+v", ready)
		}
		if f.Status.ReadyReplicas != n || f.Status.ObservedGeneration != f.Generation {
			return false, fmt.Errorf("readyReplicas %d, observedGeneration %d of %d", f.Status.ReadyReplicas, f.Status.ObservedGeneration, f.Generation)
		}
		return true, nil
	}
}

// claimUIDs maps the namespace's live claims to their UIDs: a changed UID is a new disk.
func claimUIDs(ctx context.Context, t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	list := &corev1.PersistentVolumeClaimList{}
	if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, c := range list.Items {
		if c.DeletionTimestamp == nil {
			out[c.Name] = c.UID
		}
	}
	return out
}

// removeFleet deletes a fleet a failed test left behind, finalizer included, so that the
// operators of later tests do not reconcile it.
func removeFleet(t *testing.T, key types.NamespacedName) {
	ctx := context.Background()
	f := &v1.CelldFleet{}
	if err := admin.Get(ctx, key, f); err != nil {
		return
	}
	t.Logf("removing fleet %s left behind", key)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := admin.Patch(ctx, f, patch); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("remove the finalizers of %s: %v", key, err)
	}
	if err := admin.Delete(ctx, f); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %s: %v", key, err)
	}
}

// describeNamespace reports the fleet's conditions and its workload, Pods and claims, for a
// failed wait.
func describeNamespace(ctx context.Context, key types.NamespacedName) string {
	var b strings.Builder
	f := &v1.CelldFleet{}
	if err := admin.Get(ctx, key, f); err != nil {
		fmt.Fprintf(&b, "fleet %s: %v\n", key, err)
	} else {
		fmt.Fprintf(&b, "fleet %s generation %d observed %d ready %d finalizers %v\n", key, f.Generation, f.Status.ObservedGeneration, f.Status.ReadyReplicas, f.Finalizers)
		for _, c := range f.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	sts := &appsv1.StatefulSet{}
	if err := admin.Get(ctx, key, sts); err == nil {
		fmt.Fprintf(&b, "StatefulSet replicas %d ready %d updated %d current %s update %s\n", ptrOr(sts.Spec.Replicas), sts.Status.ReadyReplicas,
			sts.Status.UpdatedReplicas, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
	}
	pods := &corev1.PodList{}
	_ = admin.List(ctx, pods, client.InNamespace(key.Namespace))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "Pod %s node %q phase %s ready %v deleting %v ip %s\n", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil, p.Status.PodIP)
	}
	claims := &corev1.PersistentVolumeClaimList{}
	_ = admin.List(ctx, claims, client.InNamespace(key.Namespace))
	for _, c := range claims.Items {
		fmt.Fprintf(&b, "PVC %s phase %s volume %s deleting %v\n", c.Name, c.Status.Phase, c.Spec.VolumeName, c.DeletionTimestamp != nil)
	}
	events := &corev1.EventList{}
	_ = admin.List(ctx, events, client.InNamespace(key.Namespace))
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			fmt.Fprintf(&b, "Warning %s %s/%s: %s\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
