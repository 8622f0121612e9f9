package gen

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// managerContainer is the operator container in config/manager/manager.yaml.
const managerContainer = "manager"

// DisconnectedFeature is the OpenShift feature annotation for installs from mirrored registries.
const DisconnectedFeature = "features.operators.openshift.io/disconnected"

// buildCSV fills the CSV base with everything a release and the rest of config/ decide.
func buildCSV(o Options, in *inputs) (map[string]any, error) {
	csv := in.csv.DeepCopy()
	csv.SetName(CSVName(o.Version))

	examples, err := almExamples(in.examples)
	if err != nil {
		return nil, err
	}
	ann := csv.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["alm-examples"] = examples
	ann["containerImage"] = o.Image
	ann["createdAt"] = o.CreatedAt
	ann["olm.skipRange"] = o.SkipRange()
	// What operator-sdk's generate bundle writes from the PROJECT file.
	ann[CSVBuilderAnnotation] = Builder
	ann[CSVProjectLayoutAnnotation] = o.ProjectLayout
	// Disconnected (mirrored) installs copy images by digest: the feature is declared only when
	// the operator image is pinned by one. The fleets' runtime image is not the bundle's: the
	// API requires it by digest in every CelldFleet.
	ann[DisconnectedFeature] = fmt.Sprint(o.Disconnected())
	csv.SetAnnotations(ann)

	if err := unstructured.SetNestedField(csv.Object, o.Version, "spec", "version"); err != nil {
		return nil, err
	}
	if o.Replaces != "" {
		err = unstructured.SetNestedField(csv.Object, CSVName(o.Replaces), "spec", "replaces")
	} else {
		unstructured.RemoveNestedField(csv.Object, "spec", "replaces")
	}
	if err != nil {
		return nil, err
	}
	if err := checkOwned(csv, in.crds); err != nil {
		return nil, err
	}

	deployment, sa, err := installDeployment(in.deployment, o.Image)
	if err != nil {
		return nil, err
	}
	clusterRules, namespacedRules, err := installRules(in)
	if err != nil {
		return nil, err
	}
	strategy := map[string]any{
		"deployments": []any{deployment},
		"clusterPermissions": []any{map[string]any{
			"serviceAccountName": sa,
			"rules":              clusterRules,
		}},
		"permissions": []any{map[string]any{
			"serviceAccountName": sa,
			"rules":              namespacedRules,
		}},
	}
	if err := unstructured.SetNestedMap(csv.Object, strategy, "spec", "install", "spec"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(csv.Object, "deployment", "spec", "install", "strategy"); err != nil {
		return nil, err
	}
	related := []any{map[string]any{"name": PackageName, "image": o.Image}}
	if err := unstructured.SetNestedSlice(csv.Object, related, "spec", "relatedImages"); err != nil {
		return nil, err
	}
	return csv.Object, nil
}

// installDeployment turns the manager Deployment into a CSV deployment entry with the
// release image, and returns its ServiceAccount.
func installDeployment(d *unstructured.Unstructured, image string) (map[string]any, string, error) {
	spec, ok, err := unstructured.NestedMap(d.Object, "spec")
	if err != nil || !ok {
		return nil, "", fmt.Errorf("the Deployment %s has no spec", d.GetName())
	}
	containers, _, err := unstructured.NestedSlice(spec, "template", "spec", "containers")
	if err != nil {
		return nil, "", err
	}
	found := false
	for _, c := range containers {
		cm := c.(map[string]any)
		if cm["name"] == managerContainer {
			cm["image"] = image
			found = true
		}
	}
	if !found {
		return nil, "", fmt.Errorf("the Deployment %s has no container %q", d.GetName(), managerContainer)
	}
	if err := unstructured.SetNestedSlice(spec, containers, "template", "spec", "containers"); err != nil {
		return nil, "", err
	}
	sa, _, _ := unstructured.NestedString(spec, "template", "spec", "serviceAccountName")
	if sa == "" {
		return nil, "", fmt.Errorf("the Deployment %s names no serviceAccountName", d.GetName())
	}
	entry := map[string]any{"name": d.GetName(), "spec": spec}
	if labels := d.GetLabels(); len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		entry["label"] = l
	}
	return entry, sa, nil
}

// installRules divides the operator's RBAC between the CSV's clusterPermissions and
// permissions. OLM binds clusterPermissions cluster-wide in every install mode, while it
// creates permissions as a Role in the operator namespace and in each target namespace
// (OwnNamespace, SingleNamespace, MultiNamespace) and as a ClusterRole only for AllNamespaces.
// So only rules on cluster-scoped resources (StorageClasses, reservations) go to
// clusterPermissions; the ClusterRole's rules on namespaced resources (fleets, events), the
// fleet-namespace Role and leader election go to permissions, and an install scoped to some
// namespaces can touch Pods and claims there only.
func installRules(in *inputs) (cluster, namespaced []any, err error) {
	known, err := scopes(in.crds)
	if err != nil {
		return nil, nil, err
	}
	cluster, fromClusterRole, err := splitByScope(rules(in.clusterRoles), known)
	if err != nil {
		return nil, nil, err
	}
	if len(cluster) == 0 {
		return nil, nil, fmt.Errorf("config/rbac grants no rule on a cluster-scoped resource; the CSV needs clusterPermissions for the reservations")
	}
	namespaced = append(namespaced, fromClusterRole...)
	namespaced = append(namespaced, rules(in.fleetRoles)...)
	namespaced = append(namespaced, rules(in.roles)...)
	return cluster, namespaced, nil
}

// rules concatenates the rules of roles in order.
func rules(roles []*unstructured.Unstructured) []any {
	var out []any
	for _, r := range roles {
		rs, _, _ := unstructured.NestedSlice(r.Object, "rules")
		out = append(out, rs...)
	}
	return out
}

// checkOwned requires the CSV's owned CRDs and the bundle's CRDs to match one to one, the
// most common reason a bundle fails to install.
func checkOwned(csv *unstructured.Unstructured, crds []*unstructured.Unstructured) error {
	owned, _, err := unstructured.NestedSlice(csv.Object, "spec", "customresourcedefinitions", "owned")
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, crd := range crds {
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			vm := v.(map[string]any)
			if served, _ := vm["served"].(bool); served {
				want[fmt.Sprintf("%s/%s/%s", crd.GetName(), vm["name"], kind)] = true
			}
		}
	}
	for _, e := range owned {
		em := e.(map[string]any)
		key := fmt.Sprintf("%s/%s/%s", em["name"], em["version"], em["kind"])
		if !want[key] {
			return fmt.Errorf("the CSV base owns %s, which no CRD in config/crd serves", key)
		}
		delete(want, key)
	}
	for key := range want {
		return fmt.Errorf("CRD version %s is not owned by the CSV base; add it to config/manifests/bases", key)
	}
	return nil
}
