package operatorupgrade

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celld/celld-operator/tests/localcluster"
)

// The previous release. Tags are not pushed anywhere, so a clone may lack v0.1.0: the harness
// then builds the commit the tag names (the one olm/celld-operator/0.1.0 was generated from,
// see docs/install.md) and says so. A tag that names another commit is refused, since the
// bundle in olm/ would then describe a different binary.
const (
	previousTag     = "v0.1.0"
	previousCommit  = "af573ed655b80abd0e74d9434c327a6ce7cae2cf"
	previousVersion = "0.1.0"
)

// release is an operator binary and the CRDs it shipped with.
type release struct {
	Version string
	Commit  string
	Binary  string
	CRDs    string // directory of the release's own CRD files (config/crd/bases)
}

// previousRelease returns release 0.1.0, built once per user and commit into
// $CELLD_RELEASES_CACHE (default ~/.cache/celld-operator/releases/<commit>): the binary as
// `make build` built it then, and that tree's config/crd/bases.
func previousRelease(t *testing.T) release {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	commit, how := resolvePrevious(t, root)
	t.Logf("previous release %s: commit %s (%s)", previousVersion, commit, how)
	cache := os.Getenv("CELLD_RELEASES_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(base, "celld-operator", "releases")
	}
	dir := filepath.Join(cache, commit)
	rel := release{Version: previousVersion, Commit: commit, Binary: filepath.Join(dir, "manager"), CRDs: filepath.Join(dir, "crds")}
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		t.Logf("previous release: cached in %s", dir)
		return rel
	}
	if err := buildRelease(root, commit, dir); err != nil {
		t.Fatalf("build release %s at %s: %v", previousVersion, commit, err)
	}
	return rel
}

// resolvePrevious finds the commit of v0.1.0: the tag when the clone has it, else the pinned
// hash (which must be in the clone's history).
func resolvePrevious(t *testing.T, root string) (commit, how string) {
	t.Helper()
	out, err := git(root, "rev-parse", "--verify", "--quiet", previousTag+"^{commit}")
	if err == nil {
		commit = strings.TrimSpace(out)
		if commit != previousCommit {
			t.Fatalf("tag %s names %s, but release %s (olm/celld-operator/%s) was built from %s; fix the tag",
				previousTag, commit, previousVersion, previousVersion, previousCommit)
		}
		return commit, "tag " + previousTag
	}
	if _, err := git(root, "cat-file", "-e", previousCommit+"^{commit}"); err != nil {
		t.Fatalf("neither tag %s nor commit %s is in this clone (fetch main's full history): %v", previousTag, previousCommit, err)
	}
	return previousCommit, "no tag " + previousTag + " in this clone: built from the pinned commit"
}

// buildRelease extracts the commit's tree with git archive, builds it as `make build` does
// and copies its CRDs; the cache entry appears only once complete.
func buildRelease(root, commit, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = root
	tar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, tar.Stderr = &stderr, &stderr
	if err := tar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive: %w: %s", err, stderr.String())
	}
	if err := tar.Wait(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, stderr.String())
	}
	out := filepath.Join(tmp, "out")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+previousVersion, "-o", filepath.Join(out, "manager"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	if err := os.CopyFS(filepath.Join(out, "crds"), os.DirFS(filepath.Join(src, "config", "crd", "bases"))); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "complete"), []byte(commit+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(out, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "complete")); statErr == nil {
			return nil // another run built it meanwhile
		}
		return err
	}
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return string(out), err
}

// currentRelease is this release: $CELLD_UPGRADE_OPERATOR_BINARY (make test-operator-upgrade
// passes bin/manager, just built) and the repository's config/crd/bases ($CELLD_UPGRADE_CRDS
// overrides it, for a binary built from another tree).
func currentRelease(t *testing.T) release {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("CELLD_UPGRADE_OPERATOR_BINARY")
	if bin == "" {
		bin = filepath.Join(root, "bin", "manager")
		t.Logf("CELLD_UPGRADE_OPERATOR_BINARY is not set: using %s (make test-operator-upgrade builds it first)", bin)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("this release's operator binary: %v (run make build)", err)
	}
	crds := os.Getenv("CELLD_UPGRADE_CRDS")
	if crds == "" {
		crds = filepath.Join(root, "config", "crd", "bases")
	}
	return release{Version: "current", Binary: bin, CRDs: crds}
}

// A clone without the tag (tags are not pushed) resolves the pinned commit, and the tag once
// it is there.
func TestPreviousReleaseResolution(t *testing.T) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", "--no-tags", "--shared", "--no-checkout", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if _, err := git(clone, "rev-parse", "--verify", "--quiet", previousTag); err == nil {
		t.Fatalf("the clone has tag %s; the test needs a clone without it", previousTag)
	}
	commit, how := resolvePrevious(t, clone)
	if commit != previousCommit || !strings.Contains(how, "pinned commit") {
		t.Fatalf("without the tag: %s (%s), want the pinned commit %s", commit, how, previousCommit)
	}
	if out, err := exec.Command("git", "-C", clone, "tag", "-a", previousTag, "-m", "release", previousCommit).CombinedOutput(); err != nil {
		t.Fatalf("tag: %v\n%s", err, out)
	}
	if commit, how = resolvePrevious(t, clone); commit != previousCommit || how != "tag "+previousTag {
		t.Fatalf("with the tag: %s (%s)", commit, how)
	}
}
