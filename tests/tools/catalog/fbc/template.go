package fbc

import (
	"fmt"
	"os"
	"sort"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// TemplateSchema is opm's semver catalog template (`opm alpha render-template semver`).
const TemplateSchema = "olm.semver"

// The channel archetypes of an olm.semver template, least stable first. A release enters
// candidate first and is promoted to fast or stable.
const (
	ArchetypeCandidate = "candidate"
	ArchetypeFast      = "fast"
	ArchetypeStable    = "stable"
)

// Archetypes lists the archetypes in increasing stability, the order opm ranks them in when it
// picks the default channel.
var Archetypes = []string{ArchetypeCandidate, ArchetypeFast, ArchetypeStable}

// The kinds of channel an olm.semver template generates: one per major version
// (stable-v0) or one per minor version (stable-v0.2).
const (
	StreamMajor = "major"
	StreamMinor = "minor"
)

// Template is catalog/template.yaml, opm's olm.semver schema and nothing else, so that
// `opm alpha render-template semver catalog/template.yaml` reads it as this renderer does.
// Each archetype lists bundle images; opm decides the channels (one per archetype and major or
// minor version) and every edge from the bundle versions.
//
// opm pulls each bundle image to learn its version; this renderer reads the bundle from the
// OperatorHub layout instead (<bundleRoot>/<tag>/), so it requires what opm does not: every
// image is <repository>:<version>, all in one repository.
type Template struct {
	Schema                       string          `json:"schema"`
	GenerateMajorChannels        bool            `json:"generateMajorChannels,omitempty"`
	GenerateMinorChannels        bool            `json:"generateMinorChannels,omitempty"`
	DefaultChannelTypePreference string          `json:"defaultChannelTypePreference,omitempty"`
	Candidate                    TemplateChannel `json:"candidate,omitempty"`
	Fast                         TemplateChannel `json:"fast,omitempty"`
	Stable                       TemplateChannel `json:"stable,omitempty"`
}

// TemplateChannel lists the bundle images of one archetype.
type TemplateChannel struct {
	Bundles []TemplateBundle `json:"bundles,omitempty"`
}

// TemplateBundle names one bundle by its image.
type TemplateBundle struct {
	Image string `json:"image,omitempty"`
}

// ReadTemplate reads and checks a template file. opm's defaults are applied: with neither
// generate flag set, minor channels are generated, and the default-channel preference follows
// the generated kind.
func ReadTemplate(path string) (*Template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Template
	if err := yaml.UnmarshalStrict(raw, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &t, nil
}

// Archetype returns the bundles of one archetype.
func (t *Template) Archetype(name string) []TemplateBundle {
	switch name {
	case ArchetypeCandidate:
		return t.Candidate.Bundles
	case ArchetypeFast:
		return t.Fast.Bundles
	case ArchetypeStable:
		return t.Stable.Bundles
	}
	return nil
}

func (t *Template) check() error {
	if t.Schema != TemplateSchema {
		return fmt.Errorf("schema is %q, want %s", t.Schema, TemplateSchema)
	}
	// opm's defaults.
	if !t.GenerateMajorChannels && !t.GenerateMinorChannels {
		t.GenerateMinorChannels = true
	}
	switch t.DefaultChannelTypePreference {
	case "":
		if t.GenerateMinorChannels {
			t.DefaultChannelTypePreference = StreamMinor
		} else {
			t.DefaultChannelTypePreference = StreamMajor
		}
	case StreamMinor:
		if !t.GenerateMinorChannels {
			return fmt.Errorf("defaultChannelTypePreference is minor, but the template generates no minor-version channels")
		}
	case StreamMajor:
		if !t.GenerateMajorChannels {
			return fmt.Errorf("defaultChannelTypePreference is major, but the template generates no major-version channels")
		}
	default:
		return fmt.Errorf("defaultChannelTypePreference %q is neither major nor minor", t.DefaultChannelTypePreference)
	}
	total := 0
	repo := ""
	for _, arch := range Archetypes {
		seen := map[string]bool{}
		for _, b := range t.Archetype(arch) {
			total++
			r, v, err := SplitBundleImage(b.Image)
			if err != nil {
				return fmt.Errorf("%s: %w", arch, err)
			}
			if repo != "" && r != repo {
				return fmt.Errorf("%s: bundle images in two repositories, %s and %s; keep every bundle in one", arch, repo, r)
			}
			repo = r
			if seen[v] {
				return fmt.Errorf("%s lists %s twice", arch, b.Image)
			}
			seen[v] = true
		}
	}
	if total == 0 {
		return fmt.Errorf("no archetype lists a bundle")
	}
	// This project's promotion rule (not opm's): a release reaches fast or stable only after
	// candidate.
	inCandidate := map[string]bool{}
	for _, b := range t.Candidate.Bundles {
		inCandidate[b.Image] = true
	}
	for _, arch := range []string{ArchetypeFast, ArchetypeStable} {
		for _, b := range t.Archetype(arch) {
			if !inCandidate[b.Image] {
				return fmt.Errorf("%s lists %s, which candidate does not: a release reaches %s through candidate", arch, b.Image, arch)
			}
		}
	}
	return nil
}

// SplitBundleImage splits a template image, <repository>:<version>, and checks both parts.
func SplitBundleImage(image string) (repository, version string, err error) {
	ref, err := gen.ParseImage(image)
	if err != nil {
		return "", "", err
	}
	if ref.Digest != "" || ref.Tag == "" {
		return "", "", fmt.Errorf("bundle image %q must be tagged with its version (<repository>:<version>), not pinned by digest: the renderer reads the bundle of that version from the OperatorHub layout", image)
	}
	v, err := semver.Parse(ref.Tag)
	if err != nil {
		return "", "", fmt.Errorf("bundle image %q: tag %q is not a semantic version: %w", image, ref.Tag, err)
	}
	if v.String() != ref.Tag {
		return "", "", fmt.Errorf("bundle image %q: write the tag %q as %q", image, ref.Tag, v.String())
	}
	return ref.Repository, ref.Tag, nil
}

// Repository is the one repository of the template's bundle images.
func (t *Template) Repository() string {
	for _, arch := range Archetypes {
		for _, b := range t.Archetype(arch) {
			r, _, _ := SplitBundleImage(b.Image)
			return r
		}
	}
	return ""
}

// Versions returns every version the template lists, oldest first.
func (t *Template) Versions() []string {
	seen := map[string]bool{}
	var out []string
	for _, arch := range Archetypes {
		for _, b := range t.Archetype(arch) {
			_, v, _ := SplitBundleImage(b.Image)
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return semver.MustParse(out[i]).LT(semver.MustParse(out[j])) })
	return out
}

// ArchetypeVersions returns the versions one archetype lists, oldest first.
func (t *Template) ArchetypeVersions(arch string) []semver.Version {
	var out []semver.Version
	for _, b := range t.Archetype(arch) {
		_, v, _ := SplitBundleImage(b.Image)
		out = append(out, semver.MustParse(v))
	}
	semver.Sort(out)
	return out
}

// ChannelName is the name opm gives the channel of an archetype holding version v.
func ChannelName(arch, kind string, v semver.Version) string {
	if kind == StreamMajor {
		return fmt.Sprintf("%s-v%d", arch, v.Major)
	}
	return fmt.Sprintf("%s-v%d.%d", arch, v.Major, v.Minor)
}

// Kinds returns the kinds of channel the template generates, major first.
func (t *Template) Kinds() []string {
	var out []string
	if t.GenerateMajorChannels {
		out = append(out, StreamMajor)
	}
	if t.GenerateMinorChannels {
		out = append(out, StreamMinor)
	}
	return out
}

// ChannelsOf returns the channels the template puts a version in, sorted.
func (t *Template) ChannelsOf(version string) []string {
	v, err := semver.Parse(version)
	if err != nil {
		return nil
	}
	var out []string
	for _, arch := range Archetypes {
		for _, av := range t.ArchetypeVersions(arch) {
			if av.EQ(v) {
				for _, kind := range t.Kinds() {
					out = append(out, ChannelName(arch, kind, v))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
