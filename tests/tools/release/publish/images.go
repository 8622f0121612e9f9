package publish

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// Labels and paths the images carry.
const (
	// CatalogConfigsLabel tells OLM v1's ClusterCatalog (and opm) where the File-Based Catalog
	// is in a catalog image.
	CatalogConfigsLabel = "operators.operatorframework.io.index.configs.v1"
	// CatalogConfigsDir is that directory.
	CatalogConfigsDir = "/configs"
	// OperatorBinary is the operator's path in its image, and the entrypoint.
	OperatorBinary = "/manager"
	// SourceURL is the repository the images are built from (org.opencontainers.image.source,
	// which also links a ghcr.io package to its repository).
	SourceURL = "https://github.com/celld/celld-operator"
)

// Platform is an OS and architecture an operator binary is built for.
type Platform struct{ OS, Architecture string }

func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		os, arch, ok := strings.Cut(part, "/")
		if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q is not OS/ARCH (linux/amd64)", part)
		}
		out = append(out, Platform{OS: os, Architecture: arch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return out, nil
}

// ociImage gives an image the OCI manifest and config media types (empty.Image has Docker's).
func ociImage(img v1.Image) v1.Image {
	return mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
}

// imageOf builds an image from a base (nil: an empty image), a config applied on top and
// layers appended in order.
func imageOf(base v1.Image, platform Platform, created time.Time, apply func(*v1.Config), layers ...v1.Layer) (v1.Image, error) {
	if base == nil {
		base = ociImage(empty.Image)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = platform.OS, platform.Architecture
	cf.Created = v1.Time{Time: created}
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	apply(&cf.Config)
	img, err := mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "celld-operator release (tests/tools/release)"}}); err != nil {
			return nil, err
		}
	}
	return img, nil
}

// indexOf puts one image per platform in an OCI image index.
func indexOf(images map[Platform]v1.Image, platforms []Platform) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        images[p],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}},
		})
	}
	return idx
}

// OperatorImage is the operator image of one platform: an empty base, one layer with the
// non-root user, /tmp and the CA certificates (the same on every platform), one with the
// static binary; it runs the binary as the non-root user.
func OperatorImage(binary string, platform Platform, version string, created time.Time) (v1.Image, error) {
	base, err := layerOf(baseFiles(), created)
	if err != nil {
		return nil, err
	}
	body, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	bin, err := layerOf([]file{{Path: OperatorBinary, Mode: 0o755, Body: body}}, created)
	if err != nil {
		return nil, err
	}
	return imageOf(nil, platform, created, func(c *v1.Config) {
		c.User = NonRootUser
		c.Entrypoint = []string{OperatorBinary}
		c.Cmd = nil
		c.WorkingDir = "/"
		c.Env = []string{"PATH=/", "SSL_CERT_FILE=" + CACertificatesPath}
		c.Labels["org.opencontainers.image.title"] = "celld-operator"
		c.Labels["org.opencontainers.image.description"] = "The celld operator: fleets of the celld runtime on Kubernetes"
		c.Labels["org.opencontainers.image.version"] = version
		c.Labels["org.opencontainers.image.source"] = SourceURL
	}, base, bin)
}

// BundleAnnotations reads a bundle's metadata/annotations.yaml, the labels its image carries.
func BundleAnnotations(dir string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &ann); err != nil {
		return nil, fmt.Errorf("%s/metadata/annotations.yaml: %w", dir, err)
	}
	if len(ann.Annotations) == 0 {
		return nil, fmt.Errorf("%s/metadata/annotations.yaml has no annotations", dir)
	}
	return ann.Annotations, nil
}

// bundleDirs are what a bundle image holds, each at the image's root.
var bundleDirs = []string{"manifests", "metadata", "tests/scorecard"}

// BundleImage is the registry+v1 bundle image of a bundle directory: FROM scratch, its
// manifests/, metadata/ and tests/scorecard/ (the scorecard configuration the test.config
// annotation points to), and labels equal to metadata/annotations.yaml.
func BundleImage(dir string, platform Platform, created time.Time) (v1.Image, error) {
	labels, err := BundleAnnotations(dir)
	if err != nil {
		return nil, err
	}
	var files []file
	for _, d := range bundleDirs {
		if _, err := os.Stat(filepath.Join(dir, d)); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		f, err := treeFiles(filepath.Join(dir, d), "/"+d)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	layer, err := layerOf(files, created)
	if err != nil {
		return nil, err
	}
	return imageOf(nil, platform, created, func(c *v1.Config) {
		for k, v := range labels {
			c.Labels[k] = v
		}
	}, layer)
}

// CatalogImage is the catalog image of a File-Based Catalog directory (catalog/celld-operator):
// the catalog under /configs/<package>, with the label OLM v1's ClusterCatalog reads. On an opm
// base (opmBase not nil) it also serves the catalog to OLM v0's CatalogSource with `opm serve`.
func CatalogImage(dir string, opmBase v1.Image, platform Platform, created time.Time) (v1.Image, error) {
	files, err := treeFiles(dir, CatalogConfigsDir+"/"+filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	layer, err := layerOf(files, created)
	if err != nil {
		return nil, err
	}
	return imageOf(opmBase, platform, created, func(c *v1.Config) {
		c.Labels[CatalogConfigsLabel] = CatalogConfigsDir
		c.Labels["org.opencontainers.image.source"] = SourceURL
		if opmBase != nil {
			c.Entrypoint = []string{"/bin/opm"}
			c.Cmd = []string{"serve", CatalogConfigsDir, "--cache-dir=/tmp/cache"}
		}
	}, layer)
}
