package api

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestWideColumnsReadFieldsOfTheSchema: the columns `kubectl get -o wide` adds (priority 1) read
// fields the installed CRD's schema has, so they never print a column that is always empty
// because of a typo.
func TestWideColumnsReadFieldsOfTheSchema(t *testing.T) {
	ctx := context.Background()
	crd, err := apiextensionsclient.NewForConfigOrDie(restCfg).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "celldfleets.celld.eric.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		root := structural(t, v.Schema.OpenAPIV3Schema)
		var wide []string
		for _, c := range v.AdditionalPrinterColumns {
			if c.Priority != 1 {
				continue
			}
			wide = append(wide, c.Name)
			if _, _, err := cel.ValidFieldPath(c.JSONPath, root); err != nil {
				t.Errorf("%s: -o wide column %s reads %s, which the schema does not have: %v", v.Name, c.Name, c.JSONPath, err)
			}
			if c.Description == "" {
				t.Errorf("%s: -o wide column %s has no description", v.Name, c.Name)
			}
		}
		if !slices.Equal(wide, []string{"Image", "Zones", "App-Version"}) {
			t.Errorf("%s: -o wide columns: want Image, Zones, App-Version, got %v", v.Name, wide)
		}
	}
}

func structural(t *testing.T, s *apiextensionsv1.JSONSchemaProps) *schema.Structural {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := schema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// openAPISchema is the part of a published OpenAPI v3 schema kubectl explain reads.
type openAPISchema struct {
	Description          string                   `json:"description"`
	Type                 string                   `json:"type"`
	Ref                  string                   `json:"$ref"`
	AllOf                []openAPISchema          `json:"allOf"`
	Properties           map[string]openAPISchema `json:"properties"`
	Items                *openAPISchema           `json:"items"`
	AdditionalProperties *openAPISchema           `json:"additionalProperties"`
}

// TestKubectlExplainDescribesEveryField reads the OpenAPI v3 document the API server publishes
// for the group, which is what kubectl explain prints, and requires a description for every
// field of both kinds (metadata is published as a reference to ObjectMeta, documented there).
func TestKubectlExplainDescribesEveryField(t *testing.T) {
	ctx := context.Background()
	raw, err := kubernetes.NewForConfigOrDie(restCfg).RESTClient().Get().AbsPath("/openapi/v3/apis/celld.eric.dev/v1alpha1").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]openAPISchema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"CelldFleet", "CelldStorageReservation"} {
		s, ok := doc.Components.Schemas["dev.eric.celld.v1alpha1."+kind]
		if !ok {
			t.Fatalf("the API server publishes no schema for %s", kind)
		}
		meta := s.Properties["metadata"]
		if meta.Description == "" || !slices.ContainsFunc(meta.AllOf, func(a openAPISchema) bool { return strings.HasSuffix(a.Ref, ".ObjectMeta") }) {
			t.Errorf("%s: metadata must be published as a described reference to ObjectMeta, got %+v", kind, meta)
		}
		fields := 0
		var walk func(path string, s openAPISchema)
		walk = func(path string, s openAPISchema) {
			names := make([]string, 0, len(s.Properties))
			for n := range s.Properties {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				child := s.Properties[n]
				fields++
				if child.Description == "" {
					t.Errorf("kubectl explain %s%s.%s prints no description", strings.ToLower(kind), path, n)
				}
				if n != "metadata" || path != "" {
					walk(path+"."+n, child)
				}
			}
			if s.Items != nil && len(s.Items.Properties) > 0 {
				walk(path, *s.Items)
			}
			if s.AdditionalProperties != nil && len(s.AdditionalProperties.Properties) > 0 {
				walk(path, *s.AdditionalProperties)
			}
		}
		walk("", s)
		if fields < 10 {
			t.Errorf("%s: walked only %d fields of the published schema: the walk is broken", kind, fields)
		}
		t.Logf("%s: %d fields described", kind, fields)
	}
}
