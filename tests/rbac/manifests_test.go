package rbac

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/celld/celld-operator/tests/chart/cases"
	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// rbacSource is the RBAC of one install method: the objects to apply and the identity they
// grant to.
type rbacSource struct {
	name              string // the scenario: "chart", "bundle" or "bundle-own-namespace"
	operatorNamespace string
	serviceAccount    string
	// watchNamespaces restricts the operator's cache as WATCH_NAMESPACE does (empty: all).
	watchNamespaces []string
	objects         []*unstructured.Unstructured
}

// rbacKinds are the kinds an RBAC source contributes; the rest of a render is not applied.
var rbacKinds = map[string]bool{"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true}

// chartRBAC renders helm-charts/celld-operator as `helm template` does (values validated by
// values.schema.json, strict engine) into operatorNamespace with the given fleetNamespaces,
// and keeps the identity and RBAC objects.
func chartRBAC(t *testing.T, operatorNamespace string, fleetNamespaces ...string) *rbacSource {
	t.Helper()
	chrt, err := loader.Load(filepath.Join(root, cases.ChartDir))
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	nsList := make([]any, len(fleetNamespaces))
	for i, ns := range fleetNamespaces {
		nsList[i] = ns
	}
	manifest, err := cases.Manifest(chrt, map[string]any{"fleetNamespaces": nsList, "networkPolicyEnforced": true}, operatorNamespace)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	objs, err := decodeAll([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	src := &rbacSource{name: "chart", operatorNamespace: operatorNamespace, serviceAccount: "celld-operator"}
	for _, o := range objs {
		if rbacKinds[o.GetKind()] {
			src.objects = append(src.objects, o)
		}
	}
	return src
}

// bundleRBAC turns the committed CSV's install strategy into what OLM creates for an install
// in operatorNamespace whose OperatorGroup targets targetNamespaces (none: AllNamespaces).
// Each clusterPermissions entry becomes a ClusterRole and ClusterRoleBinding in every install
// mode. Each permissions entry becomes a ClusterRole and ClusterRoleBinding for AllNamespaces,
// and otherwise a Role and RoleBinding in the operator namespace, copied into every target
// namespace (OLM's OperatorGroup controller copies the operator namespace's Roles there). The
// operator then watches the target namespaces, as the Deployment's WATCH_NAMESPACE (from
// olm.targetNamespaces) tells main.go.
func bundleRBAC(t *testing.T, name, operatorNamespace string, targetNamespaces ...string) *rbacSource {
	t.Helper()
	path := root + "/bundle/manifests/" + gen.PackageName + ".clusterserviceversion.yaml"
	objs, err := gen.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	var csv *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ClusterServiceVersion" {
			csv = o
		}
	}
	if csv == nil {
		t.Fatalf("%s holds no ClusterServiceVersion", path)
	}
	mode := installMode(operatorNamespace, targetNamespaces)
	modes, _, _ := unstructured.NestedSlice(csv.Object, "spec", "installModes")
	if !slices.ContainsFunc(modes, func(m any) bool {
		mm, _ := m.(map[string]any)
		return mm["type"] == mode && mm["supported"] == true
	}) {
		t.Fatalf("the CSV does not support the %s install mode this test installs", mode)
	}
	src := &rbacSource{name: name, operatorNamespace: operatorNamespace, watchNamespaces: targetNamespaces}
	// OLM creates the permissions Roles in the operator namespace and copies them into each
	// target namespace.
	roleNamespaces := []string{operatorNamespace}
	for _, ns := range targetNamespaces {
		if !slices.Contains(roleNamespaces, ns) {
			roleNamespaces = append(roleNamespaces, ns)
		}
	}
	accounts := map[string]bool{}
	for _, field := range []string{"clusterPermissions", "permissions"} {
		entries, _, err := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", field)
		if err != nil || len(entries) == 0 {
			t.Fatalf("the CSV has no spec.install.spec.%s (%v)", field, err)
		}
		for i, e := range entries {
			var p struct {
				ServiceAccountName string              `json:"serviceAccountName"`
				Rules              []rbacv1.PolicyRule `json:"rules"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(e.(map[string]any), &p); err != nil {
				t.Fatalf("%s[%d]: %v", field, i, err)
			}
			accounts[p.ServiceAccountName] = true
			src.serviceAccount = p.ServiceAccountName
			roleName := fmt.Sprintf("%s-%s-%d", csv.GetName(), strings.ToLower(field), i)
			subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: p.ServiceAccountName, Namespace: operatorNamespace}}
			if field == "clusterPermissions" || mode == "AllNamespaces" {
				src.add(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: p.Rules})
				src.add(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}})
				continue
			}
			for _, ns := range roleNamespaces {
				meta := metav1.ObjectMeta{Name: roleName, Namespace: ns}
				src.add(t, &rbacv1.Role{ObjectMeta: meta, Rules: p.Rules})
				src.add(t, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName}})
			}
		}
	}
	if len(accounts) != 1 {
		t.Fatalf("the CSV's permissions name %d ServiceAccounts, want one: %v", len(accounts), accounts)
	}
	src.add(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: src.serviceAccount, Namespace: operatorNamespace}})
	return src
}

// installMode is the OLM install mode of an OperatorGroup in operatorNamespace that targets
// targetNamespaces.
func installMode(operatorNamespace string, targetNamespaces []string) string {
	switch {
	case len(targetNamespaces) == 0:
		return "AllNamespaces"
	case len(targetNamespaces) > 1:
		return "MultiNamespace"
	case targetNamespaces[0] == operatorNamespace:
		return "OwnNamespace"
	default:
		return "SingleNamespace"
	}
}

// add appends a typed object as unstructured, with its apiVersion and kind set.
func (s *rbacSource) add(t *testing.T, obj client.Object) {
	t.Helper()
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	s.objects = append(s.objects, &unstructured.Unstructured{Object: m})
}

// install applies the source's objects (server-side apply, so a rerun updates them) and
// removes them when the test ends, so no later scenario runs with rights this one granted.
func (s *rbacSource) install(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, o := range s.objects {
		if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("rbac-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range s.objects {
			if err := admin.Delete(context.Background(), o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	})
}

// grant is one (scope, group, resource, verb) an RBAC rule allows. Resource includes the
// subresource ("pods/status"); namespace is "" for a ClusterRole bound cluster-wide.
type grant struct {
	namespace, group, resource, verb string
	// name is the first of a rule's resourceNames (empty: any name), for the access review.
	name string
}

// grants expands the rules bound to the source's ServiceAccount. Wildcards stay literal ("*");
// allows understands them.
func (s *rbacSource) grants(t *testing.T) []grant {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{} // "Kind/namespace/name" -> rules
	for _, o := range s.objects {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r struct {
				Rules []rbacv1.PolicyRule `json:"rules"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
		}
	}
	var out []grant
	for _, o := range s.objects {
		kind := o.GetKind()
		if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // the two binding kinds share their fields
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(b.Subjects, func(sub rbacv1.Subject) bool {
			return sub.Kind == "ServiceAccount" && sub.Name == s.serviceAccount && sub.Namespace == s.operatorNamespace
		}) {
			continue
		}
		key := b.RoleRef.Kind + "/" + b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "ClusterRole" {
			key = "ClusterRole//" + b.RoleRef.Name
		}
		rs, ok := rules[key]
		if !ok {
			t.Fatalf("%s %s/%s refers to %s, which the %s does not hold", kind, b.Namespace, b.Name, key, s.name)
		}
		for _, r := range rs {
			// A rule restricted to resourceNames (the operator ConfigMap) is modelled as the
			// unrestricted grant: the recorder does not key requests by name, and a request for
			// another name would be refused by the API server, which fails the scenario anyway.
			if len(r.NonResourceURLs) > 0 {
				t.Fatalf("the %s grants a rule this test does not model: %+v", s.name, r)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						name := ""
						if len(r.ResourceNames) > 0 {
							name = r.ResourceNames[0]
						}
						out = append(out, grant{namespace: b.Namespace, group: g, resource: res, verb: v, name: name})
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("the %s binds no rules to ServiceAccount %s/%s", s.name, s.operatorNamespace, s.serviceAccount)
	}
	return out
}

// allows reports whether g permits a request; namespace "" is a cluster-scoped request, which
// only a cluster-wide grant allows.
func (g grant) allows(namespace, group, resource, verb string) bool {
	if g.namespace != "" && g.namespace != namespace {
		return false
	}
	return (g.group == "*" || g.group == group) && (g.resource == "*" || g.resource == resource) && (g.verb == "*" || g.verb == verb)
}

func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}
