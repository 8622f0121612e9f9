package preview

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/apiserver"
)

// These tests run the preview reconciler against a real kube-apiserver and etcd, with no other
// controller: generated fleets are not provisioned, so their status is written by the test.

var (
	admin  client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	cfg, stop, err := apiserver.Start("config/crd/bases")
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers/preview:", err)
		return 1
	}
	defer stop()
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// clock is a settable clock for expiry.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newReconciler() (*Reconciler, *clock) {
	c := &clock{t: time.Now()}
	return &Reconciler{Client: admin, Direct: admin, Now: c.now}, c
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "preview-"}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// createParent creates a parent fleet in ns; previewBucket "" leaves spec.previews out.
func createParent(t *testing.T, ns, name, previewBucket string) *v1.CelldFleet {
	t.Helper()
	return createFleetObject(t, ns, name, func(f *v1.CelldFleet) {
		if previewBucket == "" {
			return
		}
		f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: previewBucket},
			Routing: &v1.PreviewRouting{BaseDomain: "previews.example.com",
				Source:  v1.RoutingSource{Namespace: "ingress-nginx", PodLabels: map[string]v1.LabelValue{"app": "ingress"}},
				Ingress: &v1.IngressRouting{ClassName: "nginx"}}}
	})
}

// createFleetObject creates a PersistentFleet ns/name on bucket NS-NAME, edited by edit first.
func createFleetObject(t *testing.T, ns, name string, edit func(*v1.CelldFleet)) *v1.CelldFleet {
	t.Helper()
	f := corpus.Persistent()
	f.Namespace, f.Name, f.Spec.Storage.Bucket = ns, name, ns+"-"+name
	edit(f)
	if err := admin.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

func createPreview(t *testing.T, ns, name, parent string, ttl int32) *v1.CelldPreview {
	t.Helper()
	p := &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: parent}, TTLSeconds: ttl}}
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func reconcileOnce(t *testing.T, r *Reconciler, p *v1.CelldPreview) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	if err != nil {
		t.Fatalf("reconcile %s: %v", p.Name, err)
	}
	return res
}

func get(t *testing.T, p *v1.CelldPreview) *v1.CelldPreview {
	t.Helper()
	live := &v1.CelldPreview{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(p), live); err != nil {
		t.Fatal(err)
	}
	return live
}

// expect fails unless the preview's phase and Ready reason are as given and the message
// mentions every string.
func expect(t *testing.T, p *v1.CelldPreview, phase v1.PreviewPhase, reason string, mentions ...string) *v1.CelldPreview {
	t.Helper()
	live := get(t, p)
	c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionReady)
	if live.Status.Phase != phase || c == nil || c.Reason != reason {
		t.Fatalf("preview %s: want %s/%s, got %s/%+v", p.Name, phase, reason, live.Status.Phase, c)
	}
	for _, m := range mentions {
		if !strings.Contains(c.Message, m) {
			t.Errorf("preview %s: the %s message must mention %q: %s", p.Name, reason, m, c.Message)
		}
	}
	return live
}

func fleets(t *testing.T, ns string) []v1.CelldFleet {
	t.Helper()
	list := &v1.CelldFleetList{}
	if err := admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []v1.CelldFleet
	for _, f := range list.Items {
		if f.Spec.Storage.PreviewFleetRef != nil {
			out = append(out, f)
		}
	}
	return out
}

// TestBadInputIsBlockedAndCreatesNothing: a preview of a missing parent, of a fleet without
// spec.previews, of a parent being deleted, or naming another namespace, is Blocked with a
// message naming the fix, and no fleet or pool is created.
func TestBadInputIsBlockedAndCreatesNothing(t *testing.T) {
	r, _ := newReconciler()
	ns := namespace(t)
	plain := createParent(t, ns, "plain", "")
	leaving := createParent(t, ns, "leaving", ns+"-leaving-pool")
	leaving.Finalizers = []string{"example.com/hold"}
	if err := admin.Update(context.Background(), leaving); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(context.Background(), leaving); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		leaving.Finalizers = nil
		_ = admin.Update(context.Background(), leaving)
	})
	elsewhere := createPreview(t, ns, "elsewhere", "plain", 0)
	elsewhere.Spec.FleetRef.Namespace = "other"
	if err := admin.Update(context.Background(), elsewhere); err == nil {
		t.Fatal("fleetRef is fixed at creation")
	}
	other := &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-ns"},
		Spec: v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: "plain", Namespace: "other"}}}
	if err := admin.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p       *v1.CelldPreview
		reason  string
		mention []string
	}{
		{createPreview(t, ns, "orphan", "absent", 0), v1.ReasonParentMissing, []string{"CelldFleet " + ns + "/absent does not exist"}},
		{createPreview(t, ns, "plain", plain.Name, 0), v1.ReasonPreviewsNotEnabled, []string{ns + "/plain has no spec.previews", "docs/previews.md"}},
		{createPreview(t, ns, "late", leaving.Name, 0), v1.ReasonParentDeleting, []string{ns + "/leaving is being deleted"}},
		{other, v1.ReasonParentInOtherNamespace, []string{"other/plain", "Create the preview in namespace other"}},
	} {
		reconcileOnce(t, r, c.p)
		live := expect(t, c.p, v1.PreviewBlocked, c.reason, c.mention...)
		if live.Status.FleetName != "" || live.Annotations[v1.AnnotationPreviewFleet] != "" {
			t.Errorf("%s: a blocked preview names no fleet: %+v %v", c.p.Name, live.Status, live.Annotations)
		}
	}
	if got := fleets(t, ns); len(got) != 0 {
		t.Errorf("bad input created %d fleets", len(got))
	}
	err := admin.Get(context.Background(), client.ObjectKey{Name: reservation.Name(ns+"-leaving-pool", "")}, &v1.CelldStorageReservation{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a parent being deleted must not get a pool: %v", err)
	}
}

// staleCache answers reads of the fleets it holds with the copy it was given, as an informer
// that has not seen a later event yet would; everything else is read from the API server.
type staleCache struct {
	client.Client
	held map[types.NamespacedName]*v1.CelldFleet
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if f, ok := c.held[key]; ok {
		if out, ok := obj.(*v1.CelldFleet); ok {
			f.DeepCopyInto(out)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestAPreviewCreatedAsItsParentIsDeletedCreatesNothing: the parent's deletion is accepted, a
// preview of it is created at once, and the cache still holds the parent as it was. The
// creation rests on the parent's checks, so they read the API server: the preview is Blocked
// (ParentDeleting) and neither a fleet nor a pool is created.
func TestAPreviewCreatedAsItsParentIsDeletedCreatesNothing(t *testing.T) {
	ns := namespace(t)
	parent := createParent(t, ns, "going", ns+"-going-pool")
	parent.Finalizers = []string{"example.com/hold"}
	if err := admin.Update(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	before := parent.DeepCopy()
	if err := admin.Delete(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		parent.Finalizers = nil
		_ = admin.Update(context.Background(), parent)
	})
	r, _ := newReconciler()
	r.Client = staleCache{Client: admin, held: map[types.NamespacedName]*v1.CelldFleet{client.ObjectKeyFromObject(before): before}}
	p := createPreview(t, ns, "racing", parent.Name, 0)
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewBlocked, v1.ReasonParentDeleting, ns+"/going is being deleted")
	if got := fleets(t, ns); len(got) != 0 {
		t.Errorf("a preview of a parent being deleted created %d fleets", len(got))
	}
	err := admin.Get(context.Background(), client.ObjectKey{Name: reservation.Name(ns+"-going-pool", "")}, &v1.CelldStorageReservation{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a parent being deleted must not get a pool: %v", err)
	}
}

// TestPreviewsGetDisjointPrefixesInOnePool: the first preview reserves the parent's preview
// bucket to the parent UID; each preview gets its own fleet, prefix and URL.
func TestPreviewsGetDisjointPrefixesInOnePool(t *testing.T) {
	r, _ := newReconciler()
	ns := namespace(t)
	parent := createParent(t, ns, "development", ns+"-pool")
	seen := map[string]bool{}
	for i := range 3 {
		p := createPreview(t, ns, fmt.Sprintf("pr-%d", i), parent.Name, 0)
		reconcileOnce(t, r, p) // the finalizer
		reconcileOnce(t, r, p)
		live := expect(t, p, v1.PreviewPending, v1.ReasonFleetPending)
		name := FleetName(live)
		if live.Status.FleetName != name || live.Annotations[v1.AnnotationPreviewFleet] != name ||
			live.Status.StorageURL != "s3://"+ns+"-pool/"+name || live.Status.URL != "https://"+name+".previews.example.com" {
			t.Errorf("%s: status names the fleet, its storage URL and URL: %+v (intent %q)", p.Name, live.Status, live.Annotations[v1.AnnotationPreviewFleet])
		}
		if live.Status.ExpiresAt == nil || !live.Status.ExpiresAt.Time.Equal(live.CreationTimestamp.Add(24*time.Hour)) {
			t.Errorf("%s: expiresAt is creation plus the default day: %v", p.Name, live.Status.ExpiresAt)
		}
		f := &v1.CelldFleet{}
		if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, f); err != nil {
			t.Fatalf("%s: the generated fleet: %v", p.Name, err)
		}
		if seen[f.Spec.Storage.Prefix] {
			t.Errorf("prefix %s is given twice", f.Spec.Storage.Prefix)
		}
		seen[f.Spec.Storage.Prefix] = true
		if ref := f.Spec.Storage.PreviewFleetRef; ref == nil || ref.UID != string(parent.UID) {
			t.Errorf("%s: the fleet is bound to the parent UID: %+v", p.Name, ref)
		}
	}
	pool := &v1.CelldStorageReservation{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: reservation.Name(ns+"-pool", "")}, pool); err != nil {
		t.Fatalf("the first preview reserves the pool: %v", err)
	}
	if ok, why := reservation.PoolMatches(pool, parent); !ok {
		t.Errorf("the pool is the parent's: %s", why)
	}
}

// TestAGeneratedFleetIsRestoredAndNeverRecreated: a hand edit of the generated fleet is
// undone; a fleet deleted by hand is FleetMissing and nothing is created at its prefix again.
func TestAGeneratedFleetIsRestoredAndNeverRecreated(t *testing.T) {
	r, _ := newReconciler()
	ctx := context.Background()
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
	f.Spec.Replicas = new(int32(3))
	f.Spec.Env = append(f.Spec.Env, v1.EnvVar{Name: "CELLD_LOG", Value: new("debug")})
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	if err := admin.Get(ctx, key, f); err != nil {
		t.Fatal(err)
	}
	if *f.Spec.Replicas != 1 || len(f.Spec.Env) != 5 {
		t.Errorf("the hand edit must be restored: replicas %d, env %v", *f.Spec.Replicas, f.Spec.Env)
	}

	if err := admin.Delete(ctx, f); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewBlocked, v1.ReasonFleetMissing, key.String(), "never recreated", "create a new one")
	if err := admin.Get(ctx, key, &v1.CelldFleet{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing fleet must never be recreated: %v", err)
	}
}

// TestAnExpiredPreviewDeletesItsFleetAndStays: at the TTL the fleet is deleted (through its
// finalizer) and the preview stays, Expired.
func TestAnExpiredPreviewDeletesItsFleetAndStays(t *testing.T) {
	r, clk := newReconciler()
	ctx := context.Background()
	ns := namespace(t)
	createParent(t, ns, "development", ns+"-pool")
	p := createPreview(t, ns, "short", "development", 60)
	reconcileOnce(t, r, p)
	res := reconcileOnce(t, r, p)
	if res.RequeueAfter <= 0 || res.RequeueAfter > 61*time.Second {
		t.Errorf("a live preview wakes at its expiry, got %s", res.RequeueAfter)
	}
	key := types.NamespacedName{Namespace: ns, Name: FleetName(get(t, p))}
	f := &v1.CelldFleet{}
	if err := admin.Get(ctx, key, f); err != nil {
		t.Fatal(err)
	}
	f.Finalizers = []string{v1.FinalizerLifecycleProtection} // the fleet reconciler's, held here
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	clk.t = get(t, p).CreationTimestamp.Add(61 * time.Second)
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewExpired, v1.ReasonPreviewExpired, "shutting down")
	if err := admin.Get(ctx, key, f); err != nil || f.DeletionTimestamp == nil {
		t.Fatalf("on expiry the fleet is deleted through its finalizer: %v %v", err, f.DeletionTimestamp)
	}
	f.Finalizers = nil
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	live := expect(t, p, v1.PreviewExpired, v1.ReasonPreviewExpired, "is deleted", "retained")
	if live.DeletionTimestamp != nil {
		t.Error("an expired preview stays")
	}
	if len(fleets(t, ns)) != 0 {
		t.Error("an expired preview never creates a fleet again")
	}
}

// TestDeletingAPreviewWaitsForItsFleet: the preview keeps its finalizer until the fleet's
// own finalizer is done.
func TestDeletingAPreviewWaitsForItsFleet(t *testing.T) {
	r, _ := newReconciler()
	ctx := context.Background()
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
	f.Finalizers = []string{v1.FinalizerLifecycleProtection}
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, get(t, p)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewDeleting, v1.ReasonPreviewDeleting, key.String())
	if err := admin.Get(ctx, key, f); err != nil || f.DeletionTimestamp == nil {
		t.Fatalf("the preview's deletion deletes its fleet: %v %v", err, f.DeletionTimestamp)
	}
	f.Finalizers = nil
	if err := admin.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(p), &v1.CelldPreview{}); !apierrors.IsNotFound(err) {
		t.Errorf("once its fleet is gone the preview is released: %v", err)
	}
}

// TestAPoolNeverTakesABucketSomeoneHolds: a parent whose preview bucket a fleet holds (or an
// earlier parent of the same name) gets StorageScopeConflict and nothing is created.
func TestAPoolNeverTakesABucketSomeoneHolds(t *testing.T) {
	r, _ := newReconciler()
	ns := namespace(t)
	holder := createParent(t, ns, "holder", "")
	held := reservation.Desired(holder)
	if err := admin.Create(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	createParent(t, ns, "development", holder.Spec.Storage.Bucket)
	p := createPreview(t, ns, "pr-1", "development", 0)
	reconcileOnce(t, r, p)
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewBlocked, v1.ReasonStorageScopeConflict, held.Name, "fleet "+ns+"/holder", "nothing was created")
	if len(fleets(t, ns)) != 0 {
		t.Error("a pool conflict creates no fleet")
	}
}

// seededPreview creates a preview of parent asking for cart-1 and cart-2 from source.
func seededPreview(t *testing.T, ns, name, parent, source string) *v1.CelldPreview {
	t.Helper()
	p := &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: parent},
			Seed: &v1.PreviewSeed{Source: source, Objects: []v1.SeedObject{{Class: "Cart", ID: "cart-1"}, {Class: "Cart", ID: "cart-2"}}}}}
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// withSeeding creates a parent whose previews may seed from alias "production", bound to
// source's namespace, name and uid.
func withSeeding(t *testing.T, ns, name string, source *v1.CelldFleet, uid string) *v1.CelldFleet {
	t.Helper()
	return createFleetObject(t, ns, name, func(f *v1.CelldFleet) {
		f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: ns + "-" + name + "-pool"},
			Seeding: &v1.PreviewSeeding{Executor: "snapshot", Sources: []v1.SeedSource{{Name: "production",
				FleetRef: v1.SeedFleetRef{Namespace: source.Namespace, Name: source.Name, UID: uid}}}}}
	})
}

// TestASeededPreviewNeedsAnAuthorizedSource: a seed is refused (SeedNotAuthorized, nothing
// created) unless the parent approves seeding, the alias, and the source fleet still has the
// UID the grant names.
func TestASeededPreviewNeedsAnAuthorizedSource(t *testing.T) {
	r, _ := newReconciler()
	ns := namespace(t)
	source := createParent(t, ns, "production", "")
	createParent(t, ns, "plain", ns+"-plain-pool")
	withSeeding(t, ns, "stale", source, "not-"+string(source.UID))
	withSeeding(t, ns, "development", source, string(source.UID))

	for _, c := range []struct {
		preview, parent, source string
		mentions                []string
	}{
		{"no-seeding", "plain", "production", []string{"does not authorize seeds", "spec.previews.seeding", "without spec.seed"}},
		{"unknown-alias", "development", "staging", []string{`source "staging"`, "approved: production", "spec.seed is fixed"}},
		{"recreated-source", "stale", "production", []string{"now has UID " + string(source.UID), "never passes to a fleet recreated"}},
	} {
		p := seededPreview(t, ns, c.preview, c.parent, c.source)
		reconcileOnce(t, r, p)
		reconcileOnce(t, r, p)
		expect(t, p, v1.PreviewBlocked, v1.ReasonSeedNotAuthorized, c.mentions...)
	}
	if got := fleets(t, ns); len(got) != 0 {
		t.Fatalf("an unauthorized seed creates no fleet, got %d", len(got))
	}
}

// TestASeededPreviewRecordsItsSeedAndWaits: an authorized seed is generated into the child's
// storage.seed (executor, the bound source fleet, the selection, the preview), and the
// preview reports the child's wait for its seed as Initializing.
func TestASeededPreviewRecordsItsSeedAndWaits(t *testing.T) {
	r, _ := newReconciler()
	ns := namespace(t)
	source := createParent(t, ns, "production", "")
	parent := withSeeding(t, ns, "development", source, string(source.UID))
	p := seededPreview(t, ns, "seeded", "development", "production")
	reconcileOnce(t, r, p)
	reconcileOnce(t, r, p)
	live := expect(t, p, v1.PreviewPending, v1.ReasonFleetPending)

	child := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: FleetName(live)}, child); err != nil {
		t.Fatal(err)
	}
	want := &v1.SeedRequest{Executor: "snapshot", Source: "production", Alarms: "Clear",
		SourceFleet: v1.SeedFleetRef{Namespace: ns, Name: "production", UID: string(source.UID)},
		Objects:     []v1.SeedObject{{Class: "Cart", ID: "cart-1"}, {Class: "Cart", ID: "cart-2"}},
		Preview:     v1.SeedPreviewRef{Name: "seeded", UID: string(live.UID)}}
	if !equality.Semantic.DeepEqual(child.Spec.Storage.Seed, want) {
		t.Fatalf("the child's seed request:\n got %+v\nwant %+v", child.Spec.Storage.Seed, want)
	}
	if child.Spec.Storage.PreviewFleetRef.UID != string(parent.UID) {
		t.Fatal("the seeded child is bound to its parent")
	}

	child.Status.ObservedGeneration = child.Generation
	child.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonSeedInitializing,
		Message: "waits for executor snapshot to claim its seed", LastTransitionTime: metav1.Now()}}
	if err := admin.Status().Update(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, p)
	expect(t, p, v1.PreviewInitializing, v1.ReasonSeedInitializing, "waits for its seed", "executor snapshot")

	// The seed is part of spec.storage, which admission keeps as created.
	edited := child.DeepCopy()
	edited.Spec.Storage.Seed = nil
	if err := admin.Update(context.Background(), edited); err == nil {
		t.Fatal("spec.storage is immutable at admission, seed included")
	}
}
