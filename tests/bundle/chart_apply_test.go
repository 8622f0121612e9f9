package bundle

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/celld/celld-operator/tests/chart/cases"
)

// TestChartRendersInstallOnARealAPIServer installs every case's render on a real
// kube-apiserver, in the case's own fresh release namespace (the fleet and dashboard
// namespaces are created first, as the README requires), twice over:
//   - created, one create each with strict field validation, as helm install does (a
//     server-side dry-run would skip admission of objects whose kind a CRD of the same render
//     introduces);
//   - then server-side applied for real, as Argo CD with ServerSideApply, Flux's
//     kustomize-controller and Helm 4 apply a render: the apply refuses fields the schemas do
//     not declare and duplicate keys in keyed lists (env, ports, volumes), and must take the
//     render without a conflict with the create; applied a second time it must change
//     nothing, or a GitOps tool would report drift forever.
func TestChartRendersInstallOnARealAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := chartServer.Client(t)
	installMonitoringCRDs(ctx, t, c)
	for i, cc := range chartCases() {
		t.Run(cc.Name, func(t *testing.T) {
			ns := fmt.Sprintf("chart-case-%d", i)
			for _, n := range append([]string{ns}, cc.Namespaces...) {
				createNamespace(ctx, t, c, n)
			}
			for _, sa := range cc.ServiceAccounts {
				if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
					t.Fatalf("create the ServiceAccount %s the values name: %v", sa, err)
				}
			}
			chrt, err := loader.Load(cc.dir(t))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := renderChart(t, chrt, cc.Values, ns)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			createAll(ctx, t, c, objs)
			applyAll(ctx, t, c, objs)
			if cc.Name == "defaults" {
				checkUserRolesOnTheServer(ctx, t, c, ns)
			}
		})
	}
}

// TestChartFleetNamespacesMustExist: the chart creates no Namespace, so a fleet namespace that
// does not exist fails the install (what the README and docs/install.md tell the user).
func TestChartFleetNamespacesMustExist(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := chartServer.Client(t)
	objs := mustRender(t, map[string]any{"fleetNamespaces": []any{"chart-fleets-missing"}})
	if n := len(kinds(objs, "Namespace")); n != 0 {
		t.Fatalf("the chart renders %d Namespaces; the README says fleet namespaces must exist beforehand", n)
	}
	role := one(t, objs, "Role", "celld-operator-fleet")
	err := c.Create(ctx, role.DeepCopy())
	if !apierrors.IsNotFound(err) {
		t.Errorf("creating the fleet Role in a namespace that does not exist returned %v, want NotFound", err)
	}
}

// createAll creates objs in Helm's order (CRDs first, established before anything else) and,
// when the test ends, deletes the cluster-scoped ones but the CRDs so the next case can create
// them again. Every case renders the same CRDs: a case after the first finds them, and they
// must equal its own (a CRD's deletion waits on the API server's finalizer, which a loaded
// machine can hold for minutes). Namespaced objects stay in their case's namespace.
func createAll(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	crds, rest := crdsFirst(objs)
	var created []*unstructured.Unstructured
	t.Cleanup(func() { deleteClusterScoped(t, c, created) })
	for _, o := range crds {
		err := c.Create(ctx, o.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict))
		if apierrors.IsAlreadyExists(err) {
			if first, ok := renderedCRDs[o.GetName()]; !ok || !equality.Semantic.DeepEqual(first, o.Object["spec"]) {
				t.Fatalf("CRD %s of this case differs from the one an earlier case created", o.GetName())
			}
		} else if err == nil {
			renderedCRDs[o.GetName()] = o.Object["spec"]
		} else {
			t.Fatalf("create CRD %s: %v", o.GetName(), err)
		}
		waitEstablished(ctx, t, c, o.GetName())
	}
	for _, o := range rest {
		if err := c.Create(ctx, o.DeepCopy(), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("create %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			continue
		}
		created = append(created, o)
	}
}

// crdsFirst splits a render into its CRDs and the rest, the order Helm installs them in.
func crdsFirst(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// applyManager is the field manager of the test's server-side applies, standing for a GitOps
// tool that takes over a Helm install.
const applyManager = "chart-test-apply"

// applyAll server-side applies every object of a render that createAll created, without
// forcing ownership, then applies them again and requires the second apply to write nothing
// (the object's resourceVersion stays).
func applyAll(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	crds, rest := crdsFirst(objs)
	ordered := append(crds, rest...)
	apply := func(o *unstructured.Unstructured) (string, error) {
		u := o.DeepCopy()
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(applyManager))
		return u.GetResourceVersion(), err
	}
	versions := map[int]string{}
	for i, o := range ordered {
		rv, err := apply(o)
		if err != nil {
			t.Errorf("server-side apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			continue
		}
		versions[i] = rv
	}
	for i, o := range ordered {
		first, ok := versions[i]
		if !ok {
			continue
		}
		rv, err := apply(o)
		if err != nil {
			t.Errorf("server-side apply %s %s/%s again: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		} else if rv != first {
			t.Errorf("applying %s %s/%s a second time changed it (resourceVersion %s, then %s): the render is not what the API server stores, and a GitOps tool would apply it forever",
				o.GetKind(), o.GetNamespace(), o.GetName(), first, rv)
		}
	}
}

// renderedCRDs are the CRD specs the first install case created, by name.
var renderedCRDs = map[string]any{}

func deleteClusterScoped(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		if err := c.Delete(ctx, o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		// A CRD is gone only once the API server has removed its objects and its endpoint.
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, &apiextensionsv1.CustomResourceDefinition{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			t.Errorf("CRD %s is not deleted: %v", o.GetName(), err)
		}
	}
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, err
		}
		return slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
		}), nil
	})
	if err != nil {
		t.Fatalf("CRD %s is not established: %v", name, err)
	}
}

func createNamespace(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// installMonitoringCRDs stands in for the Prometheus Operator's CRDs, which the metrics case's
// ServiceMonitor and PrometheusRule need.
func installMonitoringCRDs(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	for _, crd := range cases.MonitoringCRDs() {
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create the stand-in CRD %s: %v", crd.Name, err)
		}
		waitEstablished(ctx, t, c, crd.Name)
	}
}

// checkUserRolesOnTheServer binds the chart's view and edit ClusterRoles to two users in ns (as
// the aggregated view and edit roles would) and asks the API server's authorizer what each may
// do: the rules must name the real resources and subresources, not just look right.
func checkUserRolesOnTheServer(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	bind := func(user string, roles ...string) {
		for _, role := range roles {
			rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
			if err := c.Create(ctx, rb); err != nil {
				t.Fatal(err)
			}
		}
	}
	bind("viewer", "celld-operator-view")
	bind("editor", "celld-operator-view", "celld-operator-edit")
	// Reservations are cluster-scoped: only a ClusterRoleBinding (cluster-wide view) reads them.
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chart-cluster-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "celld-operator-view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cluster-viewer"}}}
	if err := c.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crb) })
	type query struct {
		user, verb, resource, subresource string
		want                              bool
	}
	allowed := func(q query) (bool, error) {
		attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: q.verb, Group: "celld.eric.dev", Resource: q.resource, Subresource: q.subresource}
		if q.resource == "celldstoragereservations" && q.user != "editor" {
			// A read of a cluster-scoped object carries no namespace. The editor's refusals are
			// asked in the namespace, where a RoleBinding would grant any listed resource, so
			// they prove the edit role does not list reservations at all.
			attrs.Namespace = ""
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: q.user, ResourceAttributes: attrs}}
		err := c.Create(ctx, sar)
		return sar.Status.Allowed, err
	}
	// Grants first: the authorizer reads bindings from an informer, so each is polled until it
	// is seen. Once every binding is seen, the refusals are asked once each (polling a refusal
	// would pass before the binding that wrongly grants it arrived).
	queries := []query{
		{"viewer", "list", "celldfleets", "", true},
		{"viewer", "get", "celldfleets", "status", true},
		{"cluster-viewer", "list", "celldstoragereservations", "", true},
		{"cluster-viewer", "get", "celldfleets", "", true},
		{"editor", "watch", "celldfleets", "", true},
		{"editor", "create", "celldfleets", "", true},
		{"editor", "delete", "celldfleets", "", true},
		{"editor", "patch", "celldfleets", "scale", true},
		{"viewer", "get", "celldstoragereservations", "", false},
		{"cluster-viewer", "delete", "celldstoragereservations", "", false},
		{"viewer", "create", "celldfleets", "", false},
		{"viewer", "update", "celldfleets", "scale", false},
		{"editor", "patch", "celldfleets", "status", false},
		{"editor", "update", "celldfleets", "finalizers", false},
		{"editor", "create", "celldstoragereservations", "", false},
		{"editor", "update", "celldstoragereservations", "", false},
		{"editor", "delete", "celldstoragereservations", "", false},
	}
	for _, q := range queries {
		var got bool
		var err error
		if q.want {
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				got, err = allowed(q)
				return got, err
			})
		} else {
			got, err = allowed(q)
		}
		if err != nil || got != q.want {
			t.Errorf("%s may %s %s/%s: %v (%v), want %v", q.user, q.verb, q.resource, q.subresource, got, err, q.want)
		}
	}
}
