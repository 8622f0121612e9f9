package fbc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// Bundle annotation keys the renderer reads.
const (
	annotationPackage        = "operators.operatorframework.io.bundle.package.v1"
	annotationChannels       = "operators.operatorframework.io.bundle.channels.v1"
	annotationDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"
)

// BundleDir is one bundle of the OperatorHub layout, read.
type BundleDir struct {
	Dir         string
	Version     semver.Version
	CSV         *operatorsv1alpha1.ClusterServiceVersion
	CSVFile     string
	CRDs        []*unstructured.Unstructured
	Annotations map[string]string
}

// ReadBundleDir reads <dir>/manifests and <dir>/metadata/annotations.yaml. The directory's name
// must be the CSV's version.
func ReadBundleDir(dir string) (*BundleDir, error) { return readBundleDir(dir, true) }

func readBundleDir(dir string, nameIsVersion bool) (*BundleDir, error) {
	b := &BundleDir{Dir: dir}
	entries, err := os.ReadDir(filepath.Join(dir, "manifests"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			return nil, fmt.Errorf("%s/manifests/%s: manifests/ must be flat", dir, e.Name())
		}
		path := filepath.Join(dir, "manifests", e.Name())
		objs, err := gen.ReadObjects(path)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "ClusterServiceVersion":
				if b.CSV != nil {
					return nil, fmt.Errorf("%s holds two ClusterServiceVersions", dir)
				}
				b.CSV = &operatorsv1alpha1.ClusterServiceVersion{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, b.CSV); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				b.CSVFile = path
			case "CustomResourceDefinition":
				b.CRDs = append(b.CRDs, o)
			}
		}
	}
	if b.CSV == nil {
		return nil, fmt.Errorf("%s/manifests holds no ClusterServiceVersion", dir)
	}
	b.Version = b.CSV.Spec.Version.Version
	if nameIsVersion && filepath.Base(dir) != b.Version.String() {
		return nil, fmt.Errorf("%s holds the CSV of version %s; the directory must be named after it", dir, b.Version)
	}
	if b.CSV.Name == "" {
		return nil, fmt.Errorf("%s: the CSV has no name", dir)
	}
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
	if _, err := os.Stat(filepath.Join(dir, "metadata", "dependencies.yaml")); err == nil {
		return nil, fmt.Errorf("%s/metadata/dependencies.yaml: bundle dependencies are not rendered by this generator", dir)
	}
	b.Annotations = ann.Annotations
	return b, nil
}

// ListBundleDirs returns the version directories under root, oldest first.
func ListBundleDirs(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var versions []semver.Version
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		v, err := semver.Parse(e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s/%s: a directory of the OperatorHub layout must be a bundle version: %w", root, e.Name(), err)
		}
		versions = append(versions, v)
	}
	semver.Sort(versions)
	out := make([]string, 0, len(versions))
	for _, v := range versions {
		out = append(out, v.String())
	}
	return out, nil
}

// Render builds the catalog from the template and the bundles under root/BundleRoot. Each bundle
// image is bundleRepo:<version>. Every version directory must be in the template and every
// template version must have a directory; each bundle's annotated channels must be the
// channels the template puts it in, and each CSV's replaces must be the version before it in
// every channel that lists it, so the CSVs (what OperatorHub's semver mode and a classic
// bundle install read) and the catalog describe one graph.
func Render(root string, t *Template, bundleRepo string) (*Catalog, error) {
	if bundleRepo == "" {
		return nil, fmt.Errorf("the bundle image repository is required")
	}
	if _, err := gen.ParseImage(bundleRepo + ":0"); err != nil {
		return nil, fmt.Errorf("bundle repository: %w", err)
	}
	bundleRoot := filepath.Join(root, t.BundleRoot)
	dirs, err := ListBundleDirs(bundleRoot)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, v := range t.Versions() {
		listed[v] = true
	}
	bundles := map[string]*BundleDir{}
	for _, v := range dirs {
		if !listed[v] {
			return nil, fmt.Errorf("%s/%s is in no channel of the template; add it to the template or remove the directory", t.BundleRoot, v)
		}
		b, err := ReadBundleDir(filepath.Join(bundleRoot, v))
		if err != nil {
			return nil, err
		}
		bundles[v] = b
	}
	for _, v := range t.Versions() {
		if bundles[v] == nil {
			return nil, fmt.Errorf("the template lists %s, but %s/%s does not exist", v, t.BundleRoot, v)
		}
	}

	cat := &Catalog{}
	for _, v := range t.Versions() {
		b := bundles[v]
		where := filepath.Join(t.BundleRoot, v)
		if want := BundleName(t.Package, v); b.CSV.Name != want {
			return nil, fmt.Errorf("%s: the CSV is named %q, want %q", where, b.CSV.Name, want)
		}
		if p := b.Annotations[annotationPackage]; p != t.Package {
			return nil, fmt.Errorf("%s: annotations.yaml names package %q, the template %q", where, p, t.Package)
		}
		annotated := strings.Split(b.Annotations[annotationChannels], ",")
		sort.Strings(annotated)
		if got, want := strings.Join(annotated, ","), strings.Join(t.ChannelsOf(v), ","); got != want {
			return nil, fmt.Errorf("%s: annotations.yaml puts the bundle in channels %s, the template in %s", where, got, want)
		}
		if d := b.Annotations[annotationDefaultChannel]; d != "" && d != t.DefaultChannel {
			return nil, fmt.Errorf("%s: annotations.yaml names default channel %s, the template %s", where, d, t.DefaultChannel)
		}
		bundle, err := renderBundle(t.Package, b, bundleRepo+":"+v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		cat.Bundles = append(cat.Bundles, bundle)
	}

	channels := t.Channels()
	for _, name := range []string{ChannelCandidate, ChannelStable} {
		list := channels[name]
		if len(list) == 0 {
			continue
		}
		ch := Channel{Schema: SchemaChannel, Name: name, Package: t.Package}
		for i, tb := range list {
			b := bundles[tb.Version]
			e := ChannelEntry{Name: b.CSV.Name, Skips: b.CSV.Spec.Skips, SkipRange: b.CSV.Annotations["olm.skipRange"]}
			if i > 0 {
				e.Replaces = bundles[list[i-1].Version].CSV.Name
			}
			if b.CSV.Spec.Replaces != e.Replaces {
				return nil, fmt.Errorf("%s/%s: the CSV replaces %q, but in channel %s the bundle before it is %q; regenerate the bundle with --replaces or change the template",
					t.BundleRoot, tb.Version, b.CSV.Spec.Replaces, name, e.Replaces)
			}
			ch.Entries = append(ch.Entries, e)
		}
		cat.Channels = append(cat.Channels, ch)
	}

	newest := bundles[channels[t.DefaultChannel][len(channels[t.DefaultChannel])-1].Version].CSV
	pkg := Package{Schema: SchemaPackage, Name: t.Package, DefaultChannel: t.DefaultChannel, Description: newest.Spec.Description}
	if len(newest.Spec.Icon) > 0 {
		pkg.Icon = &Icon{Data: newest.Spec.Icon[0].Data, MediaType: newest.Spec.Icon[0].MediaType}
	}
	cat.Packages = []Package{pkg}
	return cat, nil
}

// csvMetadata is the value of olm.csv.metadata: the CSV fields OLM and catalog clients show
// without pulling the bundle (the subset opm renders).
type csvMetadata struct {
	Annotations               map[string]string                            `json:"annotations,omitempty"`
	APIServiceDefinitions     *operatorsv1alpha1.APIServiceDefinitions     `json:"apiServiceDefinitions,omitempty"`
	CustomResourceDefinitions *operatorsv1alpha1.CustomResourceDefinitions `json:"crdDescriptions,omitempty"`
	Description               string                                       `json:"description,omitempty"`
	DisplayName               string                                       `json:"displayName,omitempty"`
	InstallModes              []operatorsv1alpha1.InstallMode              `json:"installModes,omitempty"`
	Keywords                  []string                                     `json:"keywords,omitempty"`
	Labels                    map[string]string                            `json:"labels,omitempty"`
	Links                     []operatorsv1alpha1.AppLink                  `json:"links,omitempty"`
	Maintainers               []operatorsv1alpha1.Maintainer               `json:"maintainers,omitempty"`
	Maturity                  string                                       `json:"maturity,omitempty"`
	MinKubeVersion            string                                       `json:"minKubeVersion,omitempty"`
	NativeAPIs                []metav1.GroupVersionKind                    `json:"nativeAPIs,omitempty"`
	Provider                  *operatorsv1alpha1.AppLink                   `json:"provider,omitempty"`
}

func renderBundle(pkg string, b *BundleDir, image string) (Bundle, error) {
	out := Bundle{Schema: SchemaBundle, Name: b.CSV.Name, Package: pkg, Image: image}
	add := func(typ string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.Properties = append(out.Properties, Property{Type: typ, Value: raw})
		return nil
	}
	if err := add(PropertyPackage, PackageProperty{PackageName: pkg, Version: b.Version.String()}); err != nil {
		return out, err
	}
	var gvks []GVKProperty
	for _, crd := range b.CRDs {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			name, _ := v.(map[string]any)["name"].(string)
			gvks = append(gvks, GVKProperty{Group: group, Kind: kind, Version: name})
		}
	}
	sortGVKs(gvks)
	for _, g := range gvks {
		if err := add(PropertyGVK, g); err != nil {
			return out, err
		}
	}
	var required []GVKProperty
	for _, r := range b.CSV.Spec.CustomResourceDefinitions.Required {
		group := r.Name
		if _, g, ok := strings.Cut(r.Name, "."); ok {
			group = g
		}
		required = append(required, GVKProperty{Group: group, Kind: r.Kind, Version: r.Version})
	}
	sortGVKs(required)
	for _, g := range required {
		if err := add(PropertyGVKRequired, g); err != nil {
			return out, err
		}
	}
	spec := b.CSV.Spec
	md := csvMetadata{
		Annotations: b.CSV.Annotations, Description: spec.Description, DisplayName: spec.DisplayName,
		InstallModes: spec.InstallModes, Keywords: spec.Keywords, Labels: b.CSV.Labels, Links: spec.Links,
		Maintainers: spec.Maintainers, Maturity: spec.Maturity, MinKubeVersion: spec.MinKubeVersion,
		NativeAPIs: spec.NativeAPIs,
	}
	if len(spec.APIServiceDefinitions.Owned)+len(spec.APIServiceDefinitions.Required) > 0 {
		md.APIServiceDefinitions = &spec.APIServiceDefinitions
	}
	if len(spec.CustomResourceDefinitions.Owned)+len(spec.CustomResourceDefinitions.Required) > 0 {
		md.CustomResourceDefinitions = &spec.CustomResourceDefinitions
	}
	if spec.Provider.Name != "" || spec.Provider.URL != "" {
		md.Provider = &spec.Provider
	}
	if err := add(PropertyCSVMetadata, md); err != nil {
		return out, err
	}

	// Related images as opm lists them: the CSV's, then the bundle image, then any operator
	// container image the CSV does not list.
	seen := map[string]bool{}
	for _, ri := range spec.RelatedImages {
		out.RelatedImages = append(out.RelatedImages, RelatedImage{Name: ri.Name, Image: ri.Image})
		seen[ri.Image] = true
	}
	if !seen[image] {
		out.RelatedImages = append(out.RelatedImages, RelatedImage{Image: image})
		seen[image] = true
	}
	for _, d := range spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		pod := d.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
			if !seen[c.Image] {
				out.RelatedImages = append(out.RelatedImages, RelatedImage{Name: c.Name, Image: c.Image})
				seen[c.Image] = true
			}
		}
	}
	return out, nil
}

func sortGVKs(g []GVKProperty) {
	sort.Slice(g, func(i, j int) bool {
		return g[i].Group+"/"+g[i].Kind+"/"+g[i].Version < g[j].Group+"/"+g[j].Kind+"/"+g[j].Version
	})
}
