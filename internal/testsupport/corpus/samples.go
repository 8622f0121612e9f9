package corpus

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// ReadSample returns the CelldFleet document of a sample file, strictly decoded (an unknown
// field is an error, so a sample cannot silently drift from the API). It returns nil for a file
// without a CelldFleet, such as kustomization.yaml; other documents (an HPA beside the fleet)
// are ignored.
func ReadSample(path string) (*v1.CelldFleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind != "CelldFleet" {
			continue
		}
		f := &v1.CelldFleet{}
		if err := yaml.UnmarshalStrict([]byte(doc), f); err != nil {
			return nil, fmt.Errorf("sample %s: %w", path, err)
		}
		return f, nil
	}
	return nil, nil
}
