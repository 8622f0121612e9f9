package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// check compares what Validate says of a case with the corpus: the verdict, the message of a
// CEL rule and the field the refusal names. For a CEL rule, Validate must name the rule's field
// (path), or the object holding it, or an element of it (an annotation's key): never another
// field.
func check(t *testing.T, name string, errs field.ErrorList, message, path, fieldPath string) {
	t.Helper()
	switch {
	case message == "" && fieldPath == "":
		if len(errs) > 0 {
			t.Errorf("%s: Validate refused a valid fleet: %v", name, errs)
		}
	case message != "":
		e := withMessage(errs, message)
		switch {
		case e == nil:
			t.Errorf("%s: Validate did not report the admission message %q; got %v", name, message, errs)
		case path == "":
			t.Errorf("%s: the corpus names no field for the CEL message %q", name, message)
		case !samePlace(e.Field, path):
			t.Errorf("%s: Validate names %s for %q, but the CEL rule names %s", name, e.Field, message, path)
		}
	default:
		found := slices.ContainsFunc(errs, func(e *field.Error) bool { return strings.HasPrefix(e.Field, fieldPath) })
		if !found {
			t.Errorf("%s: Validate did not refuse field %s; got %v", name, fieldPath, errs)
		}
	}
}

func TestValidateMirrorsEveryCreationRule(t *testing.T) {
	for _, c := range corpus.Create() {
		f := corpus.Persistent()
		c.Mutate(f)
		f.Default()
		check(t, c.Name, f.Validate(), c.Message, c.Path, c.Field)
	}
}

// withMessage returns the first error of errs whose detail is message.
func withMessage(errs field.ErrorList, message string) *field.Error {
	for _, e := range errs {
		if e.Detail == message {
			return e
		}
	}
	return nil
}

// samePlace reports whether two field paths are equal or one holds the other (spec.capacity
// holds spec.capacity.minReplicas; spec.routing.ingress.annotations holds
// spec.routing.ingress.annotations[key]).
func samePlace(a, b string) bool {
	within := func(inner, outer string) bool {
		return strings.HasPrefix(inner, outer) && (len(inner) == len(outer) || inner[len(outer)] == '.' || inner[len(outer)] == '[')
	}
	return within(a, b) || within(b, a)
}

func TestValidateUpdateMirrorsEveryTransitionRule(t *testing.T) {
	for _, c := range corpus.Update() {
		old := c.Base()
		old.Default()
		f := old.DeepCopy()
		c.Mutate(f)
		f.Default()
		check(t, c.Name, f.ValidateUpdate(old), c.Message, c.Path, "")
	}
}

// Every CEL rule of the CRD must have its message among the Go mirror's, and every mirror
// message must come from a rule: otherwise the two sides have drifted.
func TestEveryCELMessageHasAGoMirror(t *testing.T) {
	var cel []string
	for _, name := range []string{"celld.eric.dev_celldfleets.yaml", "celld.eric.dev_celldstoragereservations.yaml", "celld.eric.dev_celldpreviews.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", name))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			cel = append(cel, celMessages(v.Schema.OpenAPIV3Schema)...)
		}
	}
	src, err := os.ReadFile("messages.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cel {
		if !strings.Contains(string(src), strconv.Quote(m)) {
			t.Errorf("CEL rule message has no Go mirror constant: %q", m)
		}
	}
	slices.Sort(cel)
	cel = slices.Compact(cel) // shared types (egress, routing source) carry their rules to every use
	if n := strings.Count(string(src), " = \""); n != len(cel) {
		t.Errorf("messages.go has %d messages but the CRDs have %d distinct CEL rule messages", n, len(cel))
	}
}

// celMessages walks a schema and returns the message of every x-kubernetes-validations rule.
func celMessages(s *apiextensionsv1.JSONSchemaProps) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, r := range s.XValidations {
		out = append(out, r.Message)
	}
	for _, p := range s.Properties {
		out = append(out, celMessages(&p)...)
	}
	if s.Items != nil {
		out = append(out, celMessages(s.Items.Schema)...)
	}
	if s.AdditionalProperties != nil {
		out = append(out, celMessages(s.AdditionalProperties.Schema)...)
	}
	return out
}

func TestSamplesAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) < 12 {
		t.Fatalf("want the 12 samples, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		f, err := corpus.ReadSample(file)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			continue
		}
		f.Default()
		if errs := f.Validate(); len(errs) > 0 {
			t.Errorf("%s: sample fleet %s is invalid: %v", file, f.Name, errs)
		}
	}
}

func TestDefaultMatchesTheCRDDefaults(t *testing.T) {
	f := corpus.Persistent()
	f.Default()
	s := f.Spec
	if *s.Replicas != 3 || s.Storage.SizeGiB != 10 || s.Placement.Mode != v1.PlacementStrict ||
		s.BucketWorkload != v1.BucketWorkloadDeployment || s.Lifecycle.ShutdownSeconds != 20 ||
		s.Lifecycle.TerminationGraceSeconds != 30 || s.Execution.CPURequest.String() != "250m" ||
		s.Execution.MemoryRequest.String() != "512Mi" || s.Execution.MemoryLimit.String() != "1Gi" {
		t.Fatalf("defaults drifted from the CRD: %+v", s)
	}
}
