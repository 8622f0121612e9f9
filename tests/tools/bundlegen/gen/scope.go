package gen

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// builtinNamespaced says, for the built-in resources an operator ClusterRole may name ("group/
// resource", core group empty), whether they are namespaced. It decides which ClusterRole rules
// the CSV may scope to the target namespaces. A resource that is neither listed here nor a CRD
// of the bundle is an error, because guessing its scope wrong either grants too much or breaks
// OwnNamespace installs.
var builtinNamespaced = map[string]bool{
	"/events":                           true,
	"events.k8s.io/events":              true,
	"/pods":                             true,
	"/services":                         true,
	"/serviceaccounts":                  true,
	"/persistentvolumeclaims":           true,
	"/configmaps":                       true,
	"/secrets":                          true,
	"apps/statefulsets":                 true,
	"apps/deployments":                  true,
	"apps/replicasets":                  true,
	"coordination.k8s.io/leases":        true,
	"networking.k8s.io/networkpolicies": true,
	"networking.k8s.io/ingresses":       true,
	"policy/poddisruptionbudgets":       true,
	"metrics.k8s.io/pods":               true,
	"/namespaces":                       false,
	"/nodes":                            false,
	"/persistentvolumes":                false,
	"storage.k8s.io/storageclasses":     false,
	"storage.k8s.io/csidrivers":         false,
	"apiextensions.k8s.io/customresourcedefinitions": false,
	"authentication.k8s.io/tokenreviews":             false,
	"authorization.k8s.io/subjectaccessreviews":      false,
}

// scopes maps "group/resource" to whether it is namespaced: the built-ins above and the
// bundle's CRDs, from their spec.scope.
func scopes(crds []*unstructured.Unstructured) (map[string]bool, error) {
	out := make(map[string]bool, len(builtinNamespaced)+len(crds))
	for k, v := range builtinNamespaced {
		out[k] = v
	}
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
		switch scope {
		case "Namespaced":
			out[group+"/"+plural] = true
		case "Cluster":
			out[group+"/"+plural] = false
		default:
			return nil, fmt.Errorf("CRD %s has scope %q, want Namespaced or Cluster", crd.GetName(), scope)
		}
	}
	return out, nil
}

// splitByScope divides ClusterRole rules into those on cluster-scoped resources, which only
// clusterPermissions can grant, and those on namespaced resources, which the CSV's
// permissions grant in the namespaces the operator serves. A rule naming both kinds is split
// into two with the same verbs. Wildcards, resourceNames and nonResourceURLs are refused: the
// generator cannot tell where they belong.
func splitByScope(rules []any, namespaced map[string]bool) (cluster, ns []any, err error) {
	for i, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("ClusterRole rule %d is not an object", i)
		}
		for _, field := range []string{"resourceNames", "nonResourceURLs"} {
			if _, set := rule[field]; set {
				return nil, nil, fmt.Errorf("ClusterRole rule %d sets %s, which the bundle generator does not place; extend tests/tools/bundlegen/gen/scope.go", i, field)
			}
		}
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		if len(groups) == 0 || len(resources) == 0 {
			return nil, nil, fmt.Errorf("ClusterRole rule %d names no apiGroups or resources", i)
		}
		var clusterRes, nsRes []any
		for _, res := range resources {
			base, _, _ := strings.Cut(res, "/") // a subresource has its resource's scope
			var inNamespace *bool
			for _, g := range groups {
				v, known := namespaced[g+"/"+base]
				if g == "*" || base == "*" || !known {
					return nil, nil, fmt.Errorf("ClusterRole rule %d names %s/%s, whose scope the bundle generator does not know; add it to builtinNamespaced in tests/tools/bundlegen/gen/scope.go", i, g, res)
				}
				if inNamespace != nil && *inNamespace != v {
					return nil, nil, fmt.Errorf("ClusterRole rule %d names %s in groups of different scopes; split the rule", i, res)
				}
				inNamespace = &v
			}
			if *inNamespace {
				nsRes = append(nsRes, res)
			} else {
				clusterRes = append(clusterRes, res)
			}
		}
		with := func(res []any) map[string]any {
			c := make(map[string]any, len(rule))
			for k, v := range rule {
				c[k] = v
			}
			c["resources"] = res
			return c
		}
		switch {
		case len(nsRes) == 0:
			cluster = append(cluster, rule)
		case len(clusterRes) == 0:
			ns = append(ns, rule)
		default:
			cluster = append(cluster, with(clusterRes))
			ns = append(ns, with(nsRes))
		}
	}
	return cluster, ns, nil
}
