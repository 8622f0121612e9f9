// Command catalog writes the File-Based Catalog of celld-operator (make catalog) without opm:
//
//	go run ./tests/tools/catalog render --template catalog/template.yaml \
//	    --release-bundle bundle --bundle-repo REGISTRY/celld/celld-operator-bundle \
//	    --out catalog/celld-operator/catalog.yaml
//
// render copies the release bundle (bundle/) into the OperatorHub layout the template names
// (olm/celld-operator/<version>/manifests|metadata), moves the operator image of the earlier
// bundles there to the release bundle's repository, renders olm.package, olm.channel and
// olm.bundle blobs from the template, checks them as `opm validate` would (and the graph rules
// of tests/tools/catalog/fbc) and writes the catalog.
//
//	go run ./tests/tools/catalog dockerfile --bundle olm/celld-operator/0.1.0
//
// prints a Dockerfile that builds that directory as a bundle image (make catalog-bundles-build).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: catalog render|dockerfile [flags]")
	}
	switch args[0] {
	case "render":
		return render(args[1:])
	case "dockerfile":
		return dockerfile(args[1:])
	default:
		return fmt.Errorf("unknown command %q (render, dockerfile)", args[0])
	}
}

func render(args []string) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	template := fs.String("template", "catalog/template.yaml", "semver-style catalog template")
	root := fs.String("root", ".", "repository root the template's bundleRoot is relative to")
	release := fs.String("release-bundle", "", "bundle directory of this release (make bundle's output) to copy into the OperatorHub layout first; empty to skip")
	bundleRepo := fs.String("bundle-repo", "", "repository of the bundle images, fully qualified; each bundle is <repo>:<version> (required)")
	out := fs.String("out", "catalog/celld-operator/catalog.yaml", "catalog file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	t, err := fbc.ReadTemplate(*template)
	if err != nil {
		return err
	}
	if *release != "" {
		version, err := fbc.SyncRelease(*root, t, *release)
		if err != nil {
			return err
		}
		rel, err := fbc.ReadBundleDir(filepath.Join(*root, t.BundleRoot, version))
		if err != nil {
			return err
		}
		operator := rel.CSV.Annotations["containerImage"]
		repo, err := repository(operator)
		if err != nil {
			return err
		}
		versions, err := fbc.ListBundleDirs(filepath.Join(*root, t.BundleRoot))
		if err != nil {
			return err
		}
		for _, v := range versions {
			if v == version {
				continue
			}
			b, err := fbc.ReadBundleDir(filepath.Join(*root, t.BundleRoot, v))
			if err != nil {
				return err
			}
			moved, err := fbc.RepointOperatorImage(b.CSVFile, repo)
			if err != nil {
				return err
			}
			if moved {
				fmt.Printf("catalog: %s now runs the operator from %s\n", b.CSVFile, repo)
			}
		}
		fmt.Printf("catalog: copied %s into %s/%s\n", *release, t.BundleRoot, version)
	}
	cat, err := fbc.Render(*root, t, *bundleRepo)
	if err != nil {
		return err
	}
	if errs := fbc.Validate(cat); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "catalog: invalid:", e)
		}
		return fmt.Errorf("the rendered catalog is invalid (%d problems)", len(errs))
	}
	raw, err := cat.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*out, raw, 0o644); err != nil {
		return err
	}
	fmt.Printf("catalog: wrote %s (%d channels, %d bundles)\n", *out, len(cat.Channels), len(cat.Bundles))
	return nil
}

func repository(image string) (string, error) {
	ref, err := gen.ParseImage(image)
	if err != nil {
		return "", fmt.Errorf("the release bundle's containerImage: %w", err)
	}
	return ref.Repository, nil
}

func dockerfile(args []string) error {
	fs := flag.NewFlagSet("dockerfile", flag.ContinueOnError)
	dir := fs.String("bundle", "", "bundle directory (<package>/<version>) used as the build context")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: catalog dockerfile --bundle DIR")
	}
	raw, err := fbc.BundleDockerfile(*dir)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(raw)
	return err
}
