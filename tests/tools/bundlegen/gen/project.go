package gen

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// OperatorSDKVersion is the operator-sdk release the bundle follows: its bundle format and
// annotations, and its scorecard-test image.
const OperatorSDKVersion = "v1.42.3"

// Builder is the builder the CSV and the bundle annotations name, as operator-sdk writes it.
const Builder = "operator-sdk-" + OperatorSDKVersion

// HybridHelmLayout is operator-sdk's hybrid Helm/Go project layout, the one this repository
// has (watches.yaml and embedded charts beside Go reconcilers).
const HybridHelmLayout = "hybrid.helm.sdk.operatorframework.io/v1-alpha"

// The annotations operator-sdk writes from the PROJECT file: on the CSV, and (as metrics
// annotations) in the bundle's metadata/annotations.yaml and image labels.
const (
	CSVBuilderAnnotation       = "operators.operatorframework.io/builder"
	CSVProjectLayoutAnnotation = "operators.operatorframework.io/project_layout"
	MetricsBuilder             = "operators.operatorframework.io.metrics.builder"
	MetricsMediaType           = "operators.operatorframework.io.metrics.mediatype.v1"
	MetricsProjectLayout       = "operators.operatorframework.io.metrics.project_layout"
)

// Project is what the generator reads of the operator-sdk PROJECT file.
type Project struct {
	Domain      string            `json:"domain"`
	Layout      []string          `json:"layout"`
	Plugins     map[string]any    `json:"plugins,omitempty"`
	ProjectName string            `json:"projectName"`
	Repo        string            `json:"repo"`
	Resources   []ProjectResource `json:"resources"`
	Version     string            `json:"version"`
}

// ProjectResource is one API of the PROJECT file.
type ProjectResource struct {
	API *struct {
		CRDVersion string `json:"crdVersion"`
		Namespaced bool   `json:"namespaced"`
	} `json:"api,omitempty"`
	Controller bool   `json:"controller,omitempty"`
	Domain     string `json:"domain"`
	Group      string `json:"group"`
	Kind       string `json:"kind"`
	Path       string `json:"path,omitempty"`
	Version    string `json:"version"`
}

// ReadProject reads and decodes a PROJECT file strictly.
func ReadProject(path string) (*Project, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Project
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(p.Layout) != 1 {
		return nil, fmt.Errorf("%s: want one layout, found %v", path, p.Layout)
	}
	return &p, nil
}
