// Package publish builds and pushes the release images of celld-operator without Docker, with
// go-containerregistry: the operator image (its static binary as a non-root user on an empty
// base with CA certificates, one image per platform in an OCI index), the bundle image of every
// version in the catalog and the catalog image. Between the operator image and the rest, it
// regenerates bundle/ so that the CSV names the operator image by the digest just pushed, and
// renders the catalog again from it.
package publish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

// Options are a release's inputs. The bundle options (channels, replaces, createdAt, scorecard
// image) are those of the committed bundle/, which `make bundle` wrote from the Makefile.
type Options struct {
	// Source is the Go module the operator is built from (the repository root).
	Source string
	// Root holds config/, bundle/, bundle.Dockerfile, olm/ and catalog/, which the release
	// reads and regenerates; normally Source too.
	Root string
	// Version is the release; bundle/ must be of this version.
	Version string
	// Image is the operator image, REGISTRY/PATH:VERSION.
	Image string
	// BundleRepo is the repository of the bundle images; each is BundleRepo:<version>.
	BundleRepo string
	// CatalogImage is the catalog image, REGISTRY/PATH:TAG.
	CatalogImage string
	// Platforms are the operator's platforms (linux/amd64, linux/arm64); the bundle and catalog
	// images, which hold only data, are made for the first.
	Platforms []Platform
	// OPMImage is an operator-framework opm image to build the catalog image on, so that it
	// also serves OLM v0's CatalogSource; empty: the catalog image holds only the catalog, which
	// is what OLM v1's ClusterCatalog reads.
	OPMImage string
	// Mirrors are images copied as they are before the release (the scorecard-test image the
	// bundle's scorecard configuration names), each FROM=TO.
	Mirrors []Mirror
	// Earlier are earlier releases whose operator image the catalog's bundles name but the
	// registry may not hold yet: each is built from its commit of Source's git history and
	// pushed as <Image's repository>:<version>.
	Earlier []Earlier
	// Remote are the registry options: authentication, transport, context.
	Remote []remote.Option
	// Log receives the progress; nil discards it.
	Log io.Writer
}

// Earlier is an earlier release and the commit it was built from.
type Earlier struct{ Version, Commit string }

// ParseEarlier reads VERSION=COMMIT.
func ParseEarlier(s string) (Earlier, error) {
	v, c, ok := strings.Cut(s, "=")
	if _, err := semver.Parse(v); !ok || err != nil || c == "" {
		return Earlier{}, fmt.Errorf("earlier release %q is not VERSION=COMMIT", s)
	}
	return Earlier{Version: v, Commit: c}, nil
}

// Mirror copies one image (or index) to another reference.
type Mirror struct{ From, To string }

// ParseMirror reads FROM=TO.
func ParseMirror(s string) (Mirror, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok || from == "" || to == "" {
		return Mirror{}, fmt.Errorf("mirror %q is not FROM=TO", s)
	}
	return Mirror{From: from, To: to}, nil
}

// Pushed is an image the release pushed: its reference and the digest the registry holds.
type Pushed struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// Pinned is the reference by digest, REPOSITORY@sha256:....
func (p Pushed) Pinned() string {
	repo := p.Ref
	if r, err := name.ParseReference(p.Ref); err == nil {
		repo = r.Context().Name()
	}
	return repo + "@" + p.Digest
}

// Result is what a release pushed.
type Result struct {
	Operator Pushed            `json:"operator"`
	Bundles  map[string]Pushed `json:"bundles"` // by version
	Catalog  Pushed            `json:"catalog"`
	Mirrored []Pushed          `json:"mirrored,omitempty"`
	Earlier  []Pushed          `json:"earlier,omitempty"`
}

func (o *Options) check() error {
	if o.Source == "" || o.Root == "" {
		return fmt.Errorf("the source module and the repository root are required")
	}
	if _, err := semver.Parse(o.Version); err != nil {
		return fmt.Errorf("--version %q is not a semantic version: %w", o.Version, err)
	}
	ref, err := gen.ParseImage(o.Image)
	if err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	if ref.Digest != "" || ref.Tag != o.Version {
		return fmt.Errorf("--image %s: tag the operator image with the release version %s (the release pins it by digest itself)", o.Image, o.Version)
	}
	if _, err := gen.ParseImage(o.BundleRepo + ":" + o.Version); err != nil {
		return fmt.Errorf("--bundle-repo: %w", err)
	}
	if ref, err := gen.ParseImage(o.CatalogImage); err != nil || ref.Digest != "" {
		return fmt.Errorf("--catalog-image %q must be REGISTRY/PATH:TAG (%v)", o.CatalogImage, err)
	}
	if len(o.Platforms) == 0 {
		return fmt.Errorf("no platform")
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "release: "+format+"\n", args...)
	}
}

// Run builds and pushes the release.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	opts := append([]remote.Option{remote.WithContext(ctx), remote.WithUserAgent("celld-operator-release")}, o.Remote...)
	bundleDir := filepath.Join(o.Root, "bundle")
	bo, err := gen.OptionsFromBundle(bundleDir, filepath.Join(o.Root, "config"))
	if err != nil {
		return nil, fmt.Errorf("read the release options from bundle/ (run make bundle first): %w", err)
	}
	if bo.Version != o.Version {
		return nil, fmt.Errorf("bundle/ is version %s, the release %s: run make bundle VERSION=%s first", bo.Version, o.Version, o.Version)
	}
	// Every timestamp of every image is the release date, so a release built twice from the
	// same sources gives the same digests.
	created, err := time.Parse(time.RFC3339, bo.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("bundle/ createdAt %q: %w", bo.CreatedAt, err)
	}
	res := &Result{Bundles: map[string]Pushed{}}

	for _, m := range o.Mirrors {
		p, err := mirror(m, opts)
		if err != nil {
			return nil, err
		}
		o.logf("mirrored %s to %s", m.From, p.Pinned())
		res.Mirrored = append(res.Mirrored, p)
	}

	// The operator images: the earlier releases', then this one's.
	tmp, err := os.MkdirTemp("", "celld-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	repo, _ := gen.ParseImage(o.Image)
	for _, e := range o.Earlier {
		src := filepath.Join(tmp, "earlier-"+e.Version)
		if err := checkout(ctx, o.Source, e.Commit, src); err != nil {
			return nil, err
		}
		earlier := map[Platform]v1.Image{}
		for _, p := range o.Platforms {
			bin := filepath.Join(tmp, "manager-"+e.Version+"-"+p.OS+"-"+p.Architecture)
			o.logf("building the operator %s (commit %s) for %s", e.Version, e.Commit, p)
			if err := BuildOperator(ctx, src, e.Version, p, bin); err != nil {
				return nil, err
			}
			if earlier[p], err = OperatorImage(bin, p, e.Version, created); err != nil {
				return nil, err
			}
		}
		pushed, err := pushIndex(repo.Repository+":"+e.Version, indexOf(earlier, o.Platforms), opts)
		if err != nil {
			return nil, err
		}
		o.logf("pushed %s (%s)", pushed.Ref, pushed.Digest)
		res.Earlier = append(res.Earlier, pushed)
	}
	images := map[Platform]v1.Image{}
	for _, p := range o.Platforms {
		bin := filepath.Join(tmp, "manager-"+p.OS+"-"+p.Architecture)
		o.logf("building the operator %s for %s", o.Version, p)
		if err := BuildOperator(ctx, o.Source, o.Version, p, bin); err != nil {
			return nil, err
		}
		if images[p], err = OperatorImage(bin, p, o.Version, created); err != nil {
			return nil, err
		}
	}
	if res.Operator, err = pushIndex(o.Image, indexOf(images, o.Platforms), opts); err != nil {
		return nil, err
	}
	o.logf("pushed %s (%s)", o.Image, res.Operator.Digest)

	// The bundle names the operator by that digest; the catalog follows.
	bo.Image, bo.ImageDigest = o.Image, res.Operator.Digest
	bo.ConfigDir, bo.ContextBundleDir = filepath.Join(o.Root, "config"), "bundle"
	b, err := gen.Render(bo)
	if err != nil {
		return nil, err
	}
	if err := b.Write(bundleDir, filepath.Join(o.Root, "bundle.Dockerfile")); err != nil {
		return nil, err
	}
	o.logf("regenerated bundle/: the CSV runs the operator %s", res.Operator.Pinned())
	if _, err := fbc.Make(fbc.MakeOptions{Root: o.Root, ReleaseBundle: "bundle", BundleRepo: o.BundleRepo, Out: fbc.DefaultOut, Log: o.Log}); err != nil {
		return nil, err
	}

	// A bundle image for every version of the catalog, so that every bundle it names exists.
	layout := filepath.Join(o.Root, fbc.DefaultBundleRoot)
	versions, err := fbc.ListBundleDirs(layout)
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		img, err := BundleImage(filepath.Join(layout, v), o.Platforms[0], created)
		if err != nil {
			return nil, err
		}
		ref := o.BundleRepo + ":" + v
		if res.Bundles[v], err = pushImage(ref, img, opts); err != nil {
			return nil, err
		}
		o.logf("pushed %s (%s)", ref, res.Bundles[v].Digest)
	}

	// The catalog image.
	catalogDir := filepath.Join(o.Root, filepath.Dir(fbc.DefaultOut))
	if o.OPMImage == "" {
		img, err := CatalogImage(catalogDir, nil, o.Platforms[0], created)
		if err != nil {
			return nil, err
		}
		if res.Catalog, err = pushImage(o.CatalogImage, img, opts); err != nil {
			return nil, err
		}
	} else {
		opm, err := name.ParseReference(o.OPMImage)
		if err != nil {
			return nil, fmt.Errorf("--opm-image: %w", err)
		}
		catalogs := map[Platform]v1.Image{}
		for _, p := range o.Platforms {
			base, err := remote.Image(opm, append(opts, remote.WithPlatform(v1.Platform{OS: p.OS, Architecture: p.Architecture}))...)
			if err != nil {
				return nil, fmt.Errorf("pull the opm image %s for %s: %w", o.OPMImage, p, err)
			}
			if catalogs[p], err = CatalogImage(catalogDir, base, p, created); err != nil {
				return nil, err
			}
		}
		if res.Catalog, err = pushIndex(o.CatalogImage, indexOf(catalogs, o.Platforms), opts); err != nil {
			return nil, err
		}
	}
	o.logf("pushed %s (%s)", o.CatalogImage, res.Catalog.Digest)
	return res, nil
}

// checkout writes the tree of a commit of the git repository at repo into dir.
func checkout(ctx context.Context, repo, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = repo
	raw, err := archive.Output()
	if err != nil {
		return fmt.Errorf("git archive %s: %w", commit, err)
	}
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	extract.Stdin = bytes.NewReader(raw)
	if msg, err := extract.CombinedOutput(); err != nil {
		return fmt.Errorf("extract %s: %w\n%s", commit, err, msg)
	}
	return nil
}

// BuildOperator builds the operator binary as make build does (static, -trimpath, the version
// linked in) for a platform.
func BuildOperator(ctx context.Context, source, version string, p Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the operator for %s: %w\n%s", p, err, msg)
	}
	return nil
}

func pushImage(ref string, img v1.Image, opts []remote.Option) (Pushed, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Pushed{}, err
	}
	if err := remote.Write(r, img, opts...); err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Pushed{}, err
	}
	return verify(r, d, opts)
}

func pushIndex(ref string, idx v1.ImageIndex, opts []remote.Option) (Pushed, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Pushed{}, err
	}
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return Pushed{}, err
	}
	return verify(r, d, opts)
}

// verify asks the registry what the tag now names: the digest the release computed, or an
// error (another push raced this one, or the registry rewrote the manifest).
func verify(r name.Reference, want v1.Hash, opts []remote.Option) (Pushed, error) {
	desc, err := remote.Head(r, opts...)
	if err != nil {
		return Pushed{}, fmt.Errorf("read back %s: %w", r, err)
	}
	if desc.Digest != want {
		return Pushed{}, fmt.Errorf("%s names %s after the push, not the pushed %s", r, desc.Digest, want)
	}
	return Pushed{Ref: r.String(), Digest: want.String()}, nil
}

func mirror(m Mirror, opts []remote.Option) (Pushed, error) {
	from, err := name.ParseReference(m.From)
	if err != nil {
		return Pushed{}, err
	}
	to, err := name.ParseReference(m.To)
	if err != nil {
		return Pushed{}, err
	}
	desc, err := remote.Get(from, opts...)
	if err != nil {
		return Pushed{}, fmt.Errorf("pull %s: %w", m.From, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return Pushed{}, err
		}
		return pushIndex(to.String(), idx, opts)
	}
	img, err := desc.Image()
	if err != nil {
		return Pushed{}, err
	}
	return pushImage(to.String(), img, opts)
}
