// Command catalog writes the File-Based Catalog of celld-operator (make catalog) without opm:
//
//	go run ./tests/tools/catalog render --template catalog/template.yaml \
//	    --bundle-root olm/celld-operator --release-bundle bundle \
//	    --bundle-repo REGISTRY/celld-operator-bundle --out catalog/celld-operator/catalog.yaml
//
// render copies the release bundle (bundle/) into the OperatorHub layout
// (olm/celld-operator/<version>/manifests|metadata|tests), moves the operator image of the
// earlier bundles there to the release bundle's repository, renders the olm.package,
// olm.channel and olm.bundle blobs opm's olm.semver template gives (reading each bundle from
// the layout instead of pulling its image), checks them as `opm validate` would (and the graph
// rules of tests/tools/catalog/fbc) and writes the catalog.
//
//	go run ./tests/tools/catalog dockerfile --bundle olm/celld-operator/0.1.0
//
// prints a Dockerfile that builds that directory as a bundle image (make catalog-bundles-build).
package main

import (
	"flag"
	"fmt"
	"os"

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
	var o fbc.MakeOptions
	fs.StringVar(&o.Template, "template", fbc.DefaultTemplate, "olm.semver catalog template")
	fs.StringVar(&o.Root, "root", ".", "repository root the other paths are relative to")
	fs.StringVar(&o.BundleRoot, "bundle-root", fbc.DefaultBundleRoot, "OperatorHub layout directory holding <version>/manifests, metadata and tests")
	fs.StringVar(&o.ReleaseBundle, "release-bundle", "", "bundle directory of this release (make bundle's output) to copy into the OperatorHub layout first; empty to skip")
	fs.StringVar(&o.BundleRepo, "bundle-repo", "", "repository of the bundle images, fully qualified; each bundle is <repo>:<version> (empty: the template's)")
	fs.StringVar(&o.Out, "out", fbc.DefaultOut, "catalog file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	o.Log = os.Stdout
	_, err := fbc.Make(o)
	return err
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
