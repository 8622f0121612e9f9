package api

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/api/v1alpha1/corpus"
)

// TestAdmissionAgreesWithValidate sends every corpus case to the real API server and to the
// Go mirror: both must accept or refuse, and for CEL rules both must say the same sentence.
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

func hasField(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if strings.HasPrefix(e.Field, path) {
			return true
		}
	}
	return false
}
