package publish

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

// repoRoot is the repository root (go.mod beside watches.yaml) above the test directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "watches.yaml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no repository root above the test directory")
		}
		dir = parent
	}
}

// startRegistry serves an in-process OCI registry on 127.0.0.1 (plain HTTP, which
// go-containerregistry uses for loopback hosts) and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// files flattens an image's layers into path -> content (directories map to nil) and modes.
func files(t *testing.T, img v1.Image) (map[string][]byte, map[string]int64) {
	t.Helper()
	content, modes := map[string][]byte{}, map[string]int64{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")
		modes[p] = h.Mode
		if h.Typeflag == tar.TypeDir {
			content[p] = nil
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		content[p] = body
	}
	return content, modes
}

// dirFiles reads the regular files under dir as image paths below prefix.
func dirFiles(t *testing.T, dir, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		body, err := os.ReadFile(p)
		out[prefix+"/"+filepath.ToSlash(rel)] = body
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// regularFiles drops the directories of an image's file map.
func regularFiles(m map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

func sameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[p]; !ok {
			t.Errorf("%s lacks %s", what, p)
		} else if !bytes.Equal(g, want[p]) {
			t.Errorf("%s: %s differs from the repository's", what, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			t.Errorf("%s holds %s, which it should not", what, p)
		}
	}
}

func copyDirs(t *testing.T, from, to string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		src := filepath.Join(from, p)
		info, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			if err := os.CopyFS(filepath.Join(to, p), os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, p), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleaseIntoAnInProcessRegistry runs the whole release (make release's images step) into
// an in-process registry, on a copy of the repository's generated files, then pulls every image
// back: the operator image by the digest the regenerated CSV names (its user, entrypoint, CA
// certificates, and a binary that reports the release version), the bundle image of every
// version in the catalog (labels equal to annotations.yaml, files equal to the bundle
// directory) and the catalog image (the configs label, /configs equal to the catalog, every
// bundle it names pullable by the digest pushed).
func TestReleaseIntoAnInProcessRegistry(t *testing.T) {
	source := repoRoot(t)
	root := t.TempDir()
	copyDirs(t, source, root, "PROJECT", "config", "bundle", "bundle.Dockerfile", "olm", "catalog")
	committed, err := gen.OptionsFromBundle(filepath.Join(source, "bundle"), filepath.Join(source, "config"))
	if err != nil {
		t.Fatal(err)
	}
	version := committed.Version
	host := startRegistry(t)
	reg := host + "/celld"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The scorecard-test image, as published upstream; the release mirrors it where the
	// bundle's scorecard configuration will look for it.
	upstream, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustRef(t, host+"/upstream/scorecard-test:v1.42.3"), upstream); err != nil {
		t.Fatal(err)
	}
	platform := Platform{OS: "linux", Architecture: runtime.GOARCH}
	o := Options{
		Source: source, Root: root, Version: version,
		Image:        reg + "/celld-operator:" + version,
		BundleRepo:   reg + "/celld-operator-bundle",
		CatalogImage: reg + "/celld-operator-catalog:" + version,
		Platforms:    []Platform{platform},
		Mirrors:      []Mirror{{From: host + "/upstream/scorecard-test:v1.42.3", To: reg + "/scorecard-test:v1.42.3"}},
		Log:          testLog{t},
	}
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the operator image is what the regenerated bundle names by digest", func(t *testing.T) {
		checkOperatorImage(t, root, reg, version, platform, res)
	})
	t.Run("every bundle of the catalog is pushed with its annotations as labels", func(t *testing.T) {
		checkBundleImages(t, root, reg, version, res, platform)
	})
	t.Run("the catalog image holds the catalog under /configs and names pullable bundles", func(t *testing.T) {
		checkCatalogImage(t, root, reg, version, res)
	})
	t.Run("the scorecard-test image is mirrored", func(t *testing.T) {
		want, _ := upstream.Digest()
		if len(res.Mirrored) != 1 || res.Mirrored[0].Digest != want.String() {
			t.Fatalf("mirrored %v, want the upstream image %s", res.Mirrored, want)
		}
		if _, err := remote.Head(mustRef(t, reg+"/scorecard-test:v1.42.3")); err != nil {
			t.Error(err)
		}
	})
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkOperatorImage(t *testing.T, root, reg, version string, platform Platform, res *Result) {
	pinned := reg + "/celld-operator@" + res.Operator.Digest
	csvs, err := gen.ReadObjects(filepath.Join(root, "bundle", "manifests", gen.PackageName+".clusterserviceversion.yaml"))
	if err != nil || len(csvs) != 1 {
		t.Fatalf("read the regenerated CSV: %v", err)
	}
	csv := csvs[0]
	if got := csv.GetAnnotations()["containerImage"]; got != pinned {
		t.Errorf("the CSV's containerImage is %s, want the pushed %s", got, pinned)
	}
	if got := csv.GetAnnotations()[gen.DisconnectedFeature]; got != "true" {
		t.Errorf("%s = %q; an operator pinned by digest is mirrorable", gen.DisconnectedFeature, got)
	}
	related, _, _ := unstructured.NestedSlice(csv.Object, "spec", "relatedImages")
	if len(related) != 1 || related[0].(map[string]any)["image"] != pinned {
		t.Errorf("relatedImages %v, want exactly the operator %s", related, pinned)
	}
	deployments, _, _ := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	for _, d := range deployments {
		containers, _, _ := unstructured.NestedSlice(d.(map[string]any), "spec", "template", "spec", "containers")
		for _, c := range containers {
			if img := c.(map[string]any)["image"]; img != pinned {
				t.Errorf("container %v runs %v, want %s", c.(map[string]any)["name"], img, pinned)
			}
		}
	}

	byTag, err := remote.Index(mustRef(t, reg+"/celld-operator:"+version))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := byTag.Digest(); d.String() != res.Operator.Digest {
		t.Errorf("the tag names %s, the release reported %s", d, res.Operator.Digest)
	}
	idx, err := remote.Index(mustRef(t, pinned))
	if err != nil {
		t.Fatalf("pull the operator by the CSV's digest: %v", err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("the operator index is %s, want %s", mt, types.OCIImageIndex)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.OS != platform.OS || im.Manifests[0].Platform.Architecture != platform.Architecture {
		t.Fatalf("index manifests %+v, want one for %s", im.Manifests, platform)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != NonRootUser {
		t.Errorf("user %q, want %q (non-root)", cf.Config.User, NonRootUser)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{OperatorBinary}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %v cmd %v, want [%s] and no cmd", cf.Config.Entrypoint, cf.Config.Cmd, OperatorBinary)
	}
	if cf.OS != platform.OS || cf.Architecture != platform.Architecture {
		t.Errorf("config platform %s/%s, want %s", cf.OS, cf.Architecture, platform)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != version || cf.Config.Labels["org.opencontainers.image.source"] != SourceURL {
		t.Errorf("labels %v lack the version and source", cf.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
		}
	}

	fsys, modes := files(t, img)
	want := map[string]bool{"/manager": true, "/etc/passwd": true, "/etc/group": true, "/etc/nsswitch.conf": true, CACertificatesPath: true}
	for p, body := range fsys {
		if body != nil && !want[p] {
			t.Errorf("the operator image holds %s; it should hold only the binary and the base files", p)
		}
	}
	if modes["/manager"]&0o111 == 0 {
		t.Errorf("/manager mode %o is not executable", modes["/manager"])
	}
	if modes["/tmp"]&0o1777 != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", modes["/tmp"])
	}
	if !strings.Contains(string(fsys["/etc/passwd"]), ":65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532:\n%s", fsys["/etc/passwd"])
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(fsys[CACertificatesPath]) || strings.Count(string(fsys[CACertificatesPath]), "BEGIN CERTIFICATE") < 100 {
		t.Errorf("%s is not a CA bundle of the public roots", CACertificatesPath)
	}

	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, fsys["/manager"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != version {
		t.Errorf("the binary in the image reports %q (%v), want the release version %s", out, err, version)
	}
}

func checkBundleImages(t *testing.T, root, reg, version string, res *Result, platform Platform) {
	layout := filepath.Join(root, fbc.DefaultBundleRoot)
	versions, err := fbc.ListBundleDirs(layout)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(res.Bundles)); !slices.Equal(got, versions) {
		t.Fatalf("pushed bundles %v, the catalog's versions %v", got, versions)
	}
	for _, v := range versions {
		dir := filepath.Join(layout, v)
		img, err := remote.Image(mustRef(t, reg+"/celld-operator-bundle:"+v))
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := img.Digest(); d.String() != res.Bundles[v].Digest {
			t.Errorf("%s: the tag names %s, the release reported %s", v, d, res.Bundles[v].Digest)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		ann, err := BundleAnnotations(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(cf.Config.Labels, ann) {
			t.Errorf("%s: labels %v, want metadata/annotations.yaml %v", v, cf.Config.Labels, ann)
		}
		got := regularFiles(mustFiles(t, img))
		want := map[string][]byte{}
		for _, d := range bundleDirs {
			maps.Copy(want, dirFiles(t, filepath.Join(dir, d), "/"+d))
		}
		sameFiles(t, "bundle image "+v, got, want)
		if v == version {
			// olm/<version> is bundle/ copied, scorecard configuration included.
			fromBundle := map[string][]byte{}
			for _, d := range bundleDirs {
				maps.Copy(fromBundle, dirFiles(t, filepath.Join(root, "bundle", d), "/"+d))
			}
			sameFiles(t, "bundle image "+v+" (against bundle/)", got, fromBundle)
		}
		// Built again from the same directory, the image is the same: the digest is reproducible.
		again, err := BundleImage(dir, platform, cf.Created.Time)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := again.Digest(); d.String() != res.Bundles[v].Digest {
			t.Errorf("%s: rebuilt from the same files the bundle image is %s, pushed %s", v, d, res.Bundles[v].Digest)
		}
	}
}

func mustFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	f, _ := files(t, img)
	return f
}

func checkCatalogImage(t *testing.T, root, reg, version string, res *Result) {
	img, err := remote.Image(mustRef(t, res.Catalog.Pinned()))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.Labels[CatalogConfigsLabel] != CatalogConfigsDir {
		t.Errorf("label %s=%q, want %s", CatalogConfigsLabel, cf.Config.Labels[CatalogConfigsLabel], CatalogConfigsDir)
	}
	catalogDir := filepath.Join(root, filepath.Dir(fbc.DefaultOut))
	got := regularFiles(mustFiles(t, img))
	sameFiles(t, "catalog image", got, dirFiles(t, catalogDir, CatalogConfigsDir+"/"+filepath.Base(catalogDir)))

	cat, err := fbc.Parse(got[CatalogConfigsDir+"/"+gen.PackageName+"/catalog.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fbc.Validate(cat) {
		t.Error(e)
	}
	for _, b := range cat.Bundles {
		pv, err := b.PackageVersion()
		if err != nil {
			t.Fatal(err)
		}
		if b.Image != reg+"/celld-operator-bundle:"+pv.Version {
			t.Errorf("bundle %s: image %s, want it under the release's bundle repository", b.Name, b.Image)
		}
		desc, err := remote.Head(mustRef(t, b.Image))
		if err != nil {
			t.Errorf("bundle %s: %v", b.Name, err)
			continue
		}
		if desc.Digest.String() != res.Bundles[pv.Version].Digest {
			t.Errorf("bundle %s: the registry holds %s, the release pushed %s", b.Name, desc.Digest, res.Bundles[pv.Version].Digest)
		}
		var ops []string
		for _, ri := range b.RelatedImages {
			ops = append(ops, ri.Image)
		}
		if pv.Version == version && !slices.Contains(ops, res.Operator.Pinned()) {
			t.Errorf("bundle %s: related images %v lack the operator %s", b.Name, ops, res.Operator.Pinned())
		}
	}
}

// TestOperatorImageIsReproducible: the same binary gives the same image, and the base layer
// (user, CA certificates) is the same on every platform, so registries store it once.
func TestOperatorImageIsReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	digests := map[Platform]v1.Hash{}
	bases := map[v1.Hash]bool{}
	for _, p := range []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"linux", "amd64"}} {
		img, err := OperatorImage(bin, p, "1.2.3", created)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := digests[p]; ok && prev != d {
			t.Errorf("%s: built twice, %s then %s", p, prev, d)
		}
		digests[p] = d
		layers, _ := img.Layers()
		base, _ := layers[0].Digest()
		bases[base] = true
	}
	if digests[Platform{"linux", "amd64"}] == digests[Platform{"linux", "arm64"}] {
		t.Error("the amd64 and arm64 images are the same image")
	}
	if len(bases) != 1 {
		t.Errorf("the base layer differs between platforms: %v", bases)
	}
}

// TestCatalogImageOnAnOpmBase: with an opm base the catalog image keeps the base's layers and
// runs `opm serve /configs`, for OLM v0's CatalogSource; the catalog layer is the same.
func TestCatalogImageOnAnOpmBase(t *testing.T) {
	base, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "celld-operator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.yaml"), []byte("---\nschema: olm.package\nname: celld-operator\ndefaultChannel: stable-v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := Platform{"linux", "arm64"}
	plain, err := CatalogImage(dir, nil, p, created)
	if err != nil {
		t.Fatal(err)
	}
	served, err := CatalogImage(dir, base, p, created)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := served.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/bin/opm"}) || !slices.Equal(cf.Config.Cmd, []string{"serve", "/configs", "--cache-dir=/tmp/cache"}) {
		t.Errorf("entrypoint %v cmd %v, want opm serve /configs", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.Labels[CatalogConfigsLabel] != CatalogConfigsDir || cf.Architecture != "arm64" {
		t.Errorf("label %v, architecture %s", cf.Config.Labels, cf.Architecture)
	}
	baseLayers, _ := base.Layers()
	servedLayers, _ := served.Layers()
	plainLayers, _ := plain.Layers()
	if len(servedLayers) != len(baseLayers)+1 || len(plainLayers) != 1 {
		t.Fatalf("%d layers on the opm base of %d, %d without", len(servedLayers), len(baseLayers), len(plainLayers))
	}
	a, _ := servedLayers[len(servedLayers)-1].Digest()
	b, _ := plainLayers[0].Digest()
	if a != b {
		t.Error("the catalog layer differs with and without the opm base")
	}
	if pc, _ := plain.ConfigFile(); len(pc.Config.Entrypoint) != 0 {
		t.Errorf("without opm the catalog image has an entrypoint %v", pc.Config.Entrypoint)
	}
}

// TestSetVersionWritesOneVersion: make version rewrites the chart's version and appVersion and
// the kustomize tag, and nothing else.
func TestSetVersionWritesOneVersion(t *testing.T) {
	source := repoRoot(t)
	root := t.TempDir()
	copyDirs(t, source, root, ChartFile, KustomizationFile)
	before := map[string]string{}
	for _, f := range []string{ChartFile, KustomizationFile} {
		raw, _ := os.ReadFile(filepath.Join(root, f))
		before[f] = string(raw)
	}
	changed, err := SetVersion(root, "7.8.9")
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 2 {
		t.Errorf("changed %v, want both files", changed)
	}
	for _, f := range []string{ChartFile, KustomizationFile} {
		raw, _ := os.ReadFile(filepath.Join(root, f))
		after := string(raw)
		if n := strings.Count(after, `"7.8.9"`); (f == ChartFile && n != 2) || (f == KustomizationFile && n != 1) {
			t.Errorf("%s states the version %d times:\n%s", f, n, after)
		}
		if len(strings.Split(after, "\n")) != len(strings.Split(before[f], "\n")) {
			t.Errorf("%s changed shape", f)
		}
	}
	if _, err := SetVersion(root, "v1"); err == nil {
		t.Error("a version that is not semver was written")
	}
}

// TestEarlierReleaseBuildsFromItsCommit: an earlier release (make images EARLIER_RELEASES) is
// built from the tree of its commit, not from the working tree, with its own version linked in.
// The commit here is HEAD, whose packages the build cache mostly holds.
func TestEarlierReleaseBuildsFromItsCommit(t *testing.T) {
	source := repoRoot(t)
	head, err := exec.Command("git", "-C", source, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	e, err := ParseEarlier("0.0.1=" + strings.TrimSpace(string(head)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := filepath.Join(t.TempDir(), "src")
	if err := checkout(ctx, source, e.Commit, src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
		t.Fatalf("the checkout holds no main.go: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "manager")
	if err := BuildOperator(ctx, src, e.Version, Platform{"linux", runtime.GOARCH}, bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "0.0.1" {
		t.Errorf("the earlier build reports %q (%v), want 0.0.1", out, err)
	}
	for _, bad := range []string{"0.1.0", "v0.1=abc", "=abc", "0.1.0="} {
		if _, err := ParseEarlier(bad); err == nil {
			t.Errorf("ParseEarlier(%q) accepted", bad)
		}
	}
}
