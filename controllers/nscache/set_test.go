package nscache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/nscache"
	"github.com/celld/celld-operator/tests/apiserver"
)

var (
	scheme  = runtime.NewScheme()
	testCfg *rest.Config
	admin   client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_ = clientgoscheme.AddToScheme(scheme)
	cfg, stop, err := apiserver.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers/nscache:", err)
		return 1
	}
	defer stop()
	testCfg = cfg
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newSet starts a Set as the user (empty: the admin) until the test ends.
func newSet(t *testing.T, user string) *nscache.Set {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := nscache.New(cfg, scheme, mapper, func(context.Context) (nscache.APIs, error) { return nscache.APIs{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	s.SyncTimeout = 20 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = s.Start(ctx) }()
	return s
}

// reader polls until the Set has started and returns the namespace's reader.
func reader(t *testing.T, s *nscache.Set, ns string) (client.Reader, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := s.Reader(context.Background(), ns)
		if err == nil || time.Now().After(deadline) || apierrors.IsForbidden(err) {
			return r, err
		}
	}
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "nscache-"}}
	if err := admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func service(ns, name string, labelled bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if labelled {
		s.Labels = map[string]string{v1.LabelFleetUID: "uid-1"}
	}
	return s
}

func services(t *testing.T, r client.Reader, ns string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ServiceList"})
	if err := r.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list.Items {
		names = append(names, i.GetName())
	}
	return names
}

// awaitEvent reads Events until one names ns/name, or fails at the deadline.
func awaitEvent(t *testing.T, s *nscache.Set, ns, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-s.Events():
			if e.Object.GetNamespace() == ns && e.Object.GetName() == name {
				return
			}
		case <-timeout:
			t.Fatalf("no event for %s/%s within 10s", ns, name)
		}
	}
}

func TestCacheHoldsLabelledChildrenAndAllClaims(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	claim := func(name string) *corev1.PersistentVolumeClaim { return claimIn(ns, name) }
	for _, o := range []client.Object{
		service(ns, "ours", true), service(ns, "theirs", false),
		claim("data-f-0"), claim("data-f-12"), claim("data-f-1-0"), claim("data-ff-0"), claim("scratch"),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "celld"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s := newSet(t, "")
	r, err := reader(t, s, ns)
	if err != nil {
		t.Fatal(err)
	}
	if got := services(t, r, ns); len(got) != 1 || got[0] != "ours" {
		t.Fatalf("cached Services = %v, want only the labelled one", got)
	}
	// A selection of one fleet's objects goes through the fleet UID index and finds them.
	ours := &unstructured.UnstructuredList{}
	ours.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceList"))
	if err := r.List(ctx, ours, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: service(ns, "ours", true).Labels[v1.LabelFleetUID]}); err != nil || len(ours.Items) != 1 || ours.Items[0].GetName() != "ours" {
		t.Fatalf("the fleet's Services by its UID label = %v, %v; want [ours]", ours.Items, err)
	}
	if err := r.List(ctx, ours, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: "another"}); err != nil || len(ours.Items) != 0 {
		t.Fatalf("another fleet's Services = %v, %v; want none", ours.Items, err)
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 5 {
		t.Fatalf("claims: %v %v; want the unlabelled claims too (a foreign claim at a member's name must be seen)", claims.Items, err)
	}
	// A fleet's pass lists the claims at its member names only, through the index.
	for fleet, want := range map[string][]string{"f": {"data-f-0", "data-f-12"}, "f-1": {"data-f-1-0"}, "ff": {"data-ff-0"}, "g": nil} {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := r.List(ctx, claims, client.InNamespace(ns), client.MatchingFields{nscache.ClaimFleetIndex: fleet}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range claims.Items {
			got = append(got, c.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("claims of fleet %s = %v, want %v", fleet, got, want)
		}
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: "celld"}, sa); err != nil {
		t.Fatalf("ServiceAccount by name: %v", err)
	}
	route := &unstructured.Unstructured{}
	route.SetGroupVersionKind(nscache.GVKHTTPRoute)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, route); !meta.IsNoMatchError(err) {
		t.Fatalf("an unserved kind reads as %v, want a no-match error", err)
	}
	if svc := (&corev1.Service{}); r.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ours"}, svc) == nil {
		t.Fatal("a typed read of a kind cached unstructured must fail instead of starting an unrestricted informer")
	}
}

func TestEventsReportChangesOfCachedObjects(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	svc := service(ns, "ours", true)
	if err := admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	s := newSet(t, "")
	if _, err := reader(t, s, ns); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "ours") // the initial list
	svc.Spec.Ports[0].Port = 81
	if err := admin.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "ours")
	// A hand edit that removes the fleet label takes the object out of the cache: that is a
	// delete event for the fleet, which then finds its child missing.
	delete(svc.Labels, v1.LabelFleetUID)
	if err := admin.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "ours")
	r, err := s.Reader(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(services(t, r, ns)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("an unlabelled Service stayed in the cache")
		}
	}
}

func TestNamespaceWithoutRoleIsAccessDeniedUntilGranted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const user = "operator-without-role"
	s := newSet(t, user)
	_, err := reader(t, s, ns)
	if !nscache.AccessDenied(err) {
		t.Fatalf("reader without a Role: %v, want the authorizer's Forbidden", err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"", "apps", "networking.k8s.io", "policy"}, Resources: []string{"*"}, Verbs: []string{"list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "fleet"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err = s.Reader(ctx, ns); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader after the Role was granted: %v", err)
		}
	}
}

func TestAccessDeniedOnlyForTheAuthorizer(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"RBAC", apierrors.NewForbidden(gr, "", errors.New(`User "system:serviceaccount:celld-system:celld-operator" cannot list resource "pods" in API group "" in the namespace "team-a"`)), true},
		{"wrapped RBAC", fmt.Errorf("read the children: %w", apierrors.NewForbidden(gr, "", errors.New(`User "x" cannot watch resource "services"`))), true},
		{"admission webhook", apierrors.NewForbidden(gr, "m-0", errors.New(`admission webhook "policy.example.com" denied the request: no`)), false},
		{"quota", apierrors.NewForbidden(gr, "m-0", errors.New(`exceeded quota: compute, requested: pods=1`)), false},
		{"terminating namespace", apierrors.NewForbidden(gr, "m-0", errors.New(`unable to create new content in namespace team-a because it is being terminated`)), false},
		{"not found", apierrors.NewNotFound(gr, "m-0"), false},
		{"nil", nil, false},
	} {
		if got := nscache.AccessDenied(c.err); got != c.want {
			t.Errorf("%s: AccessDenied = %v, want %v", c.name, got, c.want)
		}
	}
}

func resourceOne() resource.Quantity { return resource.MustParse("1Gi") }

// TestAStatusOnlyChangeWakesNoFleetWhereNoDecisionReadsIt: a PodDisruptionBudget's status
// moves with every member's readiness, and no decision reads it, so a status-only update is
// not forwarded (and counted as woke="false"); a change of its labels is. An Ingress's status
// is RoutingReady's, so its status-only update is forwarded.
func TestAStatusOnlyChangeWakesNoFleetWhereNoDecisionReadsIt(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	labels := map[string]string{v1.LabelFleetUID: "uid-1"}
	pdb := func(name string) *policyv1.PodDisruptionBudget {
		one := intstr.FromInt32(1)
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	}
	budget, marker := pdb("budget"), pdb("marker")
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "route", Labels: labels},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "f", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	s := cacheOf(t, ns, budget, marker, ing)
	skippedBefore := childEventCount(t, "PodDisruptionBudget", "false")

	budget.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: budget.Generation, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 3}
	if err := admin.Status().Update(ctx, budget); err != nil {
		t.Fatal(err)
	}
	// One informer delivers its kind's events in order: once the marker's label change
	// arrives, the budget's status update was handled before it.
	marker.Labels = map[string]string{v1.LabelFleetUID: "uid-1", "touched": "yes"}
	if err := admin.Update(ctx, marker); err != nil {
		t.Fatal(err)
	}
	for e := range untilEvent(t, s, ns, "marker") {
		if e == "budget" {
			t.Fatal("a status-only update of a PodDisruptionBudget woke its fleet")
		}
	}
	if got := childEventCount(t, "PodDisruptionBudget", "false"); got <= skippedBefore {
		t.Fatalf("celld_operator_child_events_total{kind=PodDisruptionBudget,woke=false} = %v, want more than %v", got, skippedBefore)
	}

	budget.Labels = map[string]string{v1.LabelFleetUID: "uid-1", "edited": "by-hand"}
	if err := admin.Update(ctx, budget); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "budget")

	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.7"}}
	if err := admin.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "route")
}

// untilEvent yields the names of the events of namespace ns until the one for name, which it
// does not yield, or fails at the deadline; with name "" it yields every event until the
// caller stops.
func untilEvent(t *testing.T, s *nscache.Set, ns, name string) func(func(string) bool) {
	t.Helper()
	return func(yield func(string) bool) {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case e := <-s.Events():
				if e.Object.GetNamespace() != ns {
					continue
				}
				if (name != "" && e.Object.GetName() == name) || !yield(e.Object.GetName()) {
					return
				}
			case <-timeout:
				t.Fatalf("no event for %s/%s within 10s", ns, name)
			}
		}
	}
}

// childEventCount reads celld_operator_child_events_total{kind, woke} from the registry.
func childEventCount(t *testing.T, kind, woke string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "celld_operator_child_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["kind"] == kind && got["woke"] == woke {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestAClaimsAnnotationsAloneWakeNoFleet: the scheduler, the PV controller and provisioners
// annotate a claim several times while it binds, and no decision reads those annotations; a
// change of its phase wakes the fleet.
func TestAClaimsAnnotationsAloneWakeNoFleet(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	claim := func(name string) *corev1.PersistentVolumeClaim { return claimIn(ns, name) }
	data, marker := claim("data-f-0"), claim("data-f-1")
	s := cacheOf(t, ns, data, marker)

	data.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-a"}
	if err := admin.Update(ctx, data); err != nil {
		t.Fatal(err)
	}
	marker.Labels = map[string]string{"touched": "yes"}
	if err := admin.Update(ctx, marker); err != nil {
		t.Fatal(err)
	}
	for name := range untilEvent(t, s, ns, "data-f-1") {
		if name == "data-f-0" {
			t.Fatal("an annotation-only update of a claim woke its fleet")
		}
	}

	data.Status.Phase = corev1.ClaimLost
	if err := admin.Status().Update(ctx, data); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, s, ns, "data-f-0")
}

// claimIn is a one-byte ReadWriteOnce claim.
func claimIn(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOne()}}}}
}

// cacheOf creates objs in namespace ns, starts a Set there and waits for the initial event of
// each, in whatever order the informers deliver them.
func cacheOf(t *testing.T, ns string, objs ...client.Object) *nscache.Set {
	t.Helper()
	for _, o := range objs {
		if err := admin.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	s := newSet(t, "")
	if _, err := reader(t, s, ns); err != nil {
		t.Fatal(err)
	}
	waiting := map[string]bool{}
	for _, o := range objs {
		waiting[o.GetName()] = true
	}
	for name := range untilEvent(t, s, ns, "") {
		if delete(waiting, name); len(waiting) == 0 {
			break
		}
	}
	return s
}
