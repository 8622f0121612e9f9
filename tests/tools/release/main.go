// Command release publishes celld-operator without Docker (make images, make release):
//
//	go run ./tests/tools/release images --version 0.2.0 \
//	    --image REGISTRY/celld-operator:0.2.0 --bundle-repo REGISTRY/celld-operator-bundle \
//	    --catalog-image REGISTRY/celld-operator-catalog:0.2.0 --platforms linux/amd64,linux/arm64 \
//	    [--opm-image OPM] [--mirror FROM=TO]... [--earlier VERSION=COMMIT]... [--report release.json]
//
// images builds the operator binary for each platform, pushes the operator image (an OCI
// index), regenerates bundle/ so that the CSV names it by the pushed digest, copies bundle/
// into olm/ and renders the catalog again (make catalog), then pushes the bundle image of every
// version in the catalog and the catalog image. Credentials come from the Docker config
// (~/.docker/config.json, or DOCKER_CONFIG), as for crane and ko.
//
//	go run ./tests/tools/release version --version 0.2.0
//
// writes the version into the install chart (version, appVersion) and the kustomize image tag
// (make version; make bundle runs it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/celld/celld-operator/tests/tools/release/publish"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release images|version [flags]")
	}
	switch args[0] {
	case "images":
		return images(args[1:])
	case "version":
		return version(args[1:])
	default:
		return fmt.Errorf("unknown command %q (images, version)", args[0])
	}
}

type earlier []publish.Earlier

func (e *earlier) String() string { return fmt.Sprint(*e) }
func (e *earlier) Set(s string) error {
	v, err := publish.ParseEarlier(s)
	if err == nil {
		*e = append(*e, v)
	}
	return err
}

type mirrors []publish.Mirror

func (m *mirrors) String() string { return fmt.Sprint(*m) }
func (m *mirrors) Set(s string) error {
	v, err := publish.ParseMirror(s)
	if err == nil {
		*m = append(*m, v)
	}
	return err
}

func images(args []string) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	var o publish.Options
	var platforms, report string
	var ms mirrors
	var es earlier
	fs.StringVar(&o.Source, "source", ".", "Go module the operator is built from")
	fs.StringVar(&o.Root, "root", ".", "repository root holding config/, bundle/, olm/ and catalog/ (regenerated)")
	fs.StringVar(&o.Version, "version", "", "release version (required; bundle/ must be of it)")
	fs.StringVar(&o.Image, "image", "", "operator image, REGISTRY/PATH:VERSION (required)")
	fs.StringVar(&o.BundleRepo, "bundle-repo", "", "bundle image repository; each bundle is REPO:<version> (required)")
	fs.StringVar(&o.CatalogImage, "catalog-image", "", "catalog image, REGISTRY/PATH:TAG (required)")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "operator platforms, comma-separated OS/ARCH")
	fs.StringVar(&o.OPMImage, "opm-image", "", "opm image to build the catalog image on (serves OLM v0's CatalogSource); empty: the catalog only, for OLM v1")
	fs.Var(&ms, "mirror", "FROM=TO: copy an image before the release (repeatable), e.g. the scorecard-test image")
	fs.Var(&es, "earlier", "VERSION=COMMIT: build and push an earlier release's operator image from its commit (repeatable), for a registry that lacks it")
	fs.StringVar(&report, "report", "", "write what was pushed, with digests, to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	var err error
	if o.Platforms, err = publish.ParsePlatforms(platforms); err != nil {
		return err
	}
	o.Mirrors, o.Earlier = ms, es
	o.Remote = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	o.Log = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := publish.Run(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("release: %s\n", strings.Join([]string{
		"operator " + res.Operator.Pinned(),
		"catalog " + res.Catalog.Pinned(),
	}, ", "))
	if report != "" {
		raw, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(report), 0o755); err != nil {
			return err
		}
		return os.WriteFile(report, append(raw, '\n'), 0o644)
	}
	return nil
}

func version(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	root := fs.String("root", ".", "repository root")
	v := fs.String("version", "", "release version (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	changed, err := publish.SetVersion(*root, *v)
	if err != nil {
		return err
	}
	for _, c := range changed {
		fmt.Printf("release: %s now states version %s\n", c, *v)
	}
	return nil
}
