package fleet

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/apiserver"
)

// These tests run the reconciler against a real kube-apiserver and etcd (no controllers, no
// nodes): enough to prove the guards, the reservation arbitration and the write discipline.

var (
	testCfg    *rest.Config
	testScheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	_ = clientgoscheme.AddToScheme(testScheme)
	_ = v1.AddToScheme(testScheme)
	cfg, stop, err := apiserver.Start("config/crd/bases")
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers/fleet:", err)
		return 1
	}
	defer stop()
	testCfg = cfg
	return m.Run()
}

// writeCounter counts the write requests a client sends.
type writeCounter struct {
	next  http.RoundTripper
	count *atomic.Int64
}

// reads counts every GET of every reconciler in the package, and dryRuns every dry-run
// request, for the read-cost report.
var reads, dryRuns atomic.Int64

func (w writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.URL.Query().Has("dryRun"):
		dryRuns.Add(1) // a dry-run update compares content and persists nothing
	case req.Method != http.MethodGet:
		w.count.Add(1)
	default:
		reads.Add(1)
	}
	return w.next.RoundTrip(req)
}

// newReconciler builds a reconciler whose every request is counted in writes.
func newReconciler(t *testing.T, o Options, writes *atomic.Int64) (*Reconciler, client.Client) {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writeCounter{rt, writes} })
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := children.NewFleetRenderer()
	if err != nil {
		t.Fatal(err)
	}
	return &Reconciler{
		Client: c, Direct: c, Options: o, Children: renderer, Applier: &children.Applier{}, Drift: &drift.Detector{},
		APIs: func(context.Context) (bool, bool, error) { return false, false, nil },
	}, admin
}

func testOptions() Options {
	o := DefaultOptions()
	o.NetworkPolicyEnforced = true
	o.StorageProvisioners = []string{"test.csi.example"}
	return o
}

// setup creates a namespace with the runtime ServiceAccount and a suitable StorageClass.
func setup(t *testing.T, admin client.Client) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fleet-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "celld-runtime"}}
	if err := admin.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	storageClass(t, admin, "gp3", storagev1.VolumeBindingWaitForFirstConsumer, "test.csi.example")
	return ns.Name
}

func storageClass(t *testing.T, admin client.Client, name string, mode storagev1.VolumeBindingMode, provisioner string) {
	t.Helper()
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		ReclaimPolicy: &reclaim, VolumeBindingMode: &mode}
	if err := admin.Create(context.Background(), sc); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func createFleet(t *testing.T, admin client.Client, ns, name, bucket string, mutate func(*v1.CelldFleet)) *v1.CelldFleet {
	t.Helper()
	f := corpus.Persistent()
	f.Namespace, f.Name, f.Spec.Storage.Bucket = ns, name, bucket
	if mutate != nil {
		mutate(f)
	}
	if err := admin.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

func reconcileOnce(t *testing.T, r *Reconciler, f *v1.CelldFleet) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// blocked returns the Blocked condition after a reconcile.
func blocked(t *testing.T, admin client.Client, f *v1.CelldFleet) *metav1.Condition {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked)
	if c == nil {
		t.Fatalf("fleet %s has no Blocked condition: %+v", f.Name, live.Status.Conditions)
	}
	return c
}

func TestGuardsReportWhyAFleetIsNotProvisioned(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	storageClass(t, admin, "immediate", storagev1.VolumeBindingImmediate, "test.csi.example")
	storageClass(t, admin, "foreign", storagev1.VolumeBindingWaitForFirstConsumer, "other.csi.example")
	for _, c := range []struct {
		name, reason, mentions string
		options                func(*Options)
		mutate                 func(*v1.CelldFleet)
	}{
		{name: "unattested", reason: v1.ReasonIsolationUnverified, mentions: "--network-policy-enforced",
			options: func(o *Options) { o.NetworkPolicyEnforced = false }},
		{name: "no-sa", reason: v1.ReasonServiceAccountMissing, mentions: "ServiceAccount " + ns + "/missing",
			mutate: func(f *v1.CelldFleet) { f.Spec.ServiceAccountName = "missing" }},
		{name: "no-class", reason: v1.ReasonStorageClassMissing, mentions: "StorageClass absent",
			mutate: func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = new("absent") }},
		{name: "immediate", reason: v1.ReasonInvalidStorageClass, mentions: "WaitForFirstConsumer",
			mutate: func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = new("immediate") }},
		{name: "foreign-csi", reason: v1.ReasonInvalidStorageClass, mentions: "other.csi.example",
			mutate: func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = new("foreign") }},
	} {
		rr := *r
		if c.options != nil {
			c.options(&rr.Options)
		}
		f := createFleet(t, admin, ns, c.name, ns+"-"+c.name, c.mutate)
		reconcileOnce(t, &rr, f)
		b := blocked(t, admin, f)
		if b.Status != metav1.ConditionTrue || b.Reason != c.reason || !strings.Contains(b.Message, c.mentions) {
			t.Errorf("%s: want Blocked=True %s mentioning %q, got %s %s: %s", c.name, c.reason, c.mentions, b.Status, b.Reason, b.Message)
		}
		assertNothingProvisioned(t, admin, ns, c.name)
	}
}

func assertNothingProvisioned(t *testing.T, admin client.Client, ns, name string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc); err == nil {
		t.Errorf("%s: a blocked fleet must not be provisioned, but Service %s exists", name, name)
	}
}

// TestABucketIsReservedToOneFleetUIDForever: the first fleet to ask for a bucket keeps it;
// another fleet, or the same name recreated (a new UID), is refused and adopts nothing.
func TestABucketIsReservedToOneFleetUIDForever(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	first := createFleet(t, admin, ns, "first", ns+"-shared", nil)
	reconcileOnce(t, r, first)
	if b := blocked(t, admin, first); b.Status != metav1.ConditionFalse {
		t.Fatalf("the first fleet must get the bucket: %s %s", b.Reason, b.Message)
	}
	second := createFleet(t, admin, ns, "second", ns+"-shared", nil)
	reconcileOnce(t, r, second)
	if b := blocked(t, admin, second); b.Reason != v1.ReasonStorageScopeConflict || !strings.Contains(b.Message, ns+"-shared") {
		t.Fatalf("a second fleet on a reserved bucket must report StorageScopeConflict naming it, got %s: %s", b.Reason, b.Message)
	}
	assertNothingProvisioned(t, admin, ns, "second")

	// Recreate "first" under the same name: a new UID does not inherit the reservation.
	forceDelete(t, admin, first)
	again := createFleet(t, admin, ns, "first", ns+"-shared", nil)
	reconcileOnce(t, r, again)
	if b := blocked(t, admin, again); b.Reason != v1.ReasonStorageScopeConflict {
		t.Fatalf("a fleet recreated under the same name must not take the bucket, got %s: %s", b.Reason, b.Message)
	}
}

// TestTuningMayChangeAfterTheReservationRecordsIt: execution, lifecycle, env and telemetry
// are mutable; the reserved-tuning record keeps the reservation verifying.
func TestTuningMayChangeAfterTheReservationRecordsIt(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "tuned", ns+"-tuned", nil)
	reconcileOnce(t, r, f)
	live := &v1.CelldFleet{}
	_ = admin.Get(context.Background(), client.ObjectKeyFromObject(f), live)
	live.Spec.Env = []v1.EnvVar{{Name: "CELLD_LOG", Value: new("debug")}}
	live.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 10, TerminationGraceSeconds: 20}
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, f)
	if b := blocked(t, admin, f); b.Reason == v1.ReasonStorageScopeConflict {
		t.Fatalf("changing tuning must not lose the bucket: %s", b.Message)
	}
}

// TestASettledReconcileWritesNothing: once a pass has applied everything, the next pass over
// unchanged objects sends no write at all.
func TestASettledReconcileWritesNothing(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "quiet", ns+"-quiet", nil)
	for range 3 {
		reconcileOnce(t, r, f)
	}
	if writes.Load() == 0 {
		t.Fatal("the first passes must have created the fleet's objects")
	}
	writes.Store(0)
	readsBefore, dryRunsBefore := reads.Load(), dryRuns.Load()
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	if n := writes.Load(); n != 0 {
		t.Fatalf("a settled fleet's reconcile sent %d writes, want 0", n)
	}
	if n := dryRuns.Load() - dryRunsBefore; n != 0 {
		t.Fatalf("a settled fleet's reconcile sent %d dry-run comparisons, want 0: verified contents are remembered", n)
	}
	t.Logf("a settled reconcile reads %d objects or lists from the API server", (reads.Load()-readsBefore)/2)
}

// TestInvalidSpecFailsClosed: an object that bypassed admission (or was stored under an older,
// looser CRD) is not rendered: the fleet stops with InvalidConfiguration naming the field,
// instead of returning the error the chart or the API server would give on every pass.
func TestInvalidSpecFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name, field string
		mutate      func(f *v1.CelldFleet)
	}{
		{"zones outside the region", "spec.placement", func(f *v1.CelldFleet) {
			f.Spec.Placement.Zones = []string{"eu-west-1a"} // and azCount differs
		}},
		{"a telemetry egress label value of 64 characters", "spec.telemetry.egress.podLabels[app]", func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "http://otel.observability.svc:4318",
				Egress: v1.EgressTarget{PodLabels: map[string]v1.LabelValue{"app": v1.LabelValue(strings.Repeat("o", 64))}}}
		}},
		{"a telemetry egress label key with two slashes", "spec.telemetry.egress.podLabels[a/b/c]", func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "http://otel.observability.svc:4318",
				Egress: v1.EgressTarget{PodLabels: map[string]v1.LabelValue{"a/b/c": "otel"}}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := corpus.Persistent()
			c.mutate(f)
			s := newScope(f, time.Now())
			r := &Reconciler{}
			stop, err := r.validate(context.Background(), s)
			v := lifecycle.Decide(s.find)
			if !stop || err != nil || v.Reason != v1.ReasonInvalidConfiguration {
				t.Fatalf("want a stop with InvalidConfiguration, got stop=%v err=%v reason=%s", stop, err, v.Reason)
			}
			if !strings.Contains(v.Message, c.field) || !strings.Contains(v.Message, "CelldFleet /f") {
				t.Fatalf("the message must name the fleet and %s: %s", c.field, v.Message)
			}
		})
	}
}

// forceDelete deletes a fleet without its finalizers (no controllers run here to finish a
// deletion) and waits until it is gone.
func forceDelete(t *testing.T, admin client.Client, f *v1.CelldFleet) {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = nil
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	waitGone(t, admin, live)
}

func waitGone(t *testing.T, admin client.Client, obj client.Object) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return admin.Get(ctx, client.ObjectKeyFromObject(obj), obj) != nil, nil
	})
	if err != nil {
		t.Fatalf("%s still exists", obj.GetName())
	}
}

// TestAForeignApplicationServiceShowsInRoutingReady: a Service at the fleet's name that is not
// the fleet's blocks provisioning (InfrastructureBlocked) and would take the route's traffic, so
// RoutingReady reports ServiceConflict naming it instead of a stale or missing condition.
func TestAForeignApplicationServiceShowsInRoutingReady(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routed"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9999}}}}
	if err := admin.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	f := createFleet(t, admin, ns, "routed", ns+"-routed", func(f *v1.CelldFleet) {
		f.Spec.Routing = &v1.RoutingSpec{
			Hostnames: []string{"app.example.com"},
			Source:    v1.RoutingSource{Namespace: "ingress-nginx", PodLabels: map[string]v1.LabelValue{"app": "ingress"}},
			Ingress:   &v1.IngressRouting{ClassName: "nginx"},
		}
	})
	reconcileOnce(t, r, f)
	if b := blocked(t, admin, f); b.Reason != v1.ReasonInfrastructureBlocked {
		t.Fatalf("Blocked = %s: %s; want InfrastructureBlocked", b.Reason, b.Message)
	}
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionRoutingReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonServiceConflict || !strings.Contains(c.Message, "Service "+ns+"/routed") {
		t.Fatalf("RoutingReady = %+v; want False/ServiceConflict naming Service %s/routed", c, ns)
	}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.Spec.Ports[0].Port != 9999 {
		t.Fatalf("the foreign Service must be left untouched: %v %+v", err, foreign.Spec.Ports)
	}
}

// TestAGoneFleetIsForgotten: the render cache and the drift verdicts are bounded by live fleets;
// once a fleet is gone, its reconcile drops what was kept for it.
func TestAGoneFleetIsForgotten(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "gone", ns+"-gone", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	if r.Children.Cached() != 1 || r.Drift.Len() == 0 {
		t.Fatalf("a live fleet's render (%d cached) and workload verdict (%d) must be kept", r.Children.Cached(), r.Drift.Len())
	}
	forceDelete(t, admin, f)
	reconcileOnce(t, r, f)
	if r.Children.Cached() != 0 || r.Drift.Len() != 0 {
		t.Fatalf("after the fleet is gone, %d renders and %d verdicts are still kept", r.Children.Cached(), r.Drift.Len())
	}
}

// TestInvalidRoutingDoesNotBlock: a routing block that bypassed admission is reported on
// RoutingReady alone; the fleet is provisioned as usual and the route is left as it is.
func TestInvalidRoutingDoesNotBlock(t *testing.T) {
	r := &Reconciler{}
	for _, c := range []struct {
		name, field string
		routing     *v1.RoutingSpec
	}{
		{"neither a Gateway nor an Ingress", "spec.routing", &v1.RoutingSpec{}},
		{"a source label value of 64 characters", "spec.routing.source.podLabels[app]", &v1.RoutingSpec{
			Hostnames: []string{"app.example.com"}, Gateway: &v1.GatewayRouting{Name: "public"},
			Source: v1.RoutingSource{Namespace: "edge", PodLabels: map[string]v1.LabelValue{"app": v1.LabelValue(strings.Repeat("g", 64))}},
		}},
	} {
		f := corpus.Persistent()
		f.Spec.Routing = c.routing
		s := newScope(f, time.Now())
		stop, err := r.validate(context.Background(), s)
		if stop || err != nil || s.find.Blocked() {
			t.Fatalf("%s: an invalid routing block must not stop or block the pass: stop=%v err=%v blockers=%v", c.name, stop, err, s.find.Blockers)
		}
		if s.routing == nil || s.routing.Reason != v1.ReasonInvalidConfiguration || s.routing.Status != metav1.ConditionFalse {
			t.Fatalf("%s: RoutingReady = %+v, want False/InvalidConfiguration", c.name, s.routing)
		}
		if !strings.Contains(s.routing.Message, c.field) || !strings.Contains(s.routing.Message, "CelldFleet /f") {
			t.Fatalf("%s: the message must name the fleet and %s: %s", c.name, c.field, s.routing.Message)
		}
	}
	f := corpus.Persistent()
	f.Spec.Routing = &v1.RoutingSpec{}
	s := newScope(f, time.Now())
	if stop, err := r.validate(context.Background(), s); stop || err != nil {
		t.Fatalf("stop=%v err=%v", stop, err)
	}
	// A later routing finding (the applier keeping the existing route) does not hide it.
	s.setRouting(&metav1.Condition{Type: v1.ConditionRoutingReady, Reason: v1.ReasonGatewayAPIUnavailable})
	if s.routing.Reason != v1.ReasonInvalidConfiguration {
		t.Fatalf("RoutingReady was replaced by %s", s.routing.Reason)
	}
	// Invalid routing together with another invalid field fails closed.
	f.Spec.Placement.Zones = []string{"eu-west-1a"}
	s = newScope(f, time.Now())
	if stop, _ := r.validate(context.Background(), s); !stop || lifecycle.Decide(s.find).Reason != v1.ReasonInvalidConfiguration {
		t.Fatal("an invalid spec beyond routing must stop the pass with InvalidConfiguration")
	}
}
