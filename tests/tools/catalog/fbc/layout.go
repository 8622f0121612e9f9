package fbc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// LayoutDirs are the directories of a bundle in the OperatorHub layout:
// <package>/<version>/manifests, .../metadata and .../tests (the scorecard configuration the
// bundle's operators.operatorframework.io.test.config.v1 annotation points to).
var LayoutDirs = []string{"manifests", "metadata", "tests"}

// SyncRelease copies the release bundle (make bundle's output, normally bundle/) into the
// OperatorHub layout as <bundleRoot>/<version>, replacing its manifests/, metadata/ and tests/,
// and returns the version. The template must already list the version.
func SyncRelease(root string, t *Template, bundleRoot, releaseDir string) (string, error) {
	b, err := ReadBundleDirUnchecked(releaseDir)
	if err != nil {
		return "", err
	}
	version := b.Version.String()
	if len(t.ChannelsOf(version)) == 0 {
		return "", fmt.Errorf("the release bundle in %s is version %s, which the template lists in no archetype; add its image to the template", releaseDir, version)
	}
	dest := filepath.Join(root, bundleRoot, version)
	for _, d := range LayoutDirs {
		if err := os.RemoveAll(filepath.Join(dest, d)); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Join(dest, d), 0o755); err != nil {
			return "", err
		}
		if err := os.CopyFS(filepath.Join(dest, d), os.DirFS(filepath.Join(releaseDir, d))); err != nil {
			return "", fmt.Errorf("copy %s/%s to %s: %w", releaseDir, d, dest, err)
		}
	}
	return version, nil
}

// ReadBundleDirUnchecked reads a bundle directory whose name need not be its version (bundle/).
func ReadBundleDirUnchecked(dir string) (*BundleDir, error) { return readBundleDir(dir, false) }

// RepointOperatorImage moves the operator image of a bundle's CSV to another repository,
// keeping its tag or digest: the containerImage annotation, every install container and
// related image that used the same repository. It rewrites the file only when something
// changes and reports whether it did. The CSV is written the way the bundle generator writes
// it (sigs.k8s.io/yaml, ending with a document separator), so a bundle moved back to its
// original repository is byte for byte what it was.
func RepointOperatorImage(csvFile, repository string) (bool, error) {
	raw, err := os.ReadFile(csvFile)
	if err != nil {
		return false, err
	}
	objs, err := gen.ReadObjects(csvFile)
	if err != nil {
		return false, err
	}
	if len(objs) != 1 || objs[0].GetKind() != "ClusterServiceVersion" {
		return false, fmt.Errorf("%s must hold exactly one ClusterServiceVersion", csvFile)
	}
	csv := objs[0]
	ann := csv.GetAnnotations()
	current, err := gen.ParseImage(ann["containerImage"])
	if err != nil {
		return false, fmt.Errorf("%s: containerImage: %w", csvFile, err)
	}
	if current.Repository == repository {
		return false, nil
	}
	if _, err := gen.ParseImage(repository + ":0"); err != nil {
		return false, fmt.Errorf("operator repository: %w", err)
	}
	move := func(image string) string {
		ref, err := gen.ParseImage(image)
		if err != nil || ref.Repository != current.Repository {
			return image
		}
		ref.Repository = repository
		return ref.String()
	}
	ann["containerImage"] = move(ann["containerImage"])
	csv.SetAnnotations(ann)
	deployments, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	for _, d := range deployments {
		for _, field := range []string{"initContainers", "containers"} {
			path := []string{"spec", "template", "spec", field}
			containers, _, _ := unstructured.NestedSlice(d.(map[string]any), path...)
			for _, c := range containers {
				cm := c.(map[string]any)
				if img, ok := cm["image"].(string); ok {
					cm["image"] = move(img)
				}
			}
			if len(containers) > 0 {
				if err := unstructured.SetNestedSlice(d.(map[string]any), containers, path...); err != nil {
					return false, err
				}
			}
		}
	}
	if len(deployments) > 0 {
		if err := unstructured.SetNestedSlice(csv.Object, deployments, "spec", "install", "spec", "deployments"); err != nil {
			return false, err
		}
	}
	related, _, _ := unstructured.NestedSlice(csv.Object, "spec", "relatedImages")
	for _, r := range related {
		rm := r.(map[string]any)
		if img, ok := rm["image"].(string); ok {
			rm["image"] = move(img)
		}
	}
	if len(related) > 0 {
		if err := unstructured.SetNestedSlice(csv.Object, related, "spec", "relatedImages"); err != nil {
			return false, err
		}
	}
	out, err := yaml.Marshal(csv.Object)
	if err != nil {
		return false, err
	}
	if bytes.HasSuffix(raw, []byte("---\n")) {
		out = append(out, []byte("---\n")...)
	}
	return true, os.WriteFile(csvFile, out, 0o644)
}

// BundleRepository returns the repository the catalog's bundle images share, checking that
// each bundle image is <repository>:<its version>.
func BundleRepository(c *Catalog) (string, error) {
	repo := ""
	for _, b := range c.Bundles {
		pv, err := b.PackageVersion()
		if err != nil {
			return "", err
		}
		r, tag, ok := strings.Cut(b.Image, ":"+pv.Version)
		if !ok || tag != "" || r == "" {
			return "", fmt.Errorf("bundle %q: image %q is not <repository>:%s", b.Name, b.Image, pv.Version)
		}
		if repo != "" && r != repo {
			return "", fmt.Errorf("bundle images in two repositories: %s and %s", repo, r)
		}
		repo = r
	}
	if repo == "" {
		return "", fmt.Errorf("the catalog has no bundle")
	}
	return repo, nil
}

// BundleDockerfile is a Dockerfile that builds a bundle image from a bundle directory as the
// build context (<package>/<version>): FROM scratch, the labels equal to its
// metadata/annotations.yaml, manifests/ and metadata/ (and tests/scorecard/ when present).
func BundleDockerfile(dir string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	// Keep the annotations in file order: read the keys line by line, values through YAML.
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &ann); err != nil {
		return nil, fmt.Errorf("%s/metadata/annotations.yaml: %w", dir, err)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Generated by tests/tools/catalog from %s/metadata/annotations.yaml.\nFROM scratch\n\n", filepath.ToSlash(dir))
	for _, line := range strings.Split(string(raw), "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if v, known := ann.Annotations[key]; ok && known && strings.HasPrefix(line, "  ") {
			fmt.Fprintf(&sb, "LABEL %s=%s\n", key, v)
		}
	}
	sb.WriteString("\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n")
	if _, err := os.Stat(filepath.Join(dir, "tests", "scorecard")); err == nil {
		sb.WriteString("COPY tests/scorecard /tests/scorecard/\n")
	}
	return []byte(sb.String()), nil
}
