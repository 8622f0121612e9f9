// Package fbc writes and checks the File-Based Catalog of celld-operator without opm: small
// types for the three schemas a catalog of one package needs (olm.package, olm.channel,
// olm.bundle), a renderer of opm's olm.semver template that reads the bundles from the
// OperatorHub directories instead of pulling their images, and a validator for the rules
// `opm validate` enforces plus the upgrade-graph rules this project adds (Rules lists both).
package fbc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The schemas of a File-Based Catalog this package reads and writes.
const (
	SchemaPackage = "olm.package"
	SchemaChannel = "olm.channel"
	SchemaBundle  = "olm.bundle"
)

// The bundle property types the renderer writes.
const (
	PropertyPackage     = "olm.package"
	PropertyGVK         = "olm.gvk"
	PropertyGVKRequired = "olm.gvk.required"
	PropertyCSVMetadata = "olm.csv.metadata"
)

// Package is an olm.package blob.
type Package struct {
	Schema         string `json:"schema"`
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel"`
	Description    string `json:"description,omitempty"`
	Icon           *Icon  `json:"icon,omitempty"`
}

// Icon is a package icon, base64 data as in the CSV.
type Icon struct {
	Data      string `json:"base64data"`
	MediaType string `json:"mediatype"`
}

// Channel is an olm.channel blob with its entries (the "legacy" strategy, the only one opm
// knows).
type Channel struct {
	Schema  string         `json:"schema"`
	Name    string         `json:"name"`
	Package string         `json:"package"`
	Entries []ChannelEntry `json:"entries"`
}

// ChannelEntry is one bundle in a channel with its upgrade edges.
type ChannelEntry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces,omitempty"`
	Skips     []string `json:"skips,omitempty"`
	SkipRange string   `json:"skipRange,omitempty"`
}

// Bundle is an olm.bundle blob.
type Bundle struct {
	Schema        string         `json:"schema"`
	Name          string         `json:"name"`
	Package       string         `json:"package"`
	Image         string         `json:"image"`
	Properties    []Property     `json:"properties,omitempty"`
	RelatedImages []RelatedImage `json:"relatedImages,omitempty"`
}

// Property is a typed bundle property; Value is any JSON.
type Property struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// RelatedImage is an image the bundle needs (for mirroring).
type RelatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// PackageProperty is the value of olm.package.
type PackageProperty struct {
	PackageName string `json:"packageName"`
	Version     string `json:"version"`
}

// GVKProperty is the value of olm.gvk and olm.gvk.required.
type GVKProperty struct {
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

// Catalog is every blob of a catalog directory.
type Catalog struct {
	Packages []Package
	Channels []Channel
	Bundles  []Bundle
}

// Load reads every .yaml, .yml and .json file under dir as opm does, one blob per YAML
// document. A blob without a schema, or with a schema other than the three above, is an error
// (opm would keep an unknown schema as an opaque blob; this catalog has none, so one is a typo),
// and every blob is decoded strictly, so a misspelt field is an error too.
func Load(dir string) (*Catalog, error) {
	c := &Catalog{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := c.add(raw); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
	return c, err
}

// Parse reads one catalog file's contents.
func Parse(raw []byte) (*Catalog, error) {
	c := &Catalog{}
	return c, c.add(raw)
}

func (c *Catalog) add(raw []byte) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "---" {
			continue
		}
		var head map[string]any
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return fmt.Errorf("[%s] document %d: %w", RuleSchema.ID, i, err)
		}
		if len(head) == 0 {
			continue
		}
		schema, _ := head["schema"].(string)
		var target any
		switch schema {
		case "":
			return fmt.Errorf("[%s] document %d has no schema", RuleSchema.ID, i)
		case SchemaPackage:
			c.Packages = append(c.Packages, Package{})
			target = &c.Packages[len(c.Packages)-1]
		case SchemaChannel:
			c.Channels = append(c.Channels, Channel{})
			target = &c.Channels[len(c.Channels)-1]
		case SchemaBundle:
			c.Bundles = append(c.Bundles, Bundle{})
			target = &c.Bundles[len(c.Bundles)-1]
		default:
			return fmt.Errorf("[%s] document %d has schema %q; this catalog holds only %s, %s and %s", RuleSchema.ID, i, schema, SchemaPackage, SchemaChannel, SchemaBundle)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			return fmt.Errorf("[%s] document %d (%s): %w", RuleSchema.ID, i, schema, err)
		}
	}
}

// Marshal writes the catalog as one YAML stream in a stable order: packages, channels by
// package and name, bundles by package and name; each document starts with ---.
func (c *Catalog) Marshal() ([]byte, error) {
	var docs []any
	pkgs := append([]Package(nil), c.Packages...)
	sort.SliceStable(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	for i := range pkgs {
		docs = append(docs, pkgs[i])
	}
	chs := append([]Channel(nil), c.Channels...)
	sort.SliceStable(chs, func(i, j int) bool {
		return chs[i].Package+"/"+chs[i].Name < chs[j].Package+"/"+chs[j].Name
	})
	for i := range chs {
		docs = append(docs, chs[i])
	}
	bs := append([]Bundle(nil), c.Bundles...)
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].Package+"/"+bs[i].Name < bs[j].Package+"/"+bs[j].Name })
	for i := range bs {
		docs = append(docs, bs[i])
	}
	var out bytes.Buffer
	for _, d := range docs {
		raw, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(raw)
	}
	return out.Bytes(), nil
}

// property returns the values of a bundle's properties of one type.
func (b Bundle) property(typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, p := range b.Properties {
		if p.Type == typ {
			out = append(out, p.Value)
		}
	}
	return out
}

// PackageVersion returns the bundle's one olm.package property.
func (b Bundle) PackageVersion() (PackageProperty, error) {
	values := b.property(PropertyPackage)
	if len(values) != 1 {
		return PackageProperty{}, fmt.Errorf("bundle %q must have exactly one %s property, found %d", b.Name, PropertyPackage, len(values))
	}
	var p PackageProperty
	if err := strictJSON(values[0], &p); err != nil {
		return p, fmt.Errorf("bundle %q: %s property: %w", b.Name, PropertyPackage, err)
	}
	return p, nil
}

func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// BundleName is the olm.bundle (and CSV) name of a version. opm accepts any name; the bundle
// generator names every CSV this way, and the validator holds the catalog to it.
func BundleName(pkg, version string) string { return pkg + ".v" + strings.TrimPrefix(version, "v") }
