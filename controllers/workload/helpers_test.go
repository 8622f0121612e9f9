package workload_test

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func itoa(n int) string { return strconv.Itoa(n) }

// fleet loads a sample by name, defaulted and validated, and lets a test mutate it; the result
// is validated again so tests never render a fleet admission would refuse.
func fleet(t testing.TB, sample string, mutate ...func(*v1.CelldFleet)) *v1.CelldFleet {
	t.Helper()
	f := loadSample(t, "../../config/samples/"+sample+".yaml")
	if f == nil {
		t.Fatalf("sample %s has no CelldFleet", sample)
	}
	for _, m := range mutate {
		m(f)
	}
	f.Default()
	if errs := f.Validate(); len(errs) > 0 {
		t.Fatalf("the mutated %s fleet must be valid: %v", sample, errs)
	}
	return f
}

func envNames(env []corev1.EnvVar) []string {
	n := make([]string, len(env))
	for i, e := range env {
		n[i] = e.Name
	}
	return n
}

func envByName(env []corev1.EnvVar, name string) (corev1.EnvVar, bool) {
	for _, e := range env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}
