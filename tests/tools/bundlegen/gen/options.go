package gen

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/blang/semver/v4"
)

// PackageName is the OLM package of the operator.
const PackageName = "celld-operator"

// scorecardImagePlaceholder is the image name config/scorecard uses for the scorecard-test
// image; the generator replaces it with Options.ScorecardImage.
const scorecardImagePlaceholder = "scorecard-test"

// DefaultScorecardImage is the operator-sdk scorecard-test image as the project mirrors it
// under its registry (make images --mirror); set --scorecard-image (Makefile SCORECARD_IMAGE)
// for another registry or operator-sdk version.
const DefaultScorecardImage = "ghcr.io/celld/scorecard-test:" + OperatorSDKVersion

// Options are everything a release decides; config/ decides the rest.
type Options struct {
	// ConfigDir is the kustomize root, normally "config".
	ConfigDir string
	// Version is the bundle's semantic version, without a leading v.
	Version string
	// Channels are the bundle's channels; DefaultChannel must be one of them.
	Channels       []string
	DefaultChannel string
	// Image is the operator image, fully qualified (REGISTRY/PATH:TAG or
	// REGISTRY/PATH@sha256:DIGEST). Validate rewrites it to the digest form when ImageDigest is
	// set.
	Image string
	// ImageDigest pins Image by digest (sha256:<hex>); optional. A pinned image makes the CSV
	// reference it by digest everywhere and declare the disconnected feature.
	ImageDigest string
	// CreatedAt is the CSV's createdAt annotation, RFC 3339 (the release date, so that
	// regenerating the bundle gives the same bytes).
	CreatedAt string
	// Replaces is the version this bundle replaces (empty for the first release).
	Replaces string
	// MinSkipVersion is the lower bound of olm.skipRange ('>=MIN <VERSION').
	MinSkipVersion string
	// ScorecardImage is the operator-sdk scorecard-test image.
	ScorecardImage string
	// ContextBundleDir is the bundle directory as bundle.Dockerfile's COPY lines see it from
	// the build context (the repository root), normally "bundle".
	ContextBundleDir string
	// ProjectLayout is the operator-sdk layout of the PROJECT file beside ConfigDir; Render
	// reads it.
	ProjectLayout string
}

var channelName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Validate refuses options that would produce an invalid or misleading bundle.
func (o *Options) Validate() error {
	o.Version = strings.TrimPrefix(o.Version, "v")
	v, err := semver.Parse(o.Version)
	if err != nil {
		return fmt.Errorf("--version %q is not a semantic version: %w", o.Version, err)
	}
	if o.Image == "" {
		return fmt.Errorf("--image is required (REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST)")
	}
	ref, err := ParseImage(o.Image)
	if err != nil {
		return fmt.Errorf("--image: %w", err)
	}
	if o.ImageDigest != "" {
		if !sha256Digest.MatchString(o.ImageDigest) {
			return fmt.Errorf("--image-digest %q is not sha256:<64 lower-case hex>", o.ImageDigest)
		}
		if ref.Digest != "" && ref.Digest != o.ImageDigest {
			return fmt.Errorf("--image %s carries a digest other than --image-digest %s", o.Image, o.ImageDigest)
		}
		ref.Digest = o.ImageDigest
	}
	o.Image, o.ImageDigest = ref.String(), ""
	if o.CreatedAt == "" {
		return fmt.Errorf("--created-at is required: the release date in RFC 3339, e.g. 2026-12-01T00:00:00Z (not the wall clock, so regenerating gives the same bundle)")
	}
	created, err := time.Parse(time.RFC3339, o.CreatedAt)
	if err != nil {
		return fmt.Errorf("--created-at %q is not RFC 3339 (2026-12-01T00:00:00Z): %w", o.CreatedAt, err)
	}
	o.CreatedAt = created.UTC().Format(time.RFC3339)
	if len(o.Channels) == 0 {
		return fmt.Errorf("--channels needs at least one channel")
	}
	found := false
	for _, c := range o.Channels {
		if !channelName.MatchString(c) {
			return fmt.Errorf("channel %q is not a valid channel name", c)
		}
		found = found || c == o.DefaultChannel
	}
	if o.DefaultChannel != "" && !found {
		return fmt.Errorf("--default-channel %q is not among --channels %v", o.DefaultChannel, o.Channels)
	}
	if o.Replaces != "" {
		o.Replaces = strings.TrimPrefix(strings.TrimPrefix(o.Replaces, PackageName+".v"), "v")
		r, err := semver.Parse(o.Replaces)
		if err != nil {
			return fmt.Errorf("--replaces %q is not a semantic version: %w", o.Replaces, err)
		}
		if !r.LT(v) {
			return fmt.Errorf("--replaces %s must be older than --version %s", r, v)
		}
	}
	if o.MinSkipVersion == "" {
		o.MinSkipVersion = "0.0.0"
	}
	m, err := semver.Parse(strings.TrimPrefix(o.MinSkipVersion, "v"))
	if err != nil {
		return fmt.Errorf("--min-skip-version %q is not a semantic version: %w", o.MinSkipVersion, err)
	}
	if !m.LT(v) {
		return fmt.Errorf("--min-skip-version %s must be older than --version %s", m, v)
	}
	o.MinSkipVersion = m.String()
	if o.ScorecardImage == "" {
		o.ScorecardImage = DefaultScorecardImage
	}
	if o.ContextBundleDir == "" {
		o.ContextBundleDir = "bundle"
	}
	if o.ConfigDir == "" {
		o.ConfigDir = "config"
	}
	return nil
}

// Disconnected reports whether the operator image is pinned by digest, the condition for
// declaring features.operators.openshift.io/disconnected: every image the bundle runs must be
// mirrorable by digest. Call it after Validate.
func (o Options) Disconnected() bool {
	ref, err := ParseImage(o.Image)
	return err == nil && ref.ByDigest()
}

// CSVName is the ClusterServiceVersion name of a version.
func CSVName(version string) string { return PackageName + ".v" + version }

// SkipRange is the olm.skipRange annotation: one hop from any older version.
func (o Options) SkipRange() string { return ">=" + o.MinSkipVersion + " <" + o.Version }

// Annotation is one bundle annotation, also a bundle.Dockerfile LABEL.
type Annotation struct{ Key, Value string }

// Annotations is the one table behind metadata/annotations.yaml and the bundle.Dockerfile
// labels, which OLM requires to be identical. openShiftVersions is the
// com.redhat.openshift.versions value (empty to omit), which Render derives from the CSV's
// minKubeVersion.
func (o Options) Annotations(openShiftVersions string) []Annotation {
	a := []Annotation{
		{"operators.operatorframework.io.bundle.mediatype.v1", "registry+v1"},
		{"operators.operatorframework.io.bundle.manifests.v1", "manifests/"},
		{"operators.operatorframework.io.bundle.metadata.v1", "metadata/"},
		{"operators.operatorframework.io.bundle.package.v1", PackageName},
		{"operators.operatorframework.io.bundle.channels.v1", strings.Join(o.Channels, ",")},
	}
	if o.DefaultChannel != "" {
		a = append(a, Annotation{"operators.operatorframework.io.bundle.channel.default.v1", o.DefaultChannel})
	}
	if o.ProjectLayout != "" {
		a = append(a,
			Annotation{MetricsBuilder, Builder},
			Annotation{MetricsMediaType, "metrics+v1"},
			Annotation{MetricsProjectLayout, o.ProjectLayout},
		)
	}
	a = append(a,
		Annotation{"operators.operatorframework.io.test.mediatype.v1", "scorecard+v1"},
		Annotation{"operators.operatorframework.io.test.config.v1", "tests/scorecard/"},
	)
	if openShiftVersions != "" {
		a = append(a, Annotation{OpenShiftVersionsKey, openShiftVersions})
	}
	return a
}
