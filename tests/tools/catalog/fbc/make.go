package fbc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// Defaults of the repository's catalog layout.
const (
	DefaultTemplate   = "catalog/template.yaml"
	DefaultBundleRoot = "olm/celld-operator"
	DefaultOut        = "catalog/celld-operator/catalog.yaml"
)

// MakeOptions are the inputs of `make catalog` (and of the release, which runs the same steps
// after pinning the operator image).
type MakeOptions struct {
	// Root is the repository root; the paths below are relative to it unless absolute.
	Root string
	// Template is the olm.semver template.
	Template string
	// BundleRoot is the OperatorHub layout directory, <package>/ holding <version>/.
	BundleRoot string
	// ReleaseBundle is this release's bundle directory (bundle/), copied into the layout first;
	// empty to render the layout as it is.
	ReleaseBundle string
	// BundleRepo is the repository of the bundle images; empty: the template's.
	BundleRepo string
	// Out is the catalog file to write; empty to write nothing.
	Out string
	// Log receives one line per change made; nil discards them.
	Log io.Writer
}

func (o MakeOptions) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(o.Root, p)
}

// Make copies the release bundle into the OperatorHub layout, moves the earlier bundles'
// operator image to the release bundle's repository (only the repository changes, never the
// tag or digest), renders the catalog from the template, validates it and writes it.
func Make(o MakeOptions) (*Catalog, error) {
	if o.Template == "" {
		o.Template = DefaultTemplate
	}
	if o.BundleRoot == "" {
		o.BundleRoot = DefaultBundleRoot
	}
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	t, err := ReadTemplate(o.path(o.Template))
	if err != nil {
		return nil, err
	}
	if o.ReleaseBundle != "" {
		version, err := SyncRelease(o.Root, t, o.BundleRoot, o.path(o.ReleaseBundle))
		if err != nil {
			return nil, err
		}
		rel, err := ReadBundleDir(filepath.Join(o.path(o.BundleRoot), version))
		if err != nil {
			return nil, err
		}
		ref, err := gen.ParseImage(rel.CSV.Annotations["containerImage"])
		if err != nil {
			return nil, fmt.Errorf("the release bundle's containerImage: %w", err)
		}
		versions, err := ListBundleDirs(o.path(o.BundleRoot))
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			if v == version {
				continue
			}
			b, err := ReadBundleDir(filepath.Join(o.path(o.BundleRoot), v))
			if err != nil {
				return nil, err
			}
			moved, err := RepointOperatorImage(b.CSVFile, ref.Repository)
			if err != nil {
				return nil, err
			}
			if moved {
				fmt.Fprintf(log, "catalog: %s now runs the operator from %s\n", b.CSVFile, ref.Repository)
			}
		}
		fmt.Fprintf(log, "catalog: copied %s into %s/%s\n", o.ReleaseBundle, o.BundleRoot, version)
	}
	cat, err := Render(o.Root, t, o.BundleRoot, o.BundleRepo)
	if err != nil {
		return nil, err
	}
	if errs := Validate(cat); len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("the rendered catalog is invalid (%d problems):\n  %s", len(errs), strings.Join(msgs, "\n  "))
	}
	if o.Out == "" {
		return cat, nil
	}
	raw, err := cat.Marshal()
	if err != nil {
		return nil, err
	}
	out := o.path(o.Out)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "catalog: wrote %s (%d channels, %d bundles)\n", o.Out, len(cat.Channels), len(cat.Bundles))
	return cat, nil
}
