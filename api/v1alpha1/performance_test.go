package v1alpha1_test

import (
	"testing"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// BenchmarkValidateFullFleet validates a fleet with every optional block set.
func BenchmarkValidateFullFleet(b *testing.B) {
	f := corpus.Persistent()
	for _, c := range corpus.Create() {
		if c.Accepted() && c.Name != "minimal bucket fleet" && c.Name != "ordered bucket fleet" {
			c.Mutate(f)
		}
	}
	f.Default()
	if errs := f.Validate(); len(errs) > 0 {
		b.Fatalf("the full fleet must be valid: %v", errs)
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(f.Validate()) != 0 {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkDefault(b *testing.B) {
	base := corpus.Persistent()
	b.ReportAllocs()
	for b.Loop() {
		f := v1.CelldFleet{Spec: base.Spec}
		f.Spec.Execution, f.Spec.Lifecycle = nil, nil
		f.Default()
	}
}
