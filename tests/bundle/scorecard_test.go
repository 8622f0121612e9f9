package bundle

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The operator-sdk scorecard basic and olm tests are internal to operator-sdk and run as Pods;
// their checks are static, so they are re-implemented here over the committed bundle.

type crdDescription struct {
	Name              string `json:"name"`
	Version           string `json:"version"`
	Kind              string `json:"kind"`
	Description       string `json:"description"`
	Resources         []any  `json:"resources"`
	SpecDescriptors   []desc `json:"specDescriptors"`
	StatusDescriptors []desc `json:"statusDescriptors"`
}

type desc struct {
	Path         string   `json:"path"`
	DisplayName  string   `json:"displayName"`
	Description  string   `json:"description"`
	XDescriptors []string `json:"x-descriptors"`
}

func owned(t *testing.T) []crdDescription {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(csv(t).Object, "spec", "customresourcedefinitions", "owned")
	b, _ := json.Marshal(raw)
	var out []crdDescription
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func examples(t *testing.T) []map[string]any {
	t.Helper()
	var ex []map[string]any
	if err := json.Unmarshal([]byte(csv(t).GetAnnotations()["alm-examples"]), &ex); err != nil {
		t.Fatalf("alm-examples is not a JSON array: %v", err)
	}
	return ex
}

// crdSchema returns the openAPIV3Schema of the served version of a bundle CRD.
func crdSchema(t *testing.T, name, version string) map[string]any {
	t.Helper()
	plural, group, _ := strings.Cut(name, ".")
	crd := one(t, objects(t, repo(t, "bundle", "manifests", group+"_"+plural+".yaml")), "CustomResourceDefinition", name)
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm := v.(map[string]any)
		if vm["name"] == version {
			s, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema")
			return s
		}
	}
	t.Fatalf("CRD %s serves no version %s", name, version)
	return nil
}

// schemaAt walks a dotted descriptor path through a structural schema.
func schemaAt(schema map[string]any, path string) (map[string]any, error) {
	cur := schema
	for _, part := range strings.Split(path, ".") {
		if items, ok := cur["items"].(map[string]any); ok && cur["type"] == "array" {
			cur = items
		}
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[part].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no field %q", part)
		}
		cur = next
	}
	return cur, nil
}

// TestScorecardBasicCheckSpec: every CR in alm-examples has a non-empty spec.
func TestScorecardBasicCheckSpec(t *testing.T) {
	ex := examples(t)
	if len(ex) != 16 {
		t.Errorf("alm-examples holds %d objects, want the 16 samples (15 fleets and a preview)", len(ex))
	}
	for _, e := range ex {
		spec, ok := e["spec"].(map[string]any)
		if !ok || len(spec) == 0 {
			t.Errorf("alm-examples: %v has no spec", e["metadata"])
		}
	}
}

// TestScorecardOLMCRDs: owned CRDs list resources and descriptions, and every example's fields
// exist in the CRD schema (olm-crds-have-validation, olm-crds-have-resources).
func TestScorecardOLMCRDs(t *testing.T) {
	for _, o := range owned(t) {
		if len(o.Resources) == 0 {
			t.Errorf("owned CRD %s lists no resources", o.Name)
		}
		if o.Description == "" {
			t.Errorf("owned CRD %s has no description", o.Name)
		}
	}
	schemas := map[string]map[string]any{}
	for _, o := range owned(t) {
		schemas[o.Kind] = crdSchema(t, o.Name, o.Version)
	}
	for _, e := range examples(t) {
		schema, ok := schemas[fmt.Sprint(e["kind"])]
		if !ok {
			t.Errorf("example %v: kind %v is not owned by the CSV", e["metadata"], e["kind"])
			continue
		}
		for _, path := range leafPaths("", e["spec"]) {
			if _, err := schemaAt(schema, "spec."+path); err != nil {
				t.Errorf("example %v: spec.%s is not in the CRD schema: %v", e["metadata"], path, err)
			}
		}
	}
}

// TestScorecardOLMDescriptors: every top-level spec field an example sets has a spec
// descriptor, every owned CRD has status descriptors, and every descriptor path exists in
// the CRD schema (a misspelt path silently disappears from the console).
func TestScorecardOLMDescriptors(t *testing.T) {
	byKind := map[string]crdDescription{}
	for _, o := range owned(t) {
		byKind[o.Kind] = o
		if len(o.StatusDescriptors) == 0 {
			t.Errorf("owned CRD %s has no status descriptors", o.Name)
		}
		schema := crdSchema(t, o.Name, o.Version)
		for _, d := range o.SpecDescriptors {
			if _, err := schemaAt(schema, "spec."+d.Path); err != nil {
				t.Errorf("%s spec descriptor %q: %v", o.Kind, d.Path, err)
			}
			if d.DisplayName == "" || d.Description == "" {
				t.Errorf("%s spec descriptor %q needs a displayName and a description", o.Kind, d.Path)
			}
		}
		for _, d := range o.StatusDescriptors {
			if _, err := schemaAt(schema, "status."+d.Path); err != nil {
				t.Errorf("%s status descriptor %q: %v", o.Kind, d.Path, err)
			}
		}
	}
	for _, e := range examples(t) {
		o, ok := byKind[fmt.Sprint(e["kind"])]
		if !ok {
			t.Errorf("example kind %v is not owned by the CSV", e["kind"])
			continue
		}
		for field := range e["spec"].(map[string]any) {
			if !hasDescriptor(o.SpecDescriptors, field) {
				t.Errorf("%s: spec.%s (set by example %v) has no spec descriptor", o.Kind, field, e["metadata"])
			}
		}
	}
	fleet := byKind["CelldFleet"]
	for _, must := range []string{"profile", "replicas", "runtimeImage", "maintenance.paused", "maintenance.restartToken", "storage.bucket", "storage.storageClassName", "placement.zones", "routing", "mesh"} {
		if !hasDescriptor(fleet.SpecDescriptors, must) {
			t.Errorf("CelldFleet has no spec descriptor for %s", must)
		}
	}
	for _, must := range []string{"conditions", "readyReplicas", "desiredReplicas", "application.observedVersion.version"} {
		if !hasDescriptor(fleet.StatusDescriptors, must) {
			t.Errorf("CelldFleet has no status descriptor for %s", must)
		}
	}
}

func hasDescriptor(ds []desc, path string) bool {
	for _, d := range ds {
		if d.Path == path {
			return true
		}
	}
	return false
}

// leafPaths lists the dotted paths of the object keys under v (list items share their list's
// path; map-valued fields such as podLabels stop at the field).
func leafPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		if l, ok := v.([]any); ok && len(l) > 0 {
			if _, isMap := l[0].(map[string]any); isMap {
				var out []string
				for _, item := range l {
					out = append(out, leafPaths(prefix, item)...)
				}
				return out
			}
		}
		return []string{prefix}
	}
	var out []string
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if isFreeForm(k) {
			out = append(out, p)
			continue
		}
		out = append(out, leafPaths(p, child)...)
	}
	return out
}

// isFreeForm names the string-map fields of the API, whose keys are user data.
func isFreeForm(key string) bool {
	return key == "podLabels" || key == "annotations"
}
