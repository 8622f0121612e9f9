package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// kubeFloorSources are the files that claim the oldest Kubernetes the operator installs on.
// They must agree, and the CRDs must install there.
const (
	csvBase      = "config/manifests/bases/celld-operator.clusterserviceversion.yaml"
	installChart = "helm-charts/celld-operator/Chart.yaml"
	installGuide = "docs/install.md"
)

// TestCRDRulesCompileOnTheClaimedKubernetesFloor compiles every CEL rule of the CRDs as the
// API server of the claimed floor does when the CRDs are created, and one minor lower. At the
// floor every rule must compile (else installing there fails at CRD creation); one minor lower
// at least one must not, so the floor is the real one and this check can fail.
func TestCRDRulesCompileOnTheClaimedKubernetesFloor(t *testing.T) {
	floor := claimedKubernetesFloor(t)
	for _, row := range []struct {
		name       string
		kube       *version.Version
		wantErrors bool
	}{
		{name: "the claimed floor " + floor.String() + " creates every CRD", kube: floor},
		{name: "one minor below the floor refuses a rule, so the floor is not set needlessly high", kube: floor.SubtractMinor(1), wantErrors: true},
	} {
		t.Run(row.name, func(t *testing.T) {
			compat := celCompatibilityOf(row.kube)
			problems := compileCRDRules(t, compat)
			switch {
			case !row.wantErrors && len(problems) > 0:
				t.Errorf("Kubernetes %s (CEL compatibility version %s) refuses %d rules of the CRDs, so installing there fails at CRD creation; "+
					"rewrite the rules or raise minKubeVersion in %s, kubeVersion in %s and the requirement in %s:\n  %s",
					row.kube, compat, len(problems), csvBase, installChart, installGuide, strings.Join(problems, "\n  "))
			case row.wantErrors && len(problems) == 0:
				t.Errorf("every CRD rule compiles on Kubernetes %s (CEL compatibility version %s), below the claimed floor %s: "+
					"lower the floor in %s, %s and %s to the real one (or, if it was raised for another reason, say so here and expect no errors one minor lower)",
					row.kube, compat, floor, csvBase, installChart, installGuide)
			}
			t.Logf("Kubernetes %s (CEL compatibility version %s): %d rules refused", row.kube, compat, len(problems))
		})
	}
}

// celCompatibilityOf is the CEL environment version in which kube-apiserver of release kube
// compiles the rules of a CRD being created: its minimum compatibility version, which is one
// minor below its own release so that the cluster can roll back one minor and still run every
// stored rule (k8s.io/component-base/compatibility; 1.29 and 1.30 hard-coded the same n-1).
func celCompatibilityOf(kube *version.Version) *version.Version {
	return version.MajorMinor(kube.Major(), kube.Minor()).SubtractMinor(1)
}

// chartFloor reads ">=1.32.0-0", the form of an open-ended kubeVersion constraint that also
// admits pre-release and vendor builds.
var chartFloor = regexp.MustCompile(`^>=\s*v?(\d+\.\d+)\.0-0$`)

// guideFloor reads the requirement line of the install guide.
var guideFloor = regexp.MustCompile(`(?m)^Requirements: Kubernetes (\d+\.\d+) or later`)

// claimedKubernetesFloor reads the oldest supported Kubernetes from the CSV base's
// minKubeVersion, the install chart's kubeVersion and the install guide, and fails unless all
// three name the same major.minor.
func claimedKubernetesFloor(t *testing.T) *version.Version {
	t.Helper()
	var csv struct {
		Spec struct {
			MinKubeVersion string `json:"minKubeVersion"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, csvBase), &csv); err != nil {
		t.Fatalf("%s: %v", csvBase, err)
	}
	csvFloor, err := version.ParseSemantic(csv.Spec.MinKubeVersion)
	if err != nil {
		t.Fatalf("%s: spec.minKubeVersion %q is not a semantic version: %v", csvBase, csv.Spec.MinKubeVersion, err)
	}
	if csvFloor.Patch() != 0 || csvFloor.PreRelease() != "" {
		t.Fatalf("%s: spec.minKubeVersion %s should name a minor release (X.Y.0)", csvBase, csvFloor)
	}

	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, installChart), &chart); err != nil {
		t.Fatalf("%s: %v", installChart, err)
	}
	m := chartFloor.FindStringSubmatch(strings.TrimSpace(chart.KubeVersion))
	if m == nil {
		t.Fatalf("%s: kubeVersion %q is not of the form \">=X.Y.0-0\"", installChart, chart.KubeVersion)
	}
	g := guideFloor.FindSubmatch(readRepoFile(t, installGuide))
	if g == nil {
		t.Fatalf("%s has no line \"Requirements: Kubernetes X.Y or later\"", installGuide)
	}
	want := fmt.Sprintf("%d.%d", csvFloor.Major(), csvFloor.Minor())
	if m[1] != want || string(g[1]) != want {
		t.Fatalf("the Kubernetes floor claims disagree: %s says %s, %s says %s, %s says %s",
			csvBase, want, installChart, m[1], installGuide, g[1])
	}
	return version.MajorMinor(csvFloor.Major(), csvFloor.Minor())
}

func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// compileCRDRules compiles every x-kubernetes-validations rule and messageExpression of every
// CRD in config/crd/bases the way kube-apiserver does when the CRD is created: every rule is a
// new expression, compiled in the CEL environment of the compatibility version compat. It
// returns one line per rule that does not compile.
func compileCRDRules(t *testing.T, compat *version.Version) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	envSet := environment.MustBaseEnvSet(compat)
	var problems []string
	rules := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				t.Fatalf("%s %s: %v", crd.Name, v.Name, err)
			}
			root, err := schema.NewStructural(internal)
			if err != nil {
				t.Fatalf("%s %s: the schema is not structural: %v", crd.Name, v.Name, err)
			}
			walkSchema(root, "", true, func(path string, s *schema.Structural, isRoot bool) {
				if len(s.XValidations) == 0 {
					return
				}
				results, err := cel.Compile(s, model.SchemaDeclType(s, isRoot), celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s %s %s: %v", crd.Name, v.Name, path, err))
					return
				}
				for i, r := range results {
					rules++
					rule := s.XValidations[i]
					if r.Error != nil {
						problems = append(problems, fmt.Sprintf("%s %s %s: rule %q: %s", crd.Name, v.Name, path, rule.Rule, r.Error.Detail))
					}
					if r.MessageExpressionError != nil {
						problems = append(problems, fmt.Sprintf("%s %s %s: messageExpression %q: %s", crd.Name, v.Name, path, rule.MessageExpression, r.MessageExpressionError.Detail))
					}
				}
			})
		}
	}
	if rules == 0 {
		t.Fatalf("found no x-kubernetes-validations rule in %v: the walk is broken", files)
	}
	sort.Strings(problems)
	return problems
}

// walkSchema calls visit for s and every schema below it, depth first. isRoot is what the API
// server passes to SchemaDeclType: true for the resource root and for an embedded resource,
// whose apiVersion, kind and metadata CEL sees.
func walkSchema(s *schema.Structural, path string, isRoot bool, visit func(path string, s *schema.Structural, isRoot bool)) {
	if s == nil {
		return
	}
	if path == "" {
		path = "<root>"
	}
	visit(path, s, isRoot)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := s.Properties[name]
		walkSchema(&child, strings.TrimPrefix(path+"."+name, "<root>"), child.XEmbeddedResource, visit)
	}
	if s.Items != nil {
		walkSchema(s.Items, path+"[*]", s.Items.XEmbeddedResource, visit)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		walkSchema(s.AdditionalProperties.Structural, path+"{*}", s.AdditionalProperties.Structural.XEmbeddedResource, visit)
	}
}
