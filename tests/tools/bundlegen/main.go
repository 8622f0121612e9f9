// Command bundlegen writes the OLM registry+v1 bundle of celld-operator from config/:
//
//	go run ./tests/tools/bundlegen --version 0.2.0 --replaces 0.1.0 --channels candidate-v0,stable-v0 \
//	    --default-channel stable-v0 --image REGISTRY/PATH:TAG [--image-digest sha256:...] \
//	    --created-at 2026-12-01T00:00:00Z --out bundle
//
// It writes OUT/manifests (CSV, CRDs, metrics Service), OUT/metadata/annotations.yaml,
// OUT/tests/scorecard/config.yaml and the bundle.Dockerfile, replacing what was there. The
// annotations and the Dockerfile labels come from one table. It needs neither operator-sdk
// nor kustomize; tests/bundle validates the result and checks it is up to date.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bundlegen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bundlegen", flag.ContinueOnError)
	var o gen.Options
	var channels, out, dockerfile string
	fs.StringVar(&o.ConfigDir, "config", "config", "kustomize root holding manifests/, rbac/, manager/, crd/, samples/ and scorecard/")
	fs.StringVar(&o.Version, "version", "", "bundle version (semver, required)")
	fs.StringVar(&channels, "channels", "candidate-v0,stable-v0", "comma-separated channels (those catalog/template.yaml, opm's olm.semver, gives the version)")
	fs.StringVar(&o.DefaultChannel, "default-channel", "stable-v0", "default channel, one of --channels (empty to omit)")
	fs.StringVar(&o.Image, "image", "", "operator image, fully qualified: REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST (required)")
	fs.StringVar(&o.ImageDigest, "image-digest", "", "sha256:DIGEST pinning --image; the CSV then names the image by digest and declares the disconnected feature")
	fs.StringVar(&o.CreatedAt, "created-at", "", "the CSV's createdAt, RFC 3339: the release date, not the wall clock (required)")
	fs.StringVar(&o.Replaces, "replaces", "", "version this bundle replaces in the upgrade graph (empty for none)")
	fs.StringVar(&o.MinSkipVersion, "min-skip-version", "0.0.0", "lower bound of olm.skipRange '>=MIN <VERSION'")
	fs.StringVar(&o.ScorecardImage, "scorecard-image", gen.DefaultScorecardImage, "operator-sdk scorecard-test image for tests/scorecard/config.yaml")
	fs.StringVar(&out, "out", "bundle", "bundle directory to (re)write")
	fs.StringVar(&dockerfile, "dockerfile", "bundle.Dockerfile", "path of the bundle Dockerfile to write")
	fs.StringVar(&o.ContextBundleDir, "dockerfile-bundle-dir", "", "the bundle directory as the Dockerfile's COPY lines see it (default: --out)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	for _, c := range strings.Split(channels, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.Channels = append(o.Channels, c)
		}
	}
	if o.ContextBundleDir == "" {
		o.ContextBundleDir = out
	}
	b, err := gen.Render(o)
	if err != nil {
		return err
	}
	if err := b.Write(out, dockerfile); err != nil {
		return err
	}
	fmt.Printf("bundlegen: wrote %d files to %s and %s\n", len(b.Files), out, dockerfile)
	return nil
}
