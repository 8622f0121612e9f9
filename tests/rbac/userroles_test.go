package rbac

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// userRolesNamespace holds the bindings of TestChartUserRolesAggregateIntoBuiltInRoles.
const userRolesNamespace = "rbac-user-roles"

// TestChartUserRolesAggregateIntoBuiltInRoles installs the chart's user ClusterRoles (the
// default rbac.aggregateToUserRoles) and binds people to the built-in view, edit and admin
// ClusterRoles only, as a namespace's owners do. The cluster's clusterrole-aggregation
// controller must copy the chart's rules into those roles: viewers read fleets, editors and
// admins also write fleets and scale them, nobody but the operator writes status, and no
// binding to a built-in role lets anyone write a reservation.
func TestChartUserRolesAggregateIntoBuiltInRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ensureNamespace(ctx, t, chartNamespace)
	ensureNamespace(ctx, t, userRolesNamespace)

	chart := chartRBAC(t, chartNamespace)
	roles := &rbacSource{name: "chart user roles", operatorNamespace: chartNamespace}
	for _, o := range chart.objects {
		if o.GetKind() == "ClusterRole" && aggregated(o) {
			roles.objects = append(roles.objects, o)
		}
	}
	if len(roles.objects) != 2 {
		t.Fatalf("the chart renders %d ClusterRoles aggregated into the built-in roles, want its view and edit roles", len(roles.objects))
	}
	bindings := &rbacSource{name: "built-in role bindings", operatorNamespace: chartNamespace}
	for _, b := range []struct{ user, role string }{{"fleet-viewer", "view"}, {"fleet-editor", "edit"}, {"fleet-admin", "admin"}} {
		bindings.add(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.user, Namespace: userRolesNamespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: b.user}}})
	}
	// Reservations are cluster-scoped: only a cluster-wide binding to view shows them.
	bindings.add(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-cluster-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cluster-viewer"}}})
	bindings.install(ctx, t)
	roles.install(ctx, t)

	type query struct {
		user, verb, resource, subresource string
		clusterScope                      bool
	}
	allowed := func(ctx context.Context, q query) (bool, error) {
		attrs := &authorizationv1.ResourceAttributes{Namespace: userRolesNamespace, Verb: q.verb, Group: v1.GroupVersion.Group, Resource: q.resource, Subresource: q.subresource}
		if q.clusterScope {
			attrs.Namespace = ""
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: q.user, Groups: []string{"system:authenticated"}, ResourceAttributes: attrs}}
		if err := admin.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	// The aggregation controller and the authorizer's informer both lag: every grant is polled
	// until it holds. Each built-in role appears among the grants, so once all hold, every
	// role carries the chart's rules and the refusals are asked once each (polling a refusal
	// would pass before a rule that wrongly grants it arrived).
	grants := []query{
		{user: "fleet-viewer", verb: "list", resource: "celldfleets"},
		{user: "fleet-viewer", verb: "get", resource: "celldfleets", subresource: "status"},
		{user: "fleet-viewer", verb: "get", resource: "celldfleets", subresource: "scale"},
		{user: "cluster-viewer", verb: "list", resource: "celldstoragereservations", clusterScope: true},
		{user: "fleet-editor", verb: "create", resource: "celldfleets"},
		{user: "fleet-editor", verb: "patch", resource: "celldfleets", subresource: "scale"},
		{user: "fleet-editor", verb: "watch", resource: "celldfleets"},
		{user: "fleet-admin", verb: "delete", resource: "celldfleets"},
		{user: "fleet-admin", verb: "update", resource: "celldfleets", subresource: "scale"},
		{user: "fleet-viewer", verb: "list", resource: "celldpreviews"},
		{user: "fleet-viewer", verb: "get", resource: "celldpreviews", subresource: "status"},
		{user: "fleet-editor", verb: "create", resource: "celldpreviews"},
		{user: "fleet-editor", verb: "delete", resource: "celldpreviews"},
	}
	refusals := []query{
		{user: "fleet-viewer", verb: "create", resource: "celldfleets"},
		{user: "fleet-viewer", verb: "patch", resource: "celldfleets", subresource: "scale"},
		{user: "fleet-viewer", verb: "list", resource: "celldstoragereservations", clusterScope: true},
		{user: "cluster-viewer", verb: "delete", resource: "celldstoragereservations", clusterScope: true},
		{user: "fleet-editor", verb: "update", resource: "celldfleets", subresource: "status"},
		{user: "fleet-editor", verb: "create", resource: "celldstoragereservations"},
		{user: "fleet-admin", verb: "patch", resource: "celldfleets", subresource: "status"},
		{user: "fleet-admin", verb: "update", resource: "celldfleets", subresource: "finalizers"},
		{user: "fleet-admin", verb: "delete", resource: "celldstoragereservations"},
		{user: "fleet-admin", verb: "update", resource: "celldstoragereservations", subresource: "status"},
		{user: "fleet-viewer", verb: "create", resource: "celldpreviews"},
		{user: "fleet-editor", verb: "patch", resource: "celldpreviews", subresource: "status"},
	}
	pending := grants
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var still []query
		for _, q := range pending {
			ok, err := allowed(ctx, q)
			if err != nil {
				return false, err
			}
			if !ok {
				still = append(still, q)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		t.Fatalf("the built-in roles did not take in the chart's rules (%v); not granted: %+v", err, pending)
	}
	for _, q := range refusals {
		ok, err := allowed(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Errorf("%s may %s %s/%s through a built-in role and the chart's aggregated rules", q.user, q.verb, q.resource, q.subresource)
		}
	}
}

// aggregated reports whether a ClusterRole's labels aggregate it into a built-in role.
func aggregated(o *unstructured.Unstructured) bool {
	for k, v := range o.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" {
			return true
		}
	}
	return false
}
