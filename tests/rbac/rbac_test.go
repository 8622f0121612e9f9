package rbac

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

const (
	// chartNamespace is the chart's documented operator namespace.
	chartNamespace = "celld-system"
	// olmNamespace is where OLM installs AllNamespaces operators.
	olmNamespace = "operators"
	// olmOwnNamespace holds an OwnNamespace install: the operator and its fleets.
	olmOwnNamespace = "rbac-olm-own"
	chartFleets     = "rbac-chart-fleets"
	olmFleets       = "rbac-olm-fleets"
	deniedNamespace = "rbac-denied"
	fleetRoleName   = "celld-operator-fleet"
	fleetRoleFile   = "config/rbac/fleet_namespace_role.yaml"
	// eventReporter is the name fleet.New records the fleet's events under.
	eventReporter    = "celld-operator"
	scenarioDeadline = 4 * time.Minute
)

// scenario is one lifecycle run under one RBAC source; TestVerbsMatchManifests reads what the
// operator requested during it.
type scenario struct {
	completed bool
	src       *rbacSource
	rec       *recorder
}

// scenarios holds the runs of this process by source name. Tests run one at a time (none is
// parallel), so no lock is needed.
var scenarios = map[string]*scenario{}

// runScenario runs the lifecycle under the named RBAC source once per process.
func runScenario(t *testing.T, name string) *scenario {
	if s, ok := scenarios[name]; ok {
		return s
	}
	s := &scenario{}
	scenarios[name] = s
	// Registered first, so it runs after the operator stopped and every check ran.
	t.Cleanup(func() { s.completed = !t.Failed() })
	ctx, cancel := context.WithTimeout(context.Background(), scenarioDeadline)
	defer cancel()
	var fleetNS string
	switch name {
	case "chart":
		fleetNS = chartFleets
		ensureNamespace(ctx, t, chartNamespace)
		ensureNamespace(ctx, t, chartFleets)
		s.src = chartRBAC(t, chartNamespace, chartFleets)
	case "bundle":
		fleetNS = olmFleets
		ensureNamespace(ctx, t, olmNamespace)
		s.src = bundleRBAC(t, name, olmNamespace)
	case "bundle-own-namespace":
		fleetNS = olmOwnNamespace
		ensureNamespace(ctx, t, olmOwnNamespace)
		s.src = bundleRBAC(t, name, olmOwnNamespace, olmOwnNamespace)
	default:
		t.Fatalf("unknown scenario %q", name)
	}
	s.src.install(ctx, t)
	waitEffective(ctx, t, s.src)
	if len(s.src.watchNamespaces) > 0 {
		refuseClusterWideDeletes(ctx, t, s.src)
	}
	op := startOperator(ctx, t, s.src, nil)
	s.rec = op.rec
	checkMetricsEndpoint(ctx, t, op)
	driveLifecycle(ctx, t, op, fleetNS)
	drivePreview(ctx, t, op, fleetNS)
	return s
}

// TestChartRBAC: with only the chart's RBAC (fleetNamespaces: [rbac-chart-fleets]) a
// PersistentFleet goes from creation to Ready, through a rollout and through deletion.
func TestChartRBAC(t *testing.T) { runScenario(t, "chart") }

// TestBundleRBAC: the same with only the bundle CSV's RBAC, installed as OLM does for
// AllNamespaces (the fleet namespace has no Role of its own).
func TestBundleRBAC(t *testing.T) { runScenario(t, "bundle") }

// TestBundleOwnNamespaceRBAC: the same with the bundle CSV's RBAC installed as OLM does for an
// OwnNamespace OperatorGroup: clusterPermissions as a ClusterRole, permissions as a Role bound
// in the one namespace that holds the operator and its fleets, and the operator watching only
// that namespace. Before the operator starts, the API server must refuse it Pod and claim
// deletion anywhere else: the CSV's cluster-wide rules are the cluster-scoped ones only.
func TestBundleOwnNamespaceRBAC(t *testing.T) { runScenario(t, "bundle-own-namespace") }

// TestChartNamespaceAccessDenied: a fleet in a namespace that is not among the chart's
// fleetNamespaces reports NamespaceAccessDenied naming the Role to apply, in its status and in
// a Warning event delivered in that namespace (events are granted cluster-wide), and the
// operator creates nothing there (nor reserves its bucket).
func TestChartNamespaceAccessDenied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), scenarioDeadline)
	defer cancel()
	ensureNamespace(ctx, t, chartNamespace)
	ensureNamespace(ctx, t, chartFleets)
	fleetNamespace(ctx, t, deniedNamespace)
	src := chartRBAC(t, chartNamespace, chartFleets)
	for _, o := range src.objects {
		if o.GetNamespace() == deniedNamespace {
			t.Fatalf("the chart rendered %s %s into %s", o.GetKind(), o.GetName(), deniedNamespace)
		}
	}
	src.install(ctx, t)
	waitEffective(ctx, t, src)
	// Every namespaced read or write there is refused, except the event: the ClusterRole grants
	// events in every namespace, so a refused event write fails the test.
	op := startOperator(ctx, t, src, func(c call) bool { return c.Namespace == deniedNamespace && c.Resource != "events" })

	f := newFleet(deniedNamespace)
	if err := admin.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(f)
	var message string
	op.poll(ctx, t, 30*time.Second, "the fleet reports NamespaceAccessDenied", func(ctx context.Context) (bool, error) {
		live := &v1.CelldFleet{}
		if err := admin.Get(ctx, key, live); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked)
		if c == nil || c.Status != "True" || c.Reason != v1.ReasonNamespaceAccessDenied {
			return false, nil
		}
		if r := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionReady); r == nil || r.Status != "False" {
			return false, fatal("Blocked by NamespaceAccessDenied but Ready is %+v", r)
		}
		message = c.Message
		return true, nil
	}, func(ctx context.Context) string { return describeNamespace(ctx, key) })
	for _, want := range []string{fleetRoleName, fleetRoleFile, deniedNamespace} {
		if !strings.Contains(message, want) {
			t.Errorf("the NamespaceAccessDenied message does not name %q: %s", want, message)
		}
	}
	if len(op.rec.deniedCalls(nil)) == 0 {
		t.Errorf("NamespaceAccessDenied was reported without any 403 from the API server")
	}

	// The Warning event reaches the namespace the operator may not otherwise touch, recorded by
	// the operator (events.k8s.io/v1, reporting controller celld-operator) about this fleet.
	op.poll(ctx, t, 30*time.Second, "the NamespaceAccessDenied Warning event is delivered in the denied namespace", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := admin.List(ctx, events, client.InNamespace(deniedNamespace)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason != v1.ReasonNamespaceAccessDenied || e.Regarding.UID != f.UID {
				continue
			}
			switch {
			case e.Type != corev1.EventTypeWarning:
				return false, fatal("the NamespaceAccessDenied event is of type %q, want Warning", e.Type)
			case e.ReportingController != eventReporter:
				return false, fatal("the NamespaceAccessDenied event was reported by %q, want %q", e.ReportingController, eventReporter)
			case e.Regarding.Kind != "CelldFleet" || e.Regarding.Name != f.Name:
				return false, fatal("the NamespaceAccessDenied event is about %s %s, want CelldFleet %s", e.Regarding.Kind, e.Regarding.Name, f.Name)
			case !strings.Contains(e.Note, fleetRoleName):
				return false, fatal("the NamespaceAccessDenied event does not name %q: %s", fleetRoleName, e.Note)
			}
			return true, nil
		}
		return false, fmt.Errorf("no NamespaceAccessDenied event about fleet %s among %d events in %s", key, len(events.Items), deniedNamespace)
	}, func(ctx context.Context) string { return describeNamespace(ctx, key) })

	// Several reconciles (one per second) must create nothing in the namespace.
	res := types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}
	quiet := time.Now().Add(4 * time.Second)
	op.poll(ctx, t, 30*time.Second, "nothing is created in the denied namespace", func(ctx context.Context) (bool, error) {
		for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{},
			&networkingv1.NetworkPolicyList{}, &policyv1.PodDisruptionBudgetList{}, &corev1.PersistentVolumeClaimList{}, &corev1.PodList{}} {
			if err := admin.List(ctx, list, client.InNamespace(deniedNamespace)); err != nil {
				return false, err
			}
			if n := meta.LenList(list); n > 0 {
				return false, fatal("the operator created %d objects (%T) in %s without the fleet Role", n, list, deniedNamespace)
			}
		}
		if err := admin.Get(ctx, res, &v1.CelldStorageReservation{}); !apierrors.IsNotFound(err) {
			return false, fatal("a fleet the operator may not manage reserved its bucket (%v)", err)
		}
		return time.Now().After(quiet), nil
	}, nil)
	live := &v1.CelldFleet{}
	if err := admin.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	if len(live.Finalizers) > 0 {
		t.Errorf("a fleet the operator may not manage got finalizers %v", live.Finalizers)
	}
	if err := admin.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
}

// clusterWideDeletes are the destructive rights an install scoped to some namespaces must not
// hold outside them.
var clusterWideDeletes = []struct{ group, resource string }{{"", "pods"}, {"", "persistentvolumeclaims"}}

// refuseClusterWideDeletes checks, in the manifests and with the API server's authorizer, that
// the ServiceAccount of an installed src may delete Pods and claims in the namespaces it serves
// only: not cluster-wide, and not in a namespace outside them. It runs after waitEffective, so
// a refusal is not an RBAC informer that has not caught up yet.
func refuseClusterWideDeletes(ctx context.Context, t *testing.T, src *rbacSource) {
	t.Helper()
	for _, g := range src.grants(t) {
		for _, d := range clusterWideDeletes {
			if g.namespace == "" && g.allows("", d.group, d.resource, "delete") {
				t.Errorf("the %s RBAC binds delete on %s cluster-wide (%+v): an install scoped to %v may delete them in every namespace", src.name, d.resource, g, src.watchNamespaces)
			}
		}
	}
	user := "system:serviceaccount:" + src.operatorNamespace + ":" + src.serviceAccount
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + src.operatorNamespace, "system:authenticated"}
	// The served namespace must allow the deletes (else the check below proves nothing), an
	// unrelated namespace and the cluster scope must not.
	for _, ns := range []string{src.watchNamespaces[0], chartFleets, ""} {
		for _, d := range clusterWideDeletes {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Group: d.group, Resource: d.resource}}}
			if err := admin.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			served := slices.Contains(src.watchNamespaces, ns)
			switch {
			case served && !sar.Status.Allowed:
				t.Errorf("the %s RBAC does not let the operator delete %s in %s, a namespace it serves", src.name, d.resource, ns)
			case !served && sar.Status.Allowed:
				where := "cluster-wide"
				if ns != "" {
					where = "in namespace " + ns
				}
				t.Errorf("the %s RBAC lets the operator delete %s %s, outside the namespaces it serves %v (%s)", src.name, d.resource, where, src.watchNamespaces, sar.Status.Reason)
			}
		}
	}
}

// waitEffective waits until the API server's authorizer grants every rule of src to its
// ServiceAccount (RBAC objects take effect through an informer, not at once), so that a 403
// the operator later meets is the manifests' fault, not the test's.
func waitEffective(ctx context.Context, t *testing.T, src *rbacSource) {
	t.Helper()
	user := "system:serviceaccount:" + src.operatorNamespace + ":" + src.serviceAccount
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + src.operatorNamespace, "system:authenticated"}
	pending := src.grants(t)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var still []grant
		for _, g := range pending {
			res, sub, _ := strings.Cut(g.resource, "/")
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: g.namespace, Verb: g.verb, Group: g.group, Resource: res, Subresource: sub, Name: g.name}}}
			if err := admin.Create(ctx, sar); err != nil {
				return false, err
			}
			if !sar.Status.Allowed {
				still = append(still, g)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("the %s RBAC is not in effect for %s: %v; not yet granted: %+v", src.name, user, err, pending)
	}
}
