package bundle

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

// makeVariable reads the default of a Makefile variable (NAME ?= VALUE).
func makeVariable(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` \?= ?(.*)$`).FindSubmatch(read(t, repo(t, "Makefile")))
	if m == nil {
		t.Fatalf("the Makefile sets no %s ?= default", name)
	}
	return strings.TrimSpace(string(m[1]))
}

// expand resolves $(VAR) references of a Makefile default with the other defaults.
func expand(t *testing.T, value string) string {
	t.Helper()
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for i := 0; i < 5 && ref.MatchString(value); i++ {
		value = ref.ReplaceAllStringFunc(value, func(m string) string { return makeVariable(t, ref.FindStringSubmatch(m)[1]) })
	}
	return value
}

func yamlFile(t *testing.T, path string, into any) {
	t.Helper()
	if err := yaml.Unmarshal(read(t, repo(t, path)), into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestOneVersionEverywhere: the Makefile's VERSION is the release, and every place that states
// a version states it: the install chart's version and appVersion (so its default image tag),
// the kustomize image tag, the CSV, the bundle and its place in the OperatorHub layout, the
// catalog (this release heads the default channel) and its template, and the build of the
// binary (make build, make images and the Dockerfile link VERSION into --version).
func TestOneVersionEverywhere(t *testing.T) {
	version := makeVariable(t, "VERSION")
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	yamlFile(t, "helm-charts/celld-operator/Chart.yaml", &chart)
	if chart.Version != version || chart.AppVersion != version {
		t.Errorf("the install chart says version %s, appVersion %s; the release is %s (make version)", chart.Version, chart.AppVersion, version)
	}
	var values struct {
		Image struct {
			Repository, Tag, Digest string
		} `json:"image"`
	}
	yamlFile(t, "helm-charts/celld-operator/values.yaml", &values)
	if values.Image.Tag != "" || values.Image.Digest != "" {
		t.Errorf("the chart's default image pins tag %q digest %q; leave both empty so the image follows appVersion", values.Image.Tag, values.Image.Digest)
	}
	if !strings.Contains(string(read(t, repo(t, "helm-charts/celld-operator/templates/_helpers.tpl"))), ".Values.image.tag | default .Chart.AppVersion") {
		t.Error("the chart's image tag no longer defaults to .Chart.AppVersion")
	}
	var kust struct {
		Images []struct {
			Name, NewName, NewTag string
		} `json:"images"`
	}
	yamlFile(t, "config/manager/kustomization.yaml", &kust)
	if len(kust.Images) != 1 || kust.Images[0].NewTag != version {
		t.Errorf("config/manager tags the operator image %v; the release is %s (make version)", kust.Images, version)
	}
	c := csv(t)
	if v, _, _ := unstructured.NestedString(c.Object, "spec", "version"); v != version || c.GetName() != gen.CSVName(version) {
		t.Errorf("the CSV is %s of version %s; the release is %s (make bundle)", c.GetName(), v, version)
	}
	if ref, err := gen.ParseImage(c.GetAnnotations()["containerImage"]); err != nil {
		t.Error(err)
	} else if !ref.ByDigest() && ref.Tag != version {
		t.Errorf("the CSV runs the operator image tagged %s; the release is %s", ref.Tag, version)
	}
	if _, err := os.Stat(repo(t, fbc.DefaultBundleRoot, version)); err != nil {
		t.Errorf("the OperatorHub layout has no bundle of this release: %v", err)
	}
	cat := loadCatalog(t)
	for _, ch := range cat.Channels {
		if ch.Name != cat.Packages[0].DefaultChannel {
			continue
		}
		if head, err := fbc.Head(ch); err != nil || head != fbc.BundleName(gen.PackageName, version) {
			t.Errorf("the default channel %s is headed by %s (%v), not this release %s", ch.Name, head, err, version)
		}
	}
	if !slices.Contains(readTemplate(t).Versions(), version) {
		t.Errorf("catalog/template.yaml does not list the bundle image of %s", version)
	}
	makefile := string(read(t, repo(t, "Makefile")))
	for _, want := range []string{`-X main.version=$(VERSION)`, `go run ./tests/tools/release images --version $(VERSION)`, `go run ./tests/tools/release version --version $(VERSION)`} {
		if !strings.Contains(makefile, want) {
			t.Errorf("the Makefile lacks %q", want)
		}
	}
	if !strings.Contains(makefile, "--build-arg VERSION=$(VERSION)") || !strings.Contains(string(read(t, repo(t, "Dockerfile"))), "-X main.version=${VERSION}") {
		t.Error("the Dockerfile build does not link the Makefile's VERSION into the binary")
	}
}

// TestDefaultRegistryIsTheProjects: the images default to the project's own registry path,
// ghcr.io/<owner of the Go module>, everywhere a default image is written; REGISTRY overrides
// it in the Makefile; and no published file names a placeholder (.invalid) address.
func TestDefaultRegistryIsTheProjects(t *testing.T) {
	module := modulePath(t)
	parts := strings.Split(module, "/")
	if len(parts) < 3 || parts[0] != "github.com" {
		t.Fatalf("module path %s is not github.com/OWNER/REPO", module)
	}
	registry := "ghcr.io/" + parts[1]
	if got := makeVariable(t, "REGISTRY"); got != registry {
		t.Errorf("REGISTRY defaults to %s, want the module owner's %s", got, registry)
	}
	operator := registry + "/celld-operator"
	for name, want := range map[string]string{
		"IMG":             operator + ":" + makeVariable(t, "VERSION"),
		"BUNDLE_REPO":     registry + "/celld-operator-bundle",
		"CATALOG_IMG":     registry + "/celld-operator-catalog:" + makeVariable(t, "VERSION"),
		"SCORECARD_IMAGE": registry + "/scorecard-test:" + gen.OperatorSDKVersion,
	} {
		raw := makeVariable(t, name)
		if !strings.Contains(raw, "$(REGISTRY)") {
			t.Errorf("%s ?= %s does not follow $(REGISTRY)", name, raw)
		}
		if got := expand(t, raw); got != want {
			t.Errorf("%s defaults to %s, want %s", name, got, want)
		}
	}
	if gen.DefaultScorecardImage != registry+"/scorecard-test:"+gen.OperatorSDKVersion {
		t.Errorf("bundlegen's default scorecard image %s is not under %s", gen.DefaultScorecardImage, registry)
	}

	var values struct {
		Image struct{ Repository string } `json:"image"`
	}
	yamlFile(t, "helm-charts/celld-operator/values.yaml", &values)
	var kust struct {
		Images []struct{ NewName string } `json:"images"`
	}
	yamlFile(t, "config/manager/kustomization.yaml", &kust)
	ref, err := gen.ParseImage(csv(t).GetAnnotations()["containerImage"])
	if err != nil {
		t.Fatal(err)
	}
	for where, got := range map[string]string{"the chart's image.repository": values.Image.Repository, "config/manager's image": kust.Images[0].NewName, "the CSV's operator image": ref.Repository} {
		if got != operator {
			t.Errorf("%s is %s, want %s", where, got, operator)
		}
	}
	if repo := readTemplate(t).Repository(); repo != registry+"/celld-operator-bundle" {
		t.Errorf("catalog/template.yaml names bundles in %s, want %s", repo, registry+"/celld-operator-bundle")
	}
	if r, err := fbc.BundleRepository(loadCatalog(t)); err != nil || r != registry+"/celld-operator-bundle" {
		t.Errorf("the catalog's bundles are in %s (%v), want %s", r, err, registry+"/celld-operator-bundle")
	}

	for _, m := range csv(t).Object["spec"].(map[string]any)["maintainers"].([]any) {
		email, _ := m.(map[string]any)["email"].(string)
		if email == "" || strings.HasSuffix(email, ".invalid") || strings.HasSuffix(email, ".example") {
			t.Errorf("maintainer contact %q is not the project's", email)
		}
	}
	// The published files: none names a placeholder registry or address. The one exception is
	// the samples' (alm-examples') spec.runtimeImage: a fleet's celld image is the user's own,
	// by digest, not an image of this project.
	for _, root := range []string{"Makefile", "PROJECT", "bundle", "bundle.Dockerfile", "olm", "catalog", "config/manifests", "config/manager", "config/default", "config/scorecard", "helm-charts/celld-operator/Chart.yaml", "helm-charts/celld-operator/values.yaml"} {
		err := filepath.WalkDir(repo(t, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			for i, line := range strings.Split(string(read(t, path)), "\n") {
				if strings.Contains(line, ".invalid") && !strings.Contains(line, `"runtimeImage": `) {
					rel, _ := filepath.Rel(repo(t), path)
					t.Errorf("%s:%d names a .invalid address: %s", rel, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDockerfilesBuildFromTheRepositoryRoot: every COPY source of bundle.Dockerfile and
// catalog.Dockerfile exists from the repository root and .dockerignore keeps it in the build
// context, so `docker build -f bundle.Dockerfile .` and `-f catalog.Dockerfile .` work.
func TestDockerfilesBuildFromTheRepositoryRoot(t *testing.T) {
	ignore := dockerignore(t)
	for _, df := range []string{"bundle.Dockerfile", "catalog.Dockerfile"} {
		copies := 0
		for _, l := range dockerfileLines(t, repo(t, df)) {
			fields := strings.Fields(l)
			if len(fields) != 3 || fields[0] != "COPY" {
				continue
			}
			copies++
			src := strings.TrimSuffix(fields[1], "/")
			if _, err := os.Stat(repo(t, src)); err != nil {
				t.Errorf("%s copies %s, which does not exist from the repository root", df, src)
			}
			for _, re := range ignore {
				if re.MatchString(src) {
					t.Errorf("%s copies %s, which .dockerignore excludes (pattern %s)", df, src, re)
				}
			}
		}
		if copies == 0 {
			t.Errorf("%s copies nothing", df)
		}
	}
}

// TestProjectFileIsTheRepositorysLayout: PROJECT declares operator-sdk's hybrid Helm/Go layout
// and the repository has it: the module is the PROJECT's repo; every CRD is a resource of the
// PROJECT (group, domain, version, kind, scope) with Go types at its path; the kinds with a
// controller are the ones a reconciler is built for; every watches.yaml entry is a resource
// with its chart present; and the CSV and bundle annotations name the same layout and builder.
func TestProjectFileIsTheRepositorysLayout(t *testing.T) {
	p, err := gen.ReadProject(repo(t, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Layout[0] != gen.HybridHelmLayout || p.Version != "3" || p.ProjectName != gen.PackageName {
		t.Errorf("PROJECT: layout %v version %s name %s; want %s, 3, %s", p.Layout, p.Version, p.ProjectName, gen.HybridHelmLayout, gen.PackageName)
	}
	for _, plugin := range []string{"manifests.sdk.operatorframework.io/v2", "scorecard.sdk.operatorframework.io/v2"} {
		if _, ok := p.Plugins[plugin]; !ok {
			t.Errorf("PROJECT lacks the plugin %s (the bundle's manifests and scorecard come from it)", plugin)
		}
	}
	if p.Repo != modulePath(t) {
		t.Errorf("PROJECT repo %s, the module %s", p.Repo, modulePath(t))
	}
	type gvk struct{ group, version, kind string }
	resources := map[gvk]gen.ProjectResource{}
	for _, r := range p.Resources {
		resources[gvk{r.Group + "." + r.Domain, r.Version, r.Kind}] = r
	}
	crds, err := filepath.Glob(repo(t, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs (%v)", err)
	}
	seen := map[gvk]bool{}
	for _, f := range crds {
		crd := objects(t, f)[0]
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			k := gvk{group, v.(map[string]any)["name"].(string), kind}
			seen[k] = true
			r, ok := resources[k]
			if !ok {
				t.Errorf("the CRD %s/%s %s is no resource of PROJECT", group, k.version, kind)
				continue
			}
			if r.API == nil || r.API.CRDVersion != "v1" || r.API.Namespaced != (scope == "Namespaced") {
				t.Errorf("PROJECT's %s: api %+v, the CRD is v1 and %s", kind, r.API, scope)
			}
			if r.Path == "" {
				t.Errorf("PROJECT's %s has no Go path; every API of this repository has Go types", kind)
				continue
			}
			dir, ok := strings.CutPrefix(r.Path, p.Repo+"/")
			if !ok {
				t.Errorf("PROJECT's %s path %s is outside the module", kind, r.Path)
				continue
			}
			if !goDeclares(t, repo(t, dir), "type "+kind+" struct") {
				t.Errorf("PROJECT's %s: %s declares no type %s", kind, dir, kind)
			}
			reconciled := grepGo(t, repo(t, "controllers"), "For(&v1."+kind+"{}")
			if r.Controller != reconciled {
				t.Errorf("PROJECT's %s: controller %v, but a reconciler built For it exists: %v", kind, r.Controller, reconciled)
			}
		}
	}
	for k := range resources {
		if !seen[k] {
			t.Errorf("PROJECT declares %v, which no CRD serves", k)
		}
	}
	var watches []struct {
		Group, Version, Kind, Chart string
	}
	yamlFile(t, "watches.yaml", &watches)
	if len(watches) == 0 {
		t.Fatal("watches.yaml is empty; the hybrid layout maps kinds to charts there")
	}
	for _, w := range watches {
		if _, ok := resources[gvk{w.Group, w.Version, w.Kind}]; !ok {
			t.Errorf("watches.yaml maps %s/%s %s, which PROJECT does not declare", w.Group, w.Version, w.Kind)
		}
		if _, err := os.Stat(repo(t, w.Chart, "Chart.yaml")); err != nil {
			t.Errorf("watches.yaml's chart for %s: %v", w.Kind, err)
		}
	}

	ann := csv(t).GetAnnotations()
	if ann[gen.CSVProjectLayoutAnnotation] != p.Layout[0] || ann[gen.CSVBuilderAnnotation] != gen.Builder {
		t.Errorf("the CSV says layout %q builder %q; PROJECT's layout is %s, the builder %s", ann[gen.CSVProjectLayoutAnnotation], ann[gen.CSVBuilderAnnotation], p.Layout[0], gen.Builder)
	}
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	yamlFile(t, "bundle/metadata/annotations.yaml", &file)
	if file.Annotations[gen.MetricsProjectLayout] != p.Layout[0] || file.Annotations[gen.MetricsBuilder] != gen.Builder {
		t.Errorf("annotations.yaml says layout %q builder %q; PROJECT's layout is %s", file.Annotations[gen.MetricsProjectLayout], file.Annotations[gen.MetricsBuilder], p.Layout[0])
	}
	if !strings.HasSuffix(gen.DefaultScorecardImage, ":"+gen.OperatorSDKVersion) {
		t.Errorf("the scorecard-test image %s is not of the builder's operator-sdk %s", gen.DefaultScorecardImage, gen.OperatorSDKVersion)
	}
}

// modulePath is the module path go.mod declares.
func modulePath(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(read(t, repo(t, "go.mod")))
	if m == nil {
		t.Fatal("go.mod declares no module")
	}
	return string(m[1])
}

// goDeclares reports whether a Go file of dir (tests excluded) contains text.
func goDeclares(t *testing.T, dir, text string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && strings.Contains(string(read(t, f)), text) {
			return true
		}
	}
	return false
}

// grepGo reports whether a Go file under root (tests excluded) contains text.
func grepGo(t *testing.T, root, text string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		found = found || strings.Contains(string(read(t, path)), text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
