package bundle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	validator "github.com/operator-framework/api/pkg/validation/interfaces"
)

// acceptedWarnings are validator warnings the project has decided to live with, matched by a
// substring of the detail, each with its reason. Any other warning fails the test, so new
// ones are looked at.
var acceptedWarnings = map[string]string{
	// CelldStorageReservation is created by the operator only and listed in
	// operators.operatorframework.io/internal-objects; an example would invite users to
	// create one by hand.
	"provided API should have an example annotation": "CelldStorageReservation is internal",
	// RBAC rules carry no API version. The validator maps any events.k8s.io rule to the
	// events.k8s.io/v1beta1 removal; the operator records events through events.k8s.io/v1.
	"Migrate the API(s) for events": "events.k8s.io rules are version-less",
}

func accepted(detail string) bool {
	for s := range acceptedWarnings {
		if strings.Contains(detail, s) {
			return true
		}
	}
	return false
}

// TestBundlePassesOperatorFrameworkValidators runs the validators `operator-sdk bundle
// validate --select-optional suite=operatorframework` runs, as library calls.
func TestBundlePassesOperatorFrameworkValidators(t *testing.T) {
	b, err := manifests.GetBundleFromDir(repo(t, "bundle"))
	if err != nil {
		t.Fatalf("the bundle does not load (run `make bundle`): %v", err)
	}
	if b.CSV == nil || len(b.V1CRDs) != 2 {
		t.Fatalf("the bundle must hold the CSV and both CRDs, got CSV=%v CRDs=%d", b.CSV != nil, len(b.V1CRDs))
	}
	if b.DefaultChannel != "stable" || strings.Join(b.Channels, ",") != "candidate,stable" {
		t.Errorf("channels from metadata/annotations.yaml: %v default %q, want candidate,stable default stable", b.Channels, b.DefaultChannel)
	}
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.37"})
	suites := map[string]validator.Validator{
		"default":               validation.DefaultBundleValidators,
		"crd":                   validation.CustomResourceDefinitionValidator,
		"good-practices":        validation.GoodPracticesValidator,
		"operatorhubv2":         validation.OperatorHubV2Validator,
		"capabilities":          validation.StandardCapabilitiesValidator,
		"categories":            validation.StandardCategoriesValidator,
		"alpha-deprecated-apis": validation.AlphaDeprecatedAPIsValidator,
		"object":                validation.ObjectValidator,
	}
	for name, v := range suites {
		for _, r := range v.Validate(objs...) {
			for _, e := range r.Errors {
				t.Errorf("%s validator: error on %s: %s", name, r.Name, describe(e))
			}
			for _, w := range r.Warnings {
				if !accepted(w.Detail) {
					t.Errorf("%s validator: warning on %s: %s", name, r.Name, describe(w))
				}
			}
		}
	}
}

// TestDeprecatedAPIValidatorCanFail guards the validator wiring above: a bundle object on a
// removed API must be reported for Kubernetes 1.37.
func TestDeprecatedAPIValidatorCanFail(t *testing.T) {
	b, err := manifests.GetBundleFromDir(repo(t, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	bad := csv(t).DeepCopy()
	bad.SetAPIVersion("policy/v1beta1")
	bad.SetKind("PodDisruptionBudget")
	bad.SetName("old")
	b.Objects = append(b.Objects, bad)
	results := validation.AlphaDeprecatedAPIsValidator.Validate(append(b.ObjectsToValidate(), map[string]string{"k8s-version": "1.37"})...)
	for _, r := range results {
		if r.HasError() {
			return
		}
	}
	t.Fatal("a policy/v1beta1 PodDisruptionBudget in the bundle was not reported as removed in 1.37")
}

func describe(e errors.Error) string {
	s := e.Detail
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.BadValue != nil {
		s += " (value " + strings.ReplaceAll(fmt.Sprint(e.BadValue), "\n", " ") + ")"
	}
	return s
}
