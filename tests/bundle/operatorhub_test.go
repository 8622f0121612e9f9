package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
)

// openShiftVersions is the com.redhat.openshift.versions value the CSV's minKubeVersion calls for.
func openShiftVersions(t *testing.T) string {
	t.Helper()
	minKube, _, _ := unstructured.NestedString(csv(t).Object, "spec", "minKubeVersion")
	v, err := gen.OpenShiftVersions(minKube)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// installImages returns every container image of the CSV's install Deployments.
func installImages(t *testing.T, c *unstructured.Unstructured) []string {
	t.Helper()
	deployments, _, _ := unstructured.NestedSlice(c.Object, "spec", "install", "spec", "deployments")
	var images []string
	for _, raw := range deployments {
		spec, _, _ := unstructured.NestedMap(raw.(map[string]any), "spec")
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": spec}, &d); err != nil {
			t.Fatal(err)
		}
		for _, ctr := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			images = append(images, ctr.Image)
		}
	}
	return images
}

func relatedImages(c *unstructured.Unstructured) []string {
	related, _, _ := unstructured.NestedSlice(c.Object, "spec", "relatedImages")
	var out []string
	for _, r := range related {
		img, _ := r.(map[string]any)["image"].(string)
		out = append(out, img)
	}
	return out
}

// checkOperatorHubFields is what OperatorHub's checks ask of a CSV: createdAt; containerImage
// fully qualified and the image the Deployment runs; every install image among relatedImages;
// the disconnected feature declared exactly when the image is pinned by digest.
func checkOperatorHubFields(t *testing.T, c *unstructured.Unstructured) {
	t.Helper()
	ann := c.GetAnnotations()
	if _, err := time.Parse(time.RFC3339, ann["createdAt"]); err != nil {
		t.Errorf("createdAt %q is not RFC 3339: %v", ann["createdAt"], err)
	}
	ref, err := gen.ParseImage(ann["containerImage"])
	if err != nil {
		t.Errorf("containerImage: %v", err)
	}
	images := installImages(t, c)
	if !slices.Contains(images, ann["containerImage"]) {
		t.Errorf("the Deployment runs %v, not containerImage %s", images, ann["containerImage"])
	}
	related := relatedImages(c)
	for _, img := range images {
		if _, err := gen.ParseImage(img); err != nil {
			t.Errorf("install image: %v", err)
		}
		if !slices.Contains(related, img) {
			t.Errorf("relatedImages %v lack the install image %s", related, img)
		}
	}
	byDigest := ref.ByDigest()
	for _, img := range related {
		if r, err := gen.ParseImage(img); err != nil || !r.ByDigest() {
			byDigest = false
		}
	}
	if want := map[bool]string{true: "true", false: "false"}[byDigest]; ann[gen.DisconnectedFeature] != want {
		t.Errorf("%s is %q, but the images are%s all pinned by digest", gen.DisconnectedFeature, ann[gen.DisconnectedFeature], map[bool]string{true: "", false: " not"}[byDigest])
	}
}

// TestCSVFieldsOperatorHubChecks checks the committed bundle's CSV and its
// com.redhat.openshift.versions annotation, which follows minKubeVersion.
func TestCSVFieldsOperatorHubChecks(t *testing.T) {
	c := csv(t)
	checkOperatorHubFields(t, c)
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(read(t, repo(t, "bundle", "metadata", "annotations.yaml")), &file); err != nil {
		t.Fatal(err)
	}
	if got, want := file.Annotations[gen.OpenShiftVersionsKey], openShiftVersions(t); got != want {
		t.Errorf("%s is %q; minKubeVersion calls for %q", gen.OpenShiftVersionsKey, got, want)
	}
}

// TestGeneratorImageOptions renders the bundle with a tagged and with a digest-pinned image:
// only the pinned one names the image by digest everywhere and declares the disconnected
// feature; an unqualified image and a missing createdAt are refused; and the same options give
// the same bytes (nothing depends on the clock).
func TestGeneratorImageOptions(t *testing.T) {
	const digest = "sha256:" + "4f3c2b1a0f3c2b1a0f3c2b1a0f3c2b1a0f3c2b1a0f3c2b1a0f3c2b1a0f3c2b1a"
	base := gen.Options{ConfigDir: repo(t, "config"), Version: "0.2.0", Replaces: "0.1.0", Channels: []string{"candidate", "stable"},
		DefaultChannel: "stable", Image: "registry.example.invalid:5000/celld/celld-operator:0.2.0", CreatedAt: "2026-12-01T00:00:00Z"}
	render := func(o gen.Options) *unstructured.Unstructured {
		t.Helper()
		b, err := gen.Render(o)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := b.Write(filepath.Join(dir, "bundle"), filepath.Join(dir, "bundle.Dockerfile")); err != nil {
			t.Fatal(err)
		}
		return one(t, objects(t, filepath.Join(dir, "bundle", "manifests", gen.PackageName+".clusterserviceversion.yaml")), "ClusterServiceVersion", "")
	}

	tagged := render(base)
	checkOperatorHubFields(t, tagged)
	if got := tagged.GetAnnotations()[gen.DisconnectedFeature]; got != "false" {
		t.Errorf("a tagged image declares disconnected %q", got)
	}

	pinned := base
	pinned.ImageDigest = digest
	p := render(pinned)
	checkOperatorHubFields(t, p)
	want := "registry.example.invalid:5000/celld/celld-operator@" + digest
	if got := p.GetAnnotations()["containerImage"]; got != want {
		t.Errorf("containerImage %s, want %s", got, want)
	}
	if got := relatedImages(p); !slices.Equal(got, []string{want}) {
		t.Errorf("relatedImages %v, want [%s]", got, want)
	}
	if got := p.GetAnnotations()[gen.DisconnectedFeature]; got != "true" {
		t.Errorf("a digest-pinned image declares disconnected %q", got)
	}
	if got := p.GetAnnotations()["createdAt"]; got != base.CreatedAt {
		t.Errorf("createdAt %q, want the given %q", got, base.CreatedAt)
	}

	a, err := gen.Render(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gen.Render(base)
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range a.Files {
		if string(b.Files[path]) != string(content) {
			t.Errorf("two renders with the same options differ in %s", path)
		}
	}

	for name, mutate := range map[string]func(*gen.Options){
		"unqualified image":      func(o *gen.Options) { o.Image = "celld-operator:0.2.0" },
		"image without tag":      func(o *gen.Options) { o.Image = "registry.example.invalid/celld/celld-operator" },
		"bad digest":             func(o *gen.Options) { o.ImageDigest = "sha256:abc" },
		"no createdAt":           func(o *gen.Options) { o.CreatedAt = "" },
		"createdAt not RFC 3339": func(o *gen.Options) { o.CreatedAt = "2026-12-01" },
	} {
		o := base
		mutate(&o)
		if _, err := gen.Render(o); err == nil {
			t.Errorf("%s: the generator accepted it", name)
		}
	}
}

func TestParseImage(t *testing.T) {
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for in, want := range map[string]gen.ImageRef{
		"images.example.invalid/celld/celld-operator:0.2.0":         {Repository: "images.example.invalid/celld/celld-operator", Tag: "0.2.0"},
		"localhost:5000/celld-operator@" + d:                        {Repository: "localhost:5000/celld-operator", Digest: d},
		"registry.example.invalid/a/b:v1@" + d:                      {Repository: "registry.example.invalid/a/b", Tag: "v1", Digest: d},
		"localhost/celld-operator:1":                                {Repository: "localhost/celld-operator", Tag: "1"},
		"images.example.invalid:443/deep/path/celld-operator:0.2.0": {Repository: "images.example.invalid:443/deep/path/celld-operator", Tag: "0.2.0"},
	} {
		got, err := gen.ParseImage(in)
		if err != nil || got != want {
			t.Errorf("ParseImage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"celld-operator:0.2.0", "celld/celld-operator:1", "images.example.invalid/x", "images.example.invalid/X:1",
		"images.example.invalid/x@sha256:12", ""} {
		if _, err := gen.ParseImage(bad); err == nil {
			t.Errorf("ParseImage(%q) accepted it", bad)
		}
	}
	if got := (gen.ImageRef{Repository: "r.example.invalid/x", Tag: "1", Digest: d}).String(); got != "r.example.invalid/x@"+d {
		t.Errorf("a pinned reference prints as %s", got)
	}
}

func TestOpenShiftVersions(t *testing.T) {
	for in, want := range map[string]string{"1.32.0": "v4.19", "1.25.0": "v4.12", "1.29.3": "v4.16", "v1.33": "v4.20"} {
		if got, err := gen.OpenShiftVersions(in); err != nil || got != want {
			t.Errorf("OpenShiftVersions(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"1.24.0", "2.0.0", "one"} {
		if _, err := gen.OpenShiftVersions(bad); err == nil {
			t.Errorf("OpenShiftVersions(%q) accepted it", bad)
		}
	}
}

// capabilityEvidence lists, for each capability level of the operator maturity model, the
// end-to-end specs (tests/e2e) that prove it. The CSV may claim a level only when it and every
// level below it have evidence, and must claim the highest such level.
var capabilityEvidence = []struct {
	level string
	specs []string
}{
	{"Basic Install", []string{
		"creates a fleet that becomes Ready with one member per zone on retained disks, and then writes nothing",
		"runs the Deployment layout across three zones, rolls one member at a time and contracts one step at a time",
	}},
	{"Seamless Upgrades", []string{
		// the operand: a template change (runtime image, restart token, tuning) rolls one member
		// at a time on its disk; the operator: a release takes over fleets an earlier one ran
		"rolls a new restartToken one member at a time, highest ordinal first, on the same disks",
		"adopts a strict-executor fleet with a member down: every Pod replaced one at a time on its disk, no claim deleted, Ready",
	}},
	{"Full Lifecycle", []string{
		// failure recovery and the storage lifecycle; the application's data lives in its bucket,
		// which the operator reserves and never deletes, so backup is the bucket's
		"replaces the one member down past the replacement delay while the rest is ready (MemberReplaced)",
		"replaces a member whose volume no longer exists on a fresh disk (MemberDiskLost)",
		"restarts every member killed at once on its own disk, replacing nobody",
		"scales in one member at a time keeping the claim, and grows back onto the kept disk",
		"deletes the workload, then every claim, then the finalizer; the reservation stays",
	}},
	// Deep Insights is not claimed: the alerting rules and dashboard ship with the Helm chart,
	// not with the bundle (see docs/install.md, "Capability level").
}

// TestCapabilityLevelIsProven requires the CSV's capabilities annotation to be the highest level
// whose evidence, and that of every level below it, exists in tests/e2e.
func TestCapabilityLevelIsProven(t *testing.T) {
	var e2e strings.Builder
	paths, err := filepath.Glob(repo(t, "tests", "e2e", "*_test.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no e2e specs: %v", err)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e2e.Write(raw)
	}
	proven := ""
	for _, level := range capabilityEvidence {
		missing := false
		for _, spec := range level.specs {
			if !strings.Contains(e2e.String(), `It("`+spec+`"`) {
				t.Logf("%s: no e2e spec %q", level.level, spec)
				missing = true
			}
		}
		if missing {
			break
		}
		proven = level.level
	}
	if claimed := csv(t).GetAnnotations()["capabilities"]; claimed != proven {
		t.Errorf("the CSV claims capability level %q; the e2e specs prove %q (see capabilityEvidence)", claimed, proven)
	}
}
