package api

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// TestAdmissionAgreesWithValidate sends every corpus case to the real API server and to the
// Go mirror: both must accept or refuse, and for CEL rules both must say the same sentence, and
// the API server must name the rule's field (its fieldPath) with the Go mirror's kind of error.
func TestAdmissionAgreesWithValidate(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for i, c := range corpus.Create() {
		f := corpus.Persistent()
		c.Mutate(f)
		f.Namespace = ns
		if f.Name == corpus.Persistent().Name { // cases that test the name set their own
			f.Name = "case-" + strconv.Itoa(i)
		}
		apiErr := k8s.Create(ctx, f.DeepCopy())
		local := f.DeepCopy()
		local.Default()
		goErrs := local.Validate()

		switch {
		case c.Accepted():
			if apiErr != nil {
				t.Errorf("%s: the API server refused a valid fleet: %v", c.Name, apiErr)
			}
			if len(goErrs) > 0 {
				t.Errorf("%s: Validate refused a fleet the API server admits: %v", c.Name, goErrs)
			}
		case c.Message != "":
			if apiErr == nil || !strings.Contains(apiErr.Error(), c.Message) {
				t.Errorf("%s: the API server must refuse with %q, got %v", c.Name, c.Message, apiErr)
			}
			if !strings.Contains(goErrs.ToAggregate().Error(), c.Message) {
				t.Errorf("%s: Validate must refuse with %q, got %v", c.Name, c.Message, goErrs)
			}
			expectCause(t, c.Name, apiErr, goErrs, c.Message, c.Path)
		default:
			if apiErr == nil || !apierrors.IsInvalid(apiErr) || !strings.Contains(apiErr.Error(), c.Field) {
				t.Errorf("%s: the API server must refuse field %s, got %v", c.Name, c.Field, apiErr)
			}
			if !hasField(goErrs, c.Field) {
				t.Errorf("%s: Validate must refuse field %s, got %v", c.Name, c.Field, goErrs)
			}
		}
	}
}

// TestFixedFieldsRefuseUpdates creates each base fleet and applies the transition.
func TestFixedFieldsRefuseUpdates(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for i, c := range corpus.Update() {
		f := c.Base()
		f.Namespace, f.Name = ns, "update-"+strconv.Itoa(i)
		if err := k8s.Create(ctx, f); err != nil {
			t.Fatalf("%s: create the base fleet: %v", c.Name, err)
		}
		old := f.DeepCopy()
		c.Mutate(f)
		apiErr := k8s.Update(ctx, f)
		goErrs := f.ValidateUpdate(old)
		if c.Message == "" {
			if apiErr != nil || len(goErrs) > 0 {
				t.Errorf("%s: a mutable change was refused: API %v, Validate %v", c.Name, apiErr, goErrs)
			}
			continue
		}
		if apiErr == nil || !strings.Contains(apiErr.Error(), c.Message) {
			t.Errorf("%s: the API server must refuse the update with %q, got %v", c.Name, c.Message, apiErr)
		}
		if !strings.Contains(goErrs.ToAggregate().Error(), c.Message) {
			t.Errorf("%s: ValidateUpdate must refuse with %q, got %v", c.Name, c.Message, goErrs)
		}
		expectCause(t, c.Name, apiErr, goErrs, c.Message, c.Path)
	}
}

func TestEverySampleIsAdmitted(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	files, _ := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if len(files) < 12 {
		t.Fatalf("want 12 samples, found %d", len(files))
	}
	for _, file := range files {
		f, err := corpus.ReadSample(file)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			continue
		}
		f.Namespace = ns
		if err := k8s.Create(ctx, f); err != nil {
			t.Errorf("%s: sample refused at admission: %v", filepath.Base(file), err)
		}
	}
}

func TestDefaultsAreAppliedAtAdmission(t *testing.T) {
	ctx := context.Background()
	f := corpus.Persistent()
	f.Namespace = namespace(t)
	if err := k8s.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	want := f.DeepCopy()
	want.Default()
	s := f.Spec
	if *s.Replicas != 3 || s.Storage.SizeGiB != 10 || s.Placement.Mode != v1.PlacementStrict ||
		s.BucketWorkload != v1.BucketWorkloadDeployment || s.Lifecycle == nil || s.Lifecycle.TerminationGraceSeconds != 30 ||
		s.Execution == nil || s.Execution.MemoryLimit.String() != want.Spec.Execution.MemoryLimit.String() {
		t.Fatalf("the API server's defaults differ from Default(): %+v", s)
	}
}

// expectCause finds the API server's cause that carries a CEL rule's message and checks that
// it names the field path (what kubectl and GitOps tools show next to the message) and has the
// kind of error (the rule's reason) the Go mirror gives for the same message.
func expectCause(t *testing.T, name string, apiErr error, goErrs field.ErrorList, message, path string) {
	t.Helper()
	status, ok := apiErr.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Errorf("%s: the API server's refusal has no causes: %v", name, apiErr)
		return
	}
	var cause *metav1.StatusCause
	for i, c := range status.Status().Details.Causes {
		if strings.Contains(c.Message, message) {
			cause = &status.Status().Details.Causes[i]
			break
		}
	}
	if cause == nil {
		t.Errorf("%s: no cause of the API server's refusal carries %q: %v", name, message, status.Status().Details.Causes)
		return
	}
	if cause.Field != path {
		t.Errorf("%s: the API server names %q for %q; the rule's fieldPath should make it %q", name, cause.Field, message, path)
	}
	for _, e := range goErrs {
		if e.Detail == message && string(e.Type) != string(cause.Type) {
			t.Errorf("%s: the API server reports %s for %q, Validate reports %s: give the rule the reason %s", name, cause.Type, message, e.Type, e.Type)
		}
	}
}

func hasField(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if strings.HasPrefix(e.Field, path) {
			return true
		}
	}
	return false
}
