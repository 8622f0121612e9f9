package fbc

import (
	"fmt"
	"os"
	"sort"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/yaml"
)

// TemplateSchema names the template format below.
const TemplateSchema = "celld.semver-template"

// The channels of the template, in promotion order: a release enters candidate first and is
// promoted to stable.
const (
	ChannelCandidate = "candidate"
	ChannelStable    = "stable"
)

// Template is the semver-style catalog template (catalog/template.yaml). Like opm's olm.semver
// template it lists bundles per channel archetype and leaves the edges to the renderer: in each
// channel, ordered by version, every bundle replaces the one before it and keeps the skipRange
// its CSV declares. Bundles are named by version and read from the OperatorHub layout
// (BundleRoot/<version>/manifests|metadata) instead of being pulled as images, and the catalog's
// bundle images are BUNDLE_REPO:<version>.
type Template struct {
	Schema         string          `json:"schema"`
	Package        string          `json:"package"`
	DefaultChannel string          `json:"defaultChannel"`
	BundleRoot     string          `json:"bundleRoot"`
	Candidate      TemplateChannel `json:"candidate"`
	Stable         TemplateChannel `json:"stable"`
}

// TemplateChannel lists the bundles of one channel.
type TemplateChannel struct {
	Bundles []TemplateBundle `json:"bundles"`
}

// TemplateBundle names one bundle by its version.
type TemplateBundle struct {
	Version string `json:"version"`
}

// ReadTemplate reads and checks a template file.
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

func (t *Template) check() error {
	switch {
	case t.Schema != TemplateSchema:
		return fmt.Errorf("schema is %q, want %s", t.Schema, TemplateSchema)
	case t.Package == "":
		return fmt.Errorf("package is required")
	case t.BundleRoot == "":
		return fmt.Errorf("bundleRoot is required (the OperatorHub directory <package>/ holding <version>/manifests and <version>/metadata)")
	case t.DefaultChannel != ChannelCandidate && t.DefaultChannel != ChannelStable:
		return fmt.Errorf("defaultChannel %q is neither %s nor %s", t.DefaultChannel, ChannelCandidate, ChannelStable)
	}
	raw := map[string][]TemplateBundle{ChannelCandidate: t.Candidate.Bundles, ChannelStable: t.Stable.Bundles}
	if len(raw[t.DefaultChannel]) == 0 {
		return fmt.Errorf("the default channel %s lists no bundle", t.DefaultChannel)
	}
	for _, name := range []string{ChannelCandidate, ChannelStable} {
		seen := map[string]bool{}
		for _, b := range raw[name] {
			v, err := semver.Parse(b.Version)
			if err != nil {
				return fmt.Errorf("%s: version %q is not a semantic version: %w", name, b.Version, err)
			}
			if v.String() != b.Version {
				return fmt.Errorf("%s: write version %q as %q", name, b.Version, v.String())
			}
			if seen[b.Version] {
				return fmt.Errorf("%s lists %s twice", name, b.Version)
			}
			seen[b.Version] = true
		}
	}
	inCandidate := map[string]bool{}
	for _, b := range t.Candidate.Bundles {
		inCandidate[b.Version] = true
	}
	for _, b := range t.Stable.Bundles {
		if !inCandidate[b.Version] {
			return fmt.Errorf("stable lists %s, which candidate does not: a release reaches stable through candidate", b.Version)
		}
	}
	return nil
}

// Channels returns each non-empty channel's versions, oldest first.
func (t *Template) Channels() map[string][]TemplateBundle {
	out := map[string][]TemplateBundle{}
	for name, ch := range map[string]TemplateChannel{ChannelCandidate: t.Candidate, ChannelStable: t.Stable} {
		if len(ch.Bundles) == 0 {
			continue
		}
		list := append([]TemplateBundle(nil), ch.Bundles...)
		sort.SliceStable(list, func(i, j int) bool {
			return semver.MustParse(list[i].Version).LT(semver.MustParse(list[j].Version))
		})
		out[name] = list
	}
	return out
}

// Versions returns every version the template lists, oldest first.
func (t *Template) Versions() []string {
	seen := map[string]bool{}
	var out []string
	for _, list := range t.Channels() {
		for _, b := range list {
			if !seen[b.Version] {
				seen[b.Version] = true
				out = append(out, b.Version)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return semver.MustParse(out[i]).LT(semver.MustParse(out[j])) })
	return out
}

// ChannelsOf returns the channels listing a version, sorted.
func (t *Template) ChannelsOf(version string) []string {
	var out []string
	for name, list := range t.Channels() {
		for _, b := range list {
			if b.Version == version {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}
