package api

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func sampleFleets(t *testing.T, file string) []*v1.CelldFleet {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1.CelldFleet
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != "CelldFleet" {
			continue
		}
		var f v1.CelldFleet
		if err := yaml.UnmarshalStrict([]byte(doc), &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, &f)
	}
	return out
}
