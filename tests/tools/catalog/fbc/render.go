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

// Render builds the catalog from the olm.semver template and the bundles of the OperatorHub
// layout under root/bundleRoot, as `opm alpha render-template semver` builds it from the bundle
// images: the same channels (one per archetype and major or minor version), the same edges (in
// a major version, the newest bundle of each minor version replaces the newest of the minor
// before it and skips every older bundle), the same default channel (the most stable archetype,
// then the highest version) and, per bundle, the properties and related images `opm render`
// gives. Each bundle image is bundleRepo:<version> (empty: the template's repository).
//
// It adds what opm leaves out or cannot see: the package's description and icon, from the CSV
// of the default channel's head; and this project's consistency rules. Every version directory
// must be in the template and every template version must have a directory; each bundle's
// annotated channels and default channel must be the ones the catalog gives it; and a CSV's
// spec.replaces must be the edge the catalog draws for it, so the CSVs (what OperatorHub's
// semver mode and `operator-sdk run bundle` read) and the catalog describe one graph.
func Render(root string, t *Template, bundleRoot, bundleRepo string) (*Catalog, error) {
	if bundleRepo == "" {
		bundleRepo = t.Repository()
	}
	if _, err := gen.ParseImage(bundleRepo + ":0"); err != nil {
		return nil, fmt.Errorf("bundle repository: %w", err)
	}
	dir := filepath.Join(root, bundleRoot)
	dirs, err := ListBundleDirs(dir)
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
			return nil, fmt.Errorf("%s/%s is in no archetype of the template; add its image to the template or remove the directory", bundleRoot, v)
		}
		b, err := ReadBundleDir(filepath.Join(dir, v))
		if err != nil {
			return nil, err
		}
		bundles[v] = b
	}
	pkg := ""
	for _, v := range t.Versions() {
		b := bundles[v]
		if b == nil {
			return nil, fmt.Errorf("the template lists %s, but %s/%s does not exist", v, bundleRoot, v)
		}
		p := b.Annotations[annotationPackage]
		if pkg != "" && p != pkg {
			return nil, fmt.Errorf("%s/%s: annotations.yaml names package %q, the other bundles %q", bundleRoot, v, p, pkg)
		}
		pkg = p
	}
	if pkg == "" {
		return nil, fmt.Errorf("the bundles name no package (%s)", annotationPackage)
	}

	cat := &Catalog{}
	channels, defaultChannel := semverChannels(t, pkg)
	entryOf := map[string]map[string]*ChannelEntry{} // channel -> bundle name -> entry
	for i := range channels {
		entryOf[channels[i].Name] = map[string]*ChannelEntry{}
		for j := range channels[i].Entries {
			entryOf[channels[i].Name][channels[i].Entries[j].Name] = &channels[i].Entries[j]
		}
	}
	for _, v := range t.Versions() {
		b := bundles[v]
		where := filepath.Join(bundleRoot, v)
		if want := BundleName(pkg, v); b.CSV.Name != want {
			return nil, fmt.Errorf("%s: the CSV is named %q, want %q", where, b.CSV.Name, want)
		}
		annotated := strings.Split(b.Annotations[annotationChannels], ",")
		sort.Strings(annotated)
		if got, want := strings.Join(annotated, ","), strings.Join(t.ChannelsOf(v), ","); got != want {
			return nil, fmt.Errorf("%s: annotations.yaml puts the bundle in channels %s, the template in %s", where, got, want)
		}
		if d := b.Annotations[annotationDefaultChannel]; d != "" && d != defaultChannel {
			return nil, fmt.Errorf("%s: annotations.yaml names default channel %s, the template's is %s", where, d, defaultChannel)
		}
		for _, ch := range t.ChannelsOf(v) {
			e := entryOf[ch][b.CSV.Name]
			if e.Replaces == "" && len(e.Skips) == 0 {
				continue // opm draws edges only to the newest bundle of each minor version
			}
			if b.CSV.Spec.Replaces != e.Replaces {
				return nil, fmt.Errorf("%s: the CSV replaces %q, but in channel %s the bundle it upgrades from is %q; regenerate the bundle with --replaces or change the template",
					where, b.CSV.Spec.Replaces, ch, e.Replaces)
			}
		}
		bundle, err := renderBundle(pkg, b, bundleRepo+":"+v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		cat.Bundles = append(cat.Bundles, bundle)
	}
	cat.Channels = channels

	var newest *BundleDir
	for _, ch := range channels {
		if ch.Name == defaultChannel {
			head, err := Head(ch)
			if err != nil {
				return nil, err
			}
			newest = bundles[strings.TrimPrefix(head, pkg+".v")]
		}
	}
	p := Package{Schema: SchemaPackage, Name: pkg, DefaultChannel: defaultChannel}
	if newest != nil {
		p.Description = newest.CSV.Spec.Description
		if len(newest.CSV.Spec.Icon) > 0 {
			p.Icon = &Icon{Data: newest.CSV.Spec.Icon[0].Data, MediaType: newest.CSV.Spec.Icon[0].MediaType}
		}
	}
	cat.Packages = []Package{p}
	return cat, nil
}

// semverChannels generates the channels of an olm.semver template with opm's rules and returns
// them with the default channel.
//
// Channels: for every archetype and every generated kind, one channel per major version
// (<archetype>-v<X>) or minor version (<archetype>-v<X>.<Y>) holding the archetype's bundles of
// that version, oldest first.
//
// Edges: within one archetype, kind and major version, bundles are walked in version order; the
// newest bundle of each minor version replaces the newest bundle of the minor version before it
// (none for the first) and skips every other bundle before it. Older bundles of a minor version
// get no edge. Nothing crosses a major version, an archetype or a kind.
//
// Default channel: of the channels, compared when each is created (by its oldest bundle), the
// one of the most stable archetype, then of the highest version, then of the preferred kind.
func semverChannels(t *Template, pkg string) ([]Channel, string) {
	var channels []Channel
	index := map[string]int{}
	type mark struct {
		arch, kind, name string
		version          semver.Version
		set              bool
	}
	rank := map[string]int{ArchetypeCandidate: 0, ArchetypeFast: 1, ArchetypeStable: 2}
	kindRank := map[string]int{StreamMajor: 1, StreamMinor: 2}
	better := func(a, b mark) bool {
		if !b.set {
			return true
		}
		if rank[a.arch] != rank[b.arch] {
			return rank[a.arch] > rank[b.arch]
		}
		if !a.version.EQ(b.version) {
			return a.version.GT(b.version)
		}
		if a.kind != b.kind {
			if a.kind == t.DefaultChannelTypePreference {
				return true
			}
			if b.kind == t.DefaultChannelTypePreference {
				return false
			}
			return kindRank[a.kind] > kindRank[b.kind]
		}
		return false
	}
	var best mark
	for _, arch := range Archetypes {
		versions := t.ArchetypeVersions(arch)
		for _, kind := range t.Kinds() {
			for _, v := range versions {
				name := ChannelName(arch, kind, v)
				i, ok := index[name]
				if !ok {
					i = len(channels)
					index[name] = i
					channels = append(channels, Channel{Schema: SchemaChannel, Name: name, Package: pkg})
					if m := (mark{arch: arch, kind: kind, name: name, version: v, set: true}); better(m, best) {
						best = m
					}
				}
				channels[i].Entries = append(channels[i].Entries, ChannelEntry{Name: BundleName(pkg, v.String())})
			}
			// Edges, per major version.
			var before []string
			prevHead := ""
			for i, v := range versions {
				if i > 0 && versions[i-1].Major != v.Major {
					before, prevHead = nil, ""
				}
				name := BundleName(pkg, v.String())
				last := i == len(versions)-1 || versions[i+1].Major != v.Major || versions[i+1].Minor != v.Minor
				if last {
					ch := &channels[index[ChannelName(arch, kind, v)]]
					for j := range ch.Entries {
						if ch.Entries[j].Name != name {
							continue
						}
						ch.Entries[j].Replaces = prevHead
						for _, s := range before {
							if s != prevHead {
								ch.Entries[j].Skips = append(ch.Entries[j].Skips, s)
							}
						}
						sort.Strings(ch.Entries[j].Skips)
					}
					prevHead = name
				}
				before = append(before, name)
			}
		}
	}
	sort.Slice(channels, func(i, j int) bool { return channels[i].Name < channels[j].Name })
	return channels, best.name
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
