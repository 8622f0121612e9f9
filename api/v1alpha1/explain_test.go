package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// undescribed are the properties that may lack a description in the CRD schema, each with the
// reason kubectl explain still documents it.
var undescribed = map[string]string{
	// controller-gen writes only `type: object` for an embedded ObjectMeta; the API server
	// publishes metadata as a reference to ObjectMeta, whose documentation kubectl explain
	// shows (tests/api checks the published schema).
	".metadata": "ObjectMeta, documented by the API server",
}

// wholeFieldRules are the rules on an object that carry no fieldPath, each with the reason: they
// relate fields of one level to each other, so no single field is the offending one, and the
// error names the object that holds them.
var wholeFieldRules = map[string]string{
	v1.MsgPrefixWithoutRef:     "prefix and previewFleetRef are set together: either may be the one missing",
	v1.MsgRoutingMode:          "exactly one of gateway and ingress: either may be the one to add or to remove",
	v1.MsgPreviewRoutingMode:   "at most one of gateway and ingress: either may be the one to remove",
	v1.MsgEnvValueSource:       "exactly one of value and secretKeyRef: either may be the one to add or to remove",
	v1.MsgEgressExactlyOne:     "exactly one of cidr and podLabels: either may be the one to add or to remove",
	v1.MsgReservationImmutable: "the rule compares the whole spec it sits on: any field of it may have changed",
	v1.MsgSeedFinal:            "the rule compares the whole seed result it sits on: any field of it may have changed",
}

// reasons are the reasons an x-kubernetes-validations rule may give (the API server refuses
// any other at CRD creation).
var reasons = []apiextensionsv1.FieldValueErrorReason{
	apiextensionsv1.FieldValueInvalid, apiextensionsv1.FieldValueForbidden,
	apiextensionsv1.FieldValueRequired, apiextensionsv1.FieldValueDuplicate,
}

// crdSchema is one version's schema of one CRD in config/crd/bases.
type crdSchema struct {
	name   string
	schema *apiextensionsv1.JSONSchemaProps
}

func crdSchemas(t *testing.T) []crdSchema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("want the CelldFleet and CelldStorageReservation CRDs in config/crd/bases, found %v (%v)", files, err)
	}
	var out []crdSchema
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			out = append(out, crdSchema{name: crd.Spec.Names.Kind + " " + v.Name, schema: v.Schema.OpenAPIV3Schema})
		}
	}
	return out
}

// eachSchema calls visit for s and every schema below it (properties, items and
// additionalProperties), depth first in name order, with its path: .spec.env[*].name,
// .spec.routing.source.podLabels{*}.
func eachSchema(path string, s *apiextensionsv1.JSONSchemaProps, visit func(path string, s *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	visit(path, s)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := s.Properties[name]
		eachSchema(path+"."+name, &child, visit)
	}
	if s.Items != nil {
		eachSchema(path+"[*]", s.Items.Schema, visit)
	}
	if s.AdditionalProperties != nil {
		eachSchema(path+"{*}", s.AdditionalProperties.Schema, visit)
	}
}

// TestEveryPropertyHasADescription is what kubectl explain shows: every property of every CRD,
// and every object that is a list item or a map value, down to the leaves, says what it is. A
// list of strings or a map of strings is described by the property that holds it, as kubectl
// explain shows it (zones <[]string>), so its scalar items need no description of their own.
func TestEveryPropertyHasADescription(t *testing.T) {
	properties := 0
	for _, c := range crdSchemas(t) {
		eachSchema("", c.schema, func(path string, s *apiextensionsv1.JSONSchemaProps) {
			element := strings.HasSuffix(path, "[*]") || strings.HasSuffix(path, "{*}")
			if path == "" || (element && s.Type != "object") {
				return
			}
			properties++
			_, excused := undescribed[path]
			switch {
			case strings.TrimSpace(s.Description) == "" && !excused:
				t.Errorf("%s: %s has no description; kubectl explain shows nothing for it (add a doc comment to the Go field and run make manifests)", c.name, path)
			case s.Description != "" && excused:
				t.Errorf("%s: %s now has a description; remove it from the undescribed list", c.name, path)
			}
		})
	}
	if properties < 200 {
		t.Fatalf("walked only %d properties: the walk is broken", properties)
	}
}

// TestEveryRuleNamesItsFieldAndReason: a CEL refusal names the offending field (fieldPath) and
// the kind of error (reason), so kubectl and GitOps tools point at the field, not at spec.
// Rules on a list or a map already name their own field; rules on an object need a fieldPath
// that resolves in the schema, unless they are listed in wholeFieldRules.
func TestEveryRuleNamesItsFieldAndReason(t *testing.T) {
	rules, exempted := 0, map[string]bool{}
	for _, c := range crdSchemas(t) {
		eachSchema("", c.schema, func(path string, s *apiextensionsv1.JSONSchemaProps) {
			for _, r := range s.XValidations {
				rules++
				where := c.name + " " + cmpOr(path, "<root>") + ": rule " + strings.TrimSpace(r.Message)
				if r.Reason == nil || !slices.Contains(reasons, *r.Reason) {
					t.Errorf("%s: reason must be one of %v, got %v", where, reasons, r.Reason)
				}
				onObject := s.Type == "object" && len(s.Properties) > 0
				_, whole := wholeFieldRules[r.Message]
				switch {
				case !onObject && r.FieldPath != "":
					t.Errorf("%s: the rule sits on %s itself; drop its fieldPath %q", where, cmpOr(path, "<root>"), r.FieldPath)
				case onObject && whole:
					exempted[r.Message] = true
					if r.FieldPath != "" {
						t.Errorf("%s: has fieldPath %q; remove it from wholeFieldRules", where, r.FieldPath)
					}
				case onObject && r.FieldPath == "":
					t.Errorf("%s: has no fieldPath, so the API server's error names %s instead of the field; set fieldPath (or list the rule in wholeFieldRules with the reason)", where, cmpOr(path, "<root>"))
				case onObject:
					if err := resolves(s, r.FieldPath); err != nil {
						t.Errorf("%s: fieldPath %q: %v", where, r.FieldPath, err)
					}
				}
			}
		})
	}
	if rules < 50 {
		t.Fatalf("found only %d rules: the walk is broken", rules)
	}
	for msg := range wholeFieldRules {
		if !exempted[msg] {
			t.Errorf("wholeFieldRules lists %q, which no rule on an object has: remove it", msg)
		}
	}
}

// resolves checks a fieldPath as the API server does when it creates the CRD.
func resolves(s *apiextensionsv1.JSONSchemaProps, fieldPath string) error {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		return err
	}
	ss, err := schema.NewStructural(internal)
	if err != nil {
		return err
	}
	_, _, err = cel.ValidFieldPath(fieldPath, ss)
	return err
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
