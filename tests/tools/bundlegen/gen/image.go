package gen

import (
	"fmt"
	"regexp"
	"strings"
)

// ImageRef is an image reference split into its parts: Repository is the registry host and
// path ("registry.example/celld/celld-operator"), Tag and Digest what follows it. It parses the
// subset of the distribution reference grammar the bundle uses, so that the generator needs no
// dependency beyond what go.mod already has.
type ImageRef struct {
	Repository, Tag, Digest string
}

var (
	sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	repoPath     = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	hostPart     = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$`)
	tagPart      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseImage splits REPOSITORY[:TAG][@sha256:DIGEST].
func ParseImage(s string) (ImageRef, error) {
	var r ImageRef
	rest := s
	if name, digest, ok := strings.Cut(rest, "@"); ok {
		if !sha256Digest.MatchString(digest) {
			return r, fmt.Errorf("image %q: digest %q is not sha256:<64 lower-case hex>", s, digest)
		}
		r.Digest, rest = digest, name
	}
	if i := strings.LastIndex(rest, ":"); i > strings.LastIndex(rest, "/") {
		r.Tag, rest = rest[i+1:], rest[:i]
		if !tagPart.MatchString(r.Tag) {
			return r, fmt.Errorf("image %q: %q is not a valid tag", s, r.Tag)
		}
	}
	r.Repository = rest
	host, path, ok := strings.Cut(rest, "/")
	switch {
	case rest == "":
		return r, fmt.Errorf("image %q has no repository", s)
	case !ok || !(strings.ContainsAny(host, ".:") || host == "localhost"):
		return r, fmt.Errorf("image %q is not fully qualified: name the registry host (REGISTRY/path/name)", s)
	case !hostPart.MatchString(host):
		return r, fmt.Errorf("image %q: %q is not a valid registry host", s, host)
	case !repoPath.MatchString(path):
		return r, fmt.Errorf("image %q: %q is not a valid repository path", s, path)
	case r.Tag == "" && r.Digest == "":
		return r, fmt.Errorf("image %q has neither a tag nor a digest", s)
	}
	return r, nil
}

// String reassembles the reference. With a digest the tag is dropped: a digest reference is
// what OpenShift's disconnected mirroring and relatedImages need, and a tag beside it would
// only suggest the tag matters.
func (r ImageRef) String() string {
	if r.Digest != "" {
		return r.Repository + "@" + r.Digest
	}
	return r.Repository + ":" + r.Tag
}

// ByDigest reports whether the reference pins the image by digest.
func (r ImageRef) ByDigest() bool { return r.Digest != "" }
