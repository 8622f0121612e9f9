package fleet

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// These tests prove the reservation rules of previews (seed 000, storage reservation): a
// prefix runs only in its parent's preview pool, a pool bucket is never a dedicated fleet's,
// and a scope is checked against every reservation of its bucket before it is created.

// previewFleet is a Bucket fleet with storage.prefix and previewFleetRef, as a CelldPreview
// generates it (or as a user might write it by hand).
func previewFleet(t *testing.T, admin client.Client, ns, name, bucket, prefix string, parent v1.FleetReference) *v1.CelldFleet {
	t.Helper()
	return createFleet(t, admin, ns, name, bucket, func(f *v1.CelldFleet) {
		b := corpus.Bucket()
		b.Namespace, b.Name = f.Namespace, f.Name
		b.Spec.Storage.Bucket, b.Spec.Storage.Prefix, b.Spec.Storage.PreviewFleetRef = bucket, prefix, &parent
		b.Spec.Replicas = new(int32(1))
		b.Spec.Placement = v1.PlacementSpec{Zones: []string{"us-east-1a"}, AZCount: 1, Mode: v1.PlacementRelaxed}
		*f = *b
	})
}

// previewParent creates a fleet with spec.previews on previewBucket.
func previewParent(t *testing.T, admin client.Client, ns, name, bucket, previewBucket string) *v1.CelldFleet {
	t.Helper()
	return createFleet(t, admin, ns, name, bucket, func(f *v1.CelldFleet) {
		f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: previewBucket, Region: "us-east-1"}}
	})
}

func refOf(f *v1.CelldFleet) v1.FleetReference {
	return v1.FleetReference{Name: f.Name, UID: string(f.UID)}
}

func absent(t *testing.T, admin client.Client, name, why string) {
	t.Helper()
	err := admin.Get(context.Background(), client.ObjectKey{Name: name}, &v1.CelldStorageReservation{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: CelldStorageReservation %s must not exist (err %v)", why, name, err)
	}
}

func conflict(t *testing.T, admin client.Client, f *v1.CelldFleet, mentions ...string) {
	t.Helper()
	b := blocked(t, admin, f)
	if b.Status != metav1.ConditionTrue || b.Reason != v1.ReasonStorageScopeConflict {
		t.Fatalf("%s: want Blocked=True StorageScopeConflict, got %s %s: %s", f.Name, b.Status, b.Reason, b.Message)
	}
	for _, m := range mentions {
		if !strings.Contains(b.Message, m) {
			t.Errorf("%s: the StorageScopeConflict message must mention %q: %s", f.Name, m, b.Message)
		}
	}
	assertNothingProvisioned(t, admin, f.Namespace, f.Name)
}

// TestAPrefixFleetWithoutItsParentsPoolIsRefused: a prefix scope is never reserved in an
// unreserved bucket, in a bucket a fleet holds whole, nor in the pool of another parent; the
// message names the parent the fleet claims, and nothing is reserved or provisioned.
func TestAPrefixFleetWithoutItsParentsPoolIsRefused(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)

	// No pool: nobody reserved the bucket.
	orphan := previewFleet(t, admin, ns, "orphan", ns+"-free", "p-1", v1.FleetReference{Name: "parent", UID: "parent-uid"})
	reconcileOnce(t, r, orphan)
	conflict(t, admin, orphan, "parent fleet "+ns+"/parent (UID parent-uid)", "has no preview pool reservation", "create a CelldPreview")
	absent(t, admin, reservation.Name(ns+"-free", "p-1"), "a prefix without a pool")
	absent(t, admin, reservation.Name(ns+"-free", ""), "a prefix fleet never reserves the pool itself")

	// The bucket a running fleet holds: a prefix there would share its keys.
	holder := createFleet(t, admin, ns, "holder", ns+"-held", nil)
	reconcileOnce(t, r, holder)
	intruder := previewFleet(t, admin, ns, "intruder", ns+"-held", "p-1", refOf(holder))
	reconcileOnce(t, r, intruder)
	conflict(t, admin, intruder, "parent fleet "+ns+"/holder", "reserved whole to fleet "+ns+"/holder")
	absent(t, admin, reservation.Name(ns+"-held", "p-1"), "a prefix in a bucket a fleet holds")
	if b := blocked(t, admin, holder); b.Status != metav1.ConditionFalse {
		t.Errorf("the holder keeps its bucket: %s %s", b.Reason, b.Message)
	}

	// The pool of another parent.
	parent := previewParent(t, admin, ns, "parent", ns+"-parent", ns+"-pool")
	other := previewParent(t, admin, ns, "other", ns+"-other", ns+"-other-pool")
	if err := admin.Create(context.Background(), reservation.DesiredPool(parent)); err != nil {
		t.Fatal(err)
	}
	stray := previewFleet(t, admin, ns, "stray", ns+"-pool", "p-1", refOf(other))
	reconcileOnce(t, r, stray)
	conflict(t, admin, stray, "parent fleet "+ns+"/other", "preview pool of the previews of fleet "+ns+"/parent")
	absent(t, admin, reservation.Name(ns+"-pool", "p-1"), "a prefix in another parent's pool")

	// In its own parent's pool, the prefix is reserved to the child's own UID.
	child := previewFleet(t, admin, ns, "child", ns+"-pool", "p-2", refOf(parent))
	reconcileOnce(t, r, child)
	if b := blocked(t, admin, child); b.Reason == v1.ReasonStorageScopeConflict {
		t.Fatalf("a preview fleet in its parent's pool must get its prefix: %s", b.Message)
	}
	scope := getReservation(t, admin, reservation.Name(ns+"-pool", "p-2"))
	if scope.Spec.FleetUID != string(child.UID) || scope.Spec.Prefix != "p-2" || scope.Spec.OwnerKind != "" {
		t.Errorf("the prefix scope must be bound to the child's own UID: %+v", scope.Spec)
	}
}

// TestAReservedPreviewBucketIsNeverADedicatedFleets: whoever comes second, a pool and a
// dedicated fleet never share a bucket, and the bucket name is reserved whatever the endpoint.
func TestAReservedPreviewBucketIsNeverADedicatedFleets(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	parent := previewParent(t, admin, ns, "parent", ns+"-parent", ns+"-pool")
	if err := admin.Create(context.Background(), reservation.DesiredPool(parent)); err != nil {
		t.Fatal(err)
	}
	squatter := createFleet(t, admin, ns, "squatter", ns+"-pool", func(f *v1.CelldFleet) {
		*f = *corpus.Bucket()
		f.Namespace, f.Name, f.Spec.Storage.Bucket = ns, "squatter", ns+"-pool"
	})
	reconcileOnce(t, r, squatter)
	conflict(t, admin, squatter, "Bucket "+ns+"-pool", "the previews of fleet "+ns+"/parent")

	// The parent's own bucket: a pool there is refused (the pure rule; the CelldPreview
	// reconciler creates pools through the same Claim).
	pool := reservation.DesiredPool(parent)
	pool.Name, pool.Spec.Bucket = reservation.Name(ns+"-parent", ""), ns+"-parent"
	reconcileOnce(t, r, parent)
	got, clash, _, err := reservation.Claim(context.Background(), admin, pool)
	if err != nil {
		t.Fatal(err)
	}
	if clash != nil || got == nil {
		t.Fatalf("the reservation at the parent's bucket name exists, so Claim returns it: %v %v", got, clash)
	}
	if ok, why := reservation.PoolMatches(got, withPreviewBucket(parent, ns+"-parent")); ok || !strings.Contains(why, "fleet "+ns+"/parent") {
		t.Errorf("a pool must never match a bucket a fleet holds: %v %q", ok, why)
	}
}

func withPreviewBucket(f *v1.CelldFleet, bucket string) *v1.CelldFleet {
	c := f.DeepCopy()
	c.Spec.Previews.Storage.Bucket = bucket
	return c
}

// TestABucketWithAPrefixScopeCannotBeClaimedWhole: an earlier release let a prefix fleet
// reserve a prefix in any bucket; a fleet or pool that asks for that bucket whole is refused
// before anything is created, naming the scope and its holder.
func TestABucketWithAPrefixScopeCannotBeClaimedWhole(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	legacy := &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: reservation.Name(ns+"-legacy", "old")},
		Spec: v1.CelldStorageReservationSpec{Bucket: ns + "-legacy", Prefix: "old", InitialReplicas: 1,
			FleetNamespace: ns, FleetName: "old", FleetUID: "old-uid", SpecHash: "h"},
	}
	if err := admin.Create(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	whole := createFleet(t, admin, ns, "whole", ns+"-legacy", nil)
	reconcileOnce(t, r, whole)
	conflict(t, admin, whole, "prefix old of bucket "+ns+"-legacy", legacy.Name, "fleet "+ns+"/old (UID old-uid)", "another bucket")
	absent(t, admin, reservation.Name(ns+"-legacy", ""), "a whole bucket over a prefix scope")

	parent := previewParent(t, admin, ns, "parent", ns+"-parent", ns+"-legacy")
	_, clash, _, err := reservation.Claim(context.Background(), admin, reservation.DesiredPool(parent))
	if err != nil || clash == nil || clash.Name != legacy.Name {
		t.Fatalf("a pool over a prefix scope must be refused naming it, got %v %v", clash, err)
	}
	absent(t, admin, reservation.Name(ns+"-legacy", ""), "a pool over a prefix scope")
}

// TestAddingPreviewsRestartsNothing: spec.previews is outside the reservation hash and the
// Pod template, so adding it to a running fleet keeps its bucket and its members.
func TestAddingPreviewsRestartsNothing(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "grows", ns+"-grows", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	before := &appsv1.StatefulSet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), before); err != nil {
		t.Fatal(err)
	}
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	live.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: ns + "-grows-previews"}}
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, f)
	if b := blocked(t, admin, f); b.Status != metav1.ConditionFalse {
		t.Fatalf("adding spec.previews must keep the fleet's bucket: %s %s", b.Reason, b.Message)
	}
	after := &appsv1.StatefulSet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), after); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(before.Spec.Template, after.Spec.Template) || before.Generation != after.Generation {
		t.Errorf("adding spec.previews must not touch the workload (generation %d -> %d)", before.Generation, after.Generation)
	}
	absent(t, admin, reservation.Name(ns+"-grows-previews", ""), "adding spec.previews reserves nothing until the first preview")
}
