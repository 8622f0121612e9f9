package gen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kustomization is the subset of a kustomization.yaml the generator understands. Fields that
// only rename or relocate objects for a direct install are accepted and ignored, because the
// bundle carries no namespace and OLM names the objects; anything else is refused so that a
// new patch in config/ cannot silently diverge from the bundle.
type kustomization struct {
	Resources  []string `json:"resources"`
	Namespace  string   `json:"namespace"`
	NamePrefix string   `json:"namePrefix"`
	Images     []any    `json:"images"`
}

var ignoredKustomizeFields = map[string]bool{"resources": true, "namespace": true, "namePrefix": true, "images": true}

// Resolve reads dir/kustomization.yaml and returns the objects of every resource, depth
// first, in the order the resources lists give.
func Resolve(dir string) ([]*unstructured.Unstructured, error) {
	return resolve(dir, map[string]bool{})
}

func resolve(dir string, seen map[string]bool) ([]*unstructured.Unstructured, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if seen[abs] {
		return nil, fmt.Errorf("kustomization %s is included twice", dir)
	}
	seen[abs] = true
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := yaml.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	for name := range fields {
		if !ignoredKustomizeFields[name] {
			return nil, fmt.Errorf("%s/kustomization.yaml: field %q is not supported by the bundle generator; extend tests/tools/bundlegen/gen or express it in the resources", dir, name)
		}
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, res := range k.Resources {
		path := filepath.Join(dir, res)
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: resource %s: %w", dir, res, err)
		}
		var more []*unstructured.Unstructured
		if info.IsDir() {
			more, err = resolve(path, seen)
		} else {
			more, err = ReadObjects(path)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

// ReadObjects parses every non-empty YAML document of a file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: a document has no apiVersion or kind", path)
		}
		objs = append(objs, u)
	}
}
