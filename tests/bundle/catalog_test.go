package bundle

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/tests/tools/bundlegen/gen"
	"github.com/celld/celld-operator/tests/tools/catalog/fbc"
)

// The catalog and the OperatorHub layout, as `make catalog` writes them.
const (
	catalogDir   = "catalog/celld-operator"
	catalogFile  = "catalog/celld-operator/catalog.yaml"
	templateFile = "catalog/template.yaml"
)

func loadCatalog(t *testing.T) *fbc.Catalog {
	t.Helper()
	c, err := fbc.Load(repo(t, catalogDir))
	if err != nil {
		t.Fatalf("the catalog does not load (run `make catalog`): %v", err)
	}
	return c
}

func readTemplate(t *testing.T) *fbc.Template {
	t.Helper()
	tpl, err := fbc.ReadTemplate(repo(t, templateFile))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// releaseVersion is the version of the committed bundle/ (this release).
func releaseVersion(t *testing.T) string {
	t.Helper()
	v, _, _ := unstructuredString(csv(t).Object, "spec", "version")
	if v == "" {
		t.Fatal("the bundle CSV has no spec.version")
	}
	return v
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	cur := any(obj)
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// TestCatalogPassesWhatOpmValidates loads the committed catalog as opm would and checks it with
// the rules of `opm validate` and the graph rules of fbc.Validate; then checks the shape this
// project promises: one package, the channels opm's olm.semver template gives a 0.x release
// (candidate-v0 and stable-v0, stable-v0 the default), 0.1.0 and this release in both, and this
// release the head of every channel.
func TestCatalogPassesWhatOpmValidates(t *testing.T) {
	c := loadCatalog(t)
	for _, err := range fbc.Validate(c) {
		t.Error(err)
	}
	if len(c.Packages) != 1 || c.Packages[0].Name != gen.PackageName || c.Packages[0].DefaultChannel != "stable-v0" {
		t.Fatalf("want one package %s with default channel stable-v0, got %+v", gen.PackageName, c.Packages)
	}
	var names []string
	for _, ch := range c.Channels {
		names = append(names, ch.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"candidate-v0", "stable-v0"}) {
		t.Errorf("channels %v, want candidate-v0 and stable-v0", names)
	}
	release := fbc.BundleName(gen.PackageName, releaseVersion(t))
	for _, ch := range c.Channels {
		head, err := fbc.Head(ch)
		if err != nil {
			t.Error(err)
			continue
		}
		if head != release {
			t.Errorf("channel %s: head %s, want this release %s", ch.Name, head, release)
		}
		var entries []string
		for _, e := range ch.Entries {
			entries = append(entries, e.Name)
		}
		if !slices.Contains(entries, fbc.BundleName(gen.PackageName, "0.1.0")) || len(entries) < 2 {
			t.Errorf("channel %s lists %v; the graph must hold 0.1.0 and this release", ch.Name, entries)
		}
	}
	for _, b := range c.Bundles {
		pv, err := b.PackageVersion()
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.HasSuffix(b.Image, ":"+pv.Version) {
			t.Errorf("bundle %s: image %s is not tagged with its version", b.Name, b.Image)
		}
		if _, err := gen.ParseImage(b.Image); err != nil {
			t.Errorf("bundle %s: %v", b.Name, err)
		}
		var gvks int
		for _, p := range b.Properties {
			if p.Type == fbc.PropertyGVK {
				gvks++
			}
		}
		crds, err := filepath.Glob(repo(t, "olm", gen.PackageName, pv.Version, "manifests", "celld.eric.dev_*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if gvks != len(crds) || gvks < 2 {
			t.Errorf("bundle %s provides %d olm.gvk, want one for each of the %d CRDs of olm/%s/%s", b.Name, gvks, len(crds), gen.PackageName, pv.Version)
		}
	}
}

// TestCatalogEdgesAreTheCSVs checks each channel entry against the CSV of its bundle in the
// OperatorHub layout: the same replaces, so a classic install, OperatorHub's semver mode and the
// catalog describe one graph. opm's olm.semver template draws no skipRange; each CSV's
// olm.skipRange must still cover every older version of the catalog, so that OLM v0 installs
// from the CSVs alone upgrade in one step too.
func TestCatalogEdgesAreTheCSVs(t *testing.T) {
	c := loadCatalog(t)
	for _, ch := range c.Channels {
		for i, e := range ch.Entries {
			version := strings.TrimPrefix(e.Name, gen.PackageName+".v")
			b, err := fbc.ReadBundleDir(repo(t, fbc.DefaultBundleRoot, version))
			if err != nil {
				t.Fatal(err)
			}
			if b.CSV.Spec.Replaces != e.Replaces {
				t.Errorf("channel %s: %s replaces %q, its CSV %q", ch.Name, e.Name, e.Replaces, b.CSV.Spec.Replaces)
			}
			if e.SkipRange != "" {
				t.Errorf("channel %s: %s has skipRange %q, which opm's olm.semver template never draws", ch.Name, e.Name, e.SkipRange)
			}
			r, err := semver.ParseRange(b.CSV.Annotations["olm.skipRange"])
			if err != nil {
				t.Errorf("%s: olm.skipRange: %v", e.Name, err)
				continue
			}
			for _, older := range ch.Entries[:i] {
				if !r(semver.MustParse(strings.TrimPrefix(older.Name, gen.PackageName+".v"))) {
					t.Errorf("%s: olm.skipRange %q does not cover the older %s", e.Name, b.CSV.Annotations["olm.skipRange"], older.Name)
				}
			}
		}
	}
}

// TestCommittedCatalogIsUpToDate renders the catalog again from catalog/template.yaml and the
// OperatorHub layout, with the bundle repository the committed catalog uses, and requires the
// same bytes.
func TestCommittedCatalogIsUpToDate(t *testing.T) {
	committed := read(t, repo(t, catalogFile))
	c, err := fbc.Parse(committed)
	if err != nil {
		t.Fatal(err)
	}
	bundleRepo, err := fbc.BundleRepository(c)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := fbc.Render(repo(t), readTemplate(t), fbc.DefaultBundleRoot, bundleRepo)
	if err != nil {
		t.Fatalf("render the catalog: %v", err)
	}
	raw, err := fresh.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, committed) {
		t.Errorf("%s is stale (the template or a bundle changed since it was rendered); run `make catalog` and commit it", catalogFile)
	}
}

// TestOperatorHubLayout checks olm/celld-operator as OperatorHub's community-operators expects
// it: ci.yaml with a semver update graph and one <version>/manifests|metadata|tests directory
// per bundle, the scorecard configuration where its annotation points; each CSV replaces the
// version before it (what semver mode derives); this release's directory is bundle/ byte for
// byte; every bundle passes the operator-framework validators; and the catalog lists exactly
// these bundles.
func TestOperatorHubLayout(t *testing.T) {
	layoutRoot := fbc.DefaultBundleRoot
	root := repo(t, layoutRoot)
	var ci struct {
		UpdateGraph string   `json:"updateGraph"`
		Reviewers   []string `json:"reviewers,omitempty"`
	}
	if err := yaml.UnmarshalStrict(read(t, filepath.Join(root, "ci.yaml")), &ci); err != nil {
		t.Fatalf("ci.yaml: %v", err)
	}
	if ci.UpdateGraph != "semver-mode" {
		t.Errorf("ci.yaml updateGraph %q, want semver-mode", ci.UpdateGraph)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := semver.Parse(e.Name()); e.Name() != "ci.yaml" && (!e.IsDir() || err != nil) {
			t.Errorf("%s/%s is neither ci.yaml nor a version directory", layoutRoot, e.Name())
		}
	}
	versions, err := fbc.ListBundleDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) < 2 || versions[0] != "0.1.0" {
		t.Fatalf("bundle versions %v: the graph needs 0.1.0 and this release", versions)
	}
	for i, v := range versions {
		dir := filepath.Join(root, v)
		files := tree(t, dir)
		for path := range files {
			top, rest, _ := strings.Cut(path, "/")
			if !(top == "manifests" && !strings.Contains(rest, "/")) && path != "metadata/annotations.yaml" && path != "tests/scorecard/config.yaml" {
				t.Errorf("%s/%s/%s is outside <version>/manifests/*.yaml, <version>/metadata/annotations.yaml and <version>/tests/scorecard/config.yaml", layoutRoot, v, path)
			}
		}
		ann, err := fbc.ReadBundleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := ann.Annotations["operators.operatorframework.io.test.config.v1"]; cfg != "" && files[strings.TrimSuffix(cfg, "/")+"/config.yaml"] == nil {
			t.Errorf("%s/%s: the annotation operators.operatorframework.io.test.config.v1 points to %s, which holds no config.yaml", layoutRoot, v, cfg)
		}
		b, err := fbc.ReadBundleDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if i > 0 {
			want = fbc.BundleName(gen.PackageName, versions[i-1])
		}
		if b.CSV.Spec.Replaces != want {
			t.Errorf("%s: the CSV replaces %q; in semver mode it follows %q", v, b.CSV.Spec.Replaces, want)
		}
		loaded, err := manifests.GetBundleFromDir(dir)
		if err != nil {
			t.Fatalf("%s does not load as a bundle: %v", v, err)
		}
		for _, r := range validation.DefaultBundleValidators.Validate(loaded.ObjectsToValidate()...) {
			for _, e := range r.Errors {
				t.Errorf("%s: %s: %s", v, r.Name, describe(e))
			}
		}
	}
	release := releaseVersion(t)
	if !slices.Contains(versions, release) {
		t.Fatalf("this release %s has no directory in %s; run `make catalog`", release, layoutRoot)
	}
	layout := tree(t, filepath.Join(root, release))
	bundle := tree(t, repo(t, "bundle"))
	for _, p := range keys(layout, bundle) {
		if !bytes.Equal(layout[p], bundle[p]) {
			t.Errorf("%s/%s/%s differs from bundle/%s; run `make catalog` (make bundle does) and commit it", layoutRoot, release, p, p)
		}
	}
	var inCatalog []string
	for _, b := range loadCatalog(t).Bundles {
		inCatalog = append(inCatalog, strings.TrimPrefix(b.Name, gen.PackageName+".v"))
	}
	slices.SortFunc(inCatalog, func(a, b string) int { return semver.MustParse(a).Compare(semver.MustParse(b)) })
	if !slices.Equal(inCatalog, versions) {
		t.Errorf("the catalog holds %v, the OperatorHub layout %v", inCatalog, versions)
	}
}

// TestCatalogValidatorRefuses breaks the committed catalog one rule at a time; each must be
// reported. This keeps the checks above able to fail.
func TestCatalogValidatorRefuses(t *testing.T) {
	base := loadCatalog(t)
	channel := func(c *fbc.Catalog, name string) *fbc.Channel {
		for i := range c.Channels {
			if c.Channels[i].Name == name {
				return &c.Channels[i]
			}
		}
		t.Fatalf("no channel %s", name)
		return nil
	}
	entry := func(ch *fbc.Channel, version string) *fbc.ChannelEntry {
		for i := range ch.Entries {
			if ch.Entries[i].Name == fbc.BundleName(gen.PackageName, version) {
				return &ch.Entries[i]
			}
		}
		t.Fatalf("channel %s has no %s", ch.Name, version)
		return nil
	}
	// addBundle copies the first bundle as another version.
	addBundle := func(c *fbc.Catalog, version string) {
		b := c.Bundles[0]
		b.Name = fbc.BundleName(gen.PackageName, version)
		b.Properties = append([]fbc.Property(nil), b.Properties...)
		for i, p := range b.Properties {
			if p.Type == fbc.PropertyPackage {
				b.Properties[i].Value = json.RawMessage(`{"packageName":"` + gen.PackageName + `","version":"` + version + `"}`)
			}
		}
		c.Bundles = append(c.Bundles, b)
	}
	name := func(v string) string { return fbc.BundleName(gen.PackageName, v) }
	cases := []struct {
		name    string
		rule    fbc.Rule
		want    string
		breakIt func(c *fbc.Catalog)
	}{
		{"default channel missing", fbc.RuleDefaultChannel, `default channel "fast-v0" is not one of its channels`, func(c *fbc.Catalog) { c.Packages[0].DefaultChannel = "fast-v0" }},
		{"entry without a bundle", fbc.RuleChannelEntries, `entry "celld-operator.v9.0.0" names no bundle`, func(c *fbc.Catalog) {
			ch := channel(c, "stable-v0")
			ch.Entries = append(ch.Entries, fbc.ChannelEntry{Name: name("9.0.0"), Replaces: name(releaseVersion(t))})
		}},
		{"bundle in no channel", fbc.RuleBundleInChannel, `bundle "celld-operator.v9.0.0" is in no channel`, func(c *fbc.Catalog) { addBundle(c, "9.0.0") }},
		{"two heads", fbc.RuleHead, "2 heads", func(c *fbc.Catalog) {
			e := entry(channel(c, "stable-v0"), releaseVersion(t))
			e.Replaces = ""
		}},
		{"cycle", fbc.RuleCycle, "the replaces chain has a cycle", func(c *fbc.Catalog) {
			addBundle(c, "0.0.1")
			ch := channel(c, "candidate-v0")
			entry(ch, "0.1.0").Replaces = name("0.0.1")
			ch.Entries = append(ch.Entries, fbc.ChannelEntry{Name: name("0.0.1"), Replaces: name("0.1.0")})
		}},
		{"stranded entries", fbc.RuleStranded, "stranded entries", func(c *fbc.Catalog) {
			addBundle(c, "0.0.1")
			addBundle(c, "0.0.2")
			ch := channel(c, "candidate-v0")
			ch.Entries = append(ch.Entries, fbc.ChannelEntry{Name: name("0.0.1"), Replaces: name("0.0.2")}, fbc.ChannelEntry{Name: name("0.0.2"), Replaces: name("0.0.1")})
		}},
		{"not connected", fbc.RuleConnected, "the graph is not connected: no upgrade path from celld-operator.v0.0.1, celld-operator.v0.0.2", func(c *fbc.Catalog) {
			addBundle(c, "0.0.1")
			addBundle(c, "0.0.2")
			ch := channel(c, "candidate-v0")
			for i := range ch.Entries {
				ch.Entries[i].SkipRange = "" // the head's range would reach them
			}
			ch.Entries = append(ch.Entries, fbc.ChannelEntry{Name: name("0.0.1"), Skips: []string{name("0.0.2")}}, fbc.ChannelEntry{Name: name("0.0.2"), Skips: []string{name("0.0.1")}})
		}},
		{"head not the newest", fbc.RuleHeadNewest, "is not the newest version", func(c *fbc.Catalog) {
			ch := channel(c, "stable-v0")
			entry(ch, releaseVersion(t)).Replaces = ""
			entry(ch, releaseVersion(t)).SkipRange = ""
			entry(ch, "0.1.0").Replaces = name(releaseVersion(t))
		}},
		{"edge to a newer version", fbc.RuleEdgesOlder, "which is not older", func(c *fbc.Catalog) {
			ch := channel(c, "stable-v0")
			entry(ch, releaseVersion(t)).Replaces = ""
			entry(ch, "0.1.0").Replaces = name(releaseVersion(t))
		}},
		{"bad skipRange", fbc.RuleSkipRange, "is not a semver range", func(c *fbc.Catalog) { entry(channel(c, "stable-v0"), "0.1.0").SkipRange = "<<0.1" }},
		{"skipRange covering its own version", fbc.RuleEdgesOlder, "includes its own version", func(c *fbc.Catalog) {
			entry(channel(c, "stable-v0"), "0.1.0").SkipRange = ">=0.0.0 <=0.1.0"
		}},
		{"no olm.package property", fbc.RulePackageProperty, "must have exactly one olm.package property", func(c *fbc.Catalog) {
			c.Bundles[0].Properties = slices.DeleteFunc(append([]fbc.Property(nil), c.Bundles[0].Properties...), func(p fbc.Property) bool { return p.Type == fbc.PropertyPackage })
		}},
		{"duplicate version", fbc.RuleUniqueVersions, "have the same version", func(c *fbc.Catalog) {
			b := c.Bundles[0]
			b.Name = b.Name + "-copy"
			c.Bundles = append(c.Bundles, b)
		}},
		{"name not normalized", fbc.RuleBundleName, `must be named "celld-operator.v0.1.0"`, func(c *fbc.Catalog) {
			for i := range c.Bundles {
				if c.Bundles[i].Name == name("0.1.0") {
					c.Bundles[i].Name = "celld-operator-0.1.0"
				}
			}
			for i := range c.Channels {
				for j := range c.Channels[i].Entries {
					if c.Channels[i].Entries[j].Name == name("0.1.0") {
						c.Channels[i].Entries[j].Name = "celld-operator-0.1.0"
					}
					if c.Channels[i].Entries[j].Replaces == name("0.1.0") {
						c.Channels[i].Entries[j].Replaces = "celld-operator-0.1.0"
					}
				}
			}
		}},
		{"bundle without image", fbc.RuleBundleImage, "has no image", func(c *fbc.Catalog) { c.Bundles[0].Image = "" }},
		{"malformed olm.gvk", fbc.RuleProperties, "needs group, kind and version", func(c *fbc.Catalog) {
			c.Bundles[0].Properties = append(append([]fbc.Property(nil), c.Bundles[0].Properties...), fbc.Property{Type: fbc.PropertyGVK, Value: json.RawMessage(`{"group":"x"}`)})
		}},
		{"package declared twice", fbc.RulePackage, `package "celld-operator" is declared twice`, func(c *fbc.Catalog) { c.Packages = append(c.Packages, c.Packages[0]) }},
		{"package without channels", fbc.RulePackageChannels, `package "celld-operator" has no channel`, func(c *fbc.Catalog) { c.Channels = nil }},
		{"channel of an undeclared package", fbc.RuleChannel, `belongs to package "other"`, func(c *fbc.Catalog) {
			ch := c.Channels[0]
			ch.Package = "other"
			c.Channels = append(c.Channels, ch)
		}},
		{"empty skip", fbc.RuleSkips, "skips[0] is empty", func(c *fbc.Catalog) { entry(channel(c, "stable-v0"), "0.1.0").Skips = []string{""} }},
		{"bundle of an undeclared package", fbc.RuleBundle, `belongs to package "other", which the catalog does not declare`, func(c *fbc.Catalog) {
			b := c.Bundles[0]
			b.Package = "other"
			c.Bundles = append(c.Bundles, b)
		}},
		{"related image without image", fbc.RuleRelatedImages, "related image 0 has no image", func(c *fbc.Catalog) {
			c.Bundles[0].RelatedImages = append([]fbc.RelatedImage{{Name: "x"}}, c.Bundles[0].RelatedImages...)
		}},
		{"blob of the wrong schema", fbc.RuleSchema, `has schema "olm.pkg"`, func(c *fbc.Catalog) { c.Packages[0].Schema = "olm.pkg" }},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.rule.ID] = true
	}
	for _, r := range fbc.Rules {
		if !covered[r.ID] {
			t.Errorf("rule %s (%s) is broken by no case here", r.ID, r.Text)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := base.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			c, err := fbc.Parse(raw) // a deep copy
			if err != nil {
				t.Fatal(err)
			}
			tc.breakIt(c)
			var got []string
			for _, e := range fbc.Validate(c) {
				got = append(got, e.Error())
			}
			found := false
			for _, g := range got {
				found = found || (strings.HasPrefix(g, "["+tc.rule.ID+"] ") && strings.Contains(g, tc.want))
			}
			if !found {
				t.Errorf("no problem of rule %s reported containing %q; got:\n%s", tc.rule.ID, tc.want, strings.Join(got, "\n"))
			}
		})
	}
}

// TestCatalogLoaderRefusesUnknownSchemasAndFields: a blob without a schema, of a schema the
// catalog does not use, or with a misspelt field stops loading.
func TestCatalogLoaderRefusesUnknownSchemasAndFields(t *testing.T) {
	for doc, want := range map[string]string{
		"name: x\n":                              "has no schema",
		"schema: olm.deprecations\npackage: x\n": `schema "olm.deprecations"`,
		"schema: olm.package\nname: x\ndefaultChanel: stable\n": "defaultChanel",
	} {
		if _, err := fbc.Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", doc, err, want)
		}
	}
}

// TestTemplateRules: the template is opm's olm.semver and nothing else (a field opm does not
// know is refused, as opm refuses it); this project adds that every bundle image is
// <repository>:<version> in one repository and that a release reaches stable through candidate.
func TestTemplateRules(t *testing.T) {
	dir := t.TempDir()
	const c010, c020 = "{image: r.test/b:0.1.0}", "{image: r.test/b:0.2.0}"
	for body, want := range map[string]string{
		"schema: olm.semver\ncandidate: {bundles: [" + c010 + "]}\nstable: {bundles: [" + c020 + "]}\n":            "reaches stable through candidate",
		"schema: olm.semver\ncandidate: {bundles: [{image: r.test/b:v0.1}]}\n":                                     "is not a semantic version",
		"schema: olm.semver\ncandidate: {bundles: [{image: r.test/b:0.1.0}, {image: r.test/c:0.2.0}]}\n":           "two repositories",
		"schema: olm.semver\ncandidate: {bundles: [{image: 'r.test/b@sha256:" + strings.Repeat("a", 64) + "'}]}\n": "tagged with its version",
		"schema: olm.semver\ncandidate: {bundles: [" + c010 + ", " + c010 + "]}\n":                                 "twice",
		"schema: olm.semver\n": "no archetype lists a bundle",
		"schema: olm.semver\ngenerateMajorChannels: true\ndefaultChannelTypePreference: minor\ncandidate: {bundles: [" + c010 + "]}\n": "generates no minor-version channels",
		"schema: olm.semver\nbundleRoot: olm/celld-operator\ncandidate: {bundles: [" + c010 + "]}\n":                                   "unknown field",
		"schema: celld.semver-template\ncandidate: {bundles: [" + c010 + "]}\n":                                                        "want olm.semver",
	} {
		path := filepath.Join(dir, "t.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := fbc.ReadTemplate(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("template %q: got %v, want an error containing %q", body, err, want)
		}
	}
	// opm's defaults: neither generate flag means minor channels.
	path := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(path, []byte("schema: olm.semver\ncandidate: {bundles: ["+c010+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := fbc.ReadTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.ChannelsOf("0.1.0"); !slices.Equal(got, []string{"candidate-v0.1"}) {
		t.Errorf("without generate flags 0.1.0 is in %v, want opm's minor channel candidate-v0.1", got)
	}
	if got := readTemplate(t).ChannelsOf(releaseVersion(t)); !slices.Equal(got, []string{"candidate-v0", "stable-v0"}) {
		t.Errorf("catalog/template.yaml puts this release in %v, want candidate-v0 and stable-v0", got)
	}
}

// TestRenderRefusesAGraphTheCSVsContradict: a CSV whose replaces is not the edge the template
// draws stops rendering, as does a bundle directory the template leaves out.
func TestRenderRefusesAGraphTheCSVsContradict(t *testing.T) {
	tpl := readTemplate(t)
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, fbc.DefaultBundleRoot), os.DirFS(repo(t, fbc.DefaultBundleRoot))); err != nil {
		t.Fatal(err)
	}
	if _, err := fbc.Render(root, tpl, fbc.DefaultBundleRoot, ""); err != nil {
		t.Fatalf("the copy renders: %v", err)
	}
	dropped := *tpl
	old := func(b fbc.TemplateBundle) bool { return strings.HasSuffix(b.Image, ":0.1.0") }
	dropped.Candidate.Bundles = slices.DeleteFunc(slices.Clone(tpl.Candidate.Bundles), old)
	dropped.Stable.Bundles = slices.DeleteFunc(slices.Clone(tpl.Stable.Bundles), old)
	if _, err := fbc.Render(root, &dropped, fbc.DefaultBundleRoot, ""); err == nil || !strings.Contains(err.Error(), "is in no archetype of the template") {
		t.Errorf("a bundle directory outside the template: got %v", err)
	}
	csvPath := filepath.Join(root, fbc.DefaultBundleRoot, releaseVersion(t), "manifests", gen.PackageName+".clusterserviceversion.yaml")
	raw := read(t, csvPath)
	broken := bytes.Replace(raw, []byte("replaces: celld-operator.v0.1.0"), []byte("replaces: celld-operator.v0.0.9"), 1)
	if bytes.Equal(raw, broken) {
		t.Fatal("the release CSV does not replace 0.1.0")
	}
	if err := os.WriteFile(csvPath, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fbc.Render(root, tpl, fbc.DefaultBundleRoot, ""); err == nil || !strings.Contains(err.Error(), `the CSV replaces "celld-operator.v0.0.9"`) {
		t.Errorf("a CSV replacing a version the template does not put before it: got %v", err)
	}
}

// TestRepointOperatorImageRoundTrips moves an earlier bundle's operator image to another
// registry and back: every reference moves, the tag stays, and moving back restores the bytes
// (so `make catalog REGISTRY=...` and the committed default are both reproducible).
func TestRepointOperatorImageRoundTrips(t *testing.T) {
	src := repo(t, fbc.DefaultBundleRoot, "0.1.0", "manifests", gen.PackageName+".clusterserviceversion.yaml")
	original := read(t, src)
	path := filepath.Join(t.TempDir(), "csv.yaml")
	if err := os.WriteFile(path, original, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := fbc.ReadBundleDir(repo(t, fbc.DefaultBundleRoot, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	from, err := gen.ParseImage(b.CSV.Annotations["containerImage"])
	if err != nil {
		t.Fatal(err)
	}
	const elsewhere = "mirror.example.invalid:5000/team/celld-operator"
	moved, err := fbc.RepointOperatorImage(path, elsewhere)
	if err != nil || !moved {
		t.Fatalf("repoint: moved=%v err=%v", moved, err)
	}
	text := string(read(t, path))
	if n := strings.Count(text, elsewhere+":"+from.Tag); n != 3 {
		t.Errorf("%d references to the moved image, want 3 (containerImage, the Deployment, relatedImages)", n)
	}
	if strings.Contains(text, from.Repository+":") {
		t.Errorf("a reference to %s is left", from.Repository)
	}
	if moved, err := fbc.RepointOperatorImage(path, from.Repository); err != nil || !moved {
		t.Fatalf("repoint back: moved=%v err=%v", moved, err)
	}
	if !bytes.Equal(read(t, path), original) {
		t.Error("moving the image back does not restore the CSV byte for byte")
	}
}

// TestCatalogDockerfile checks the catalog image recipe: the opm base from a build argument
// without a default (no registry in the repository), the catalog directory the tests load
// copied to /configs, the configs label OLM v1 reads, and a build context that keeps it.
func TestCatalogDockerfile(t *testing.T) {
	lines := dockerfileLines(t, repo(t, "catalog.Dockerfile"))
	text := strings.Join(lines, "\n")
	for _, want := range []string{"ARG OPM_IMAGE", "FROM ${OPM_IMAGE}", "COPY " + catalogDir + " /configs/celld-operator",
		`RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]`,
		"LABEL operators.operatorframework.io.index.configs.v1=/configs"} {
		if !strings.Contains(text, want) {
			t.Errorf("catalog.Dockerfile lacks %q", want)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "ARG OPM_IMAGE") && strings.Contains(l, "=") {
			t.Errorf("%q gives a default base image; it comes from the Makefile (OPM_IMAGE)", l)
		}
	}
	for _, l := range strings.Split(string(read(t, repo(t, ".dockerignore"))), "\n") {
		l = strings.TrimSuffix(strings.TrimSpace(l), "/")
		if l != "" && !strings.HasPrefix(l, "#") && (l == "catalog" || strings.HasPrefix(catalogDir, l+"/")) {
			t.Errorf(".dockerignore excludes %s, which catalog.Dockerfile copies", l)
		}
	}
}

// TestBundleDockerfileOfTheLayout: the Dockerfile make catalog-bundles-build feeds docker for a
// bundle directory carries exactly its annotations as labels and copies its directories,
// the scorecard configuration included.
func TestBundleDockerfileOfTheLayout(t *testing.T) {
	for v, dir := range map[string]string{"0.1.0": repo(t, fbc.DefaultBundleRoot, "0.1.0"), releaseVersion(t): repo(t, fbc.DefaultBundleRoot, releaseVersion(t)), "bundle/": repo(t, "bundle")} {
		raw, err := fbc.BundleDockerfile(dir)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "Dockerfile")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		var ann struct {
			Annotations map[string]string `json:"annotations"`
		}
		if err := yaml.Unmarshal(read(t, filepath.Join(dir, "metadata", "annotations.yaml")), &ann); err != nil {
			t.Fatal(err)
		}
		labels := dockerfileLabels(t, path)
		if len(labels) != len(ann.Annotations) {
			t.Errorf("%s: %d labels for %d annotations", v, len(labels), len(ann.Annotations))
		}
		for k, val := range ann.Annotations {
			if labels[k] != val {
				t.Errorf("%s: label %s=%q, annotation %q", v, k, labels[k], val)
			}
		}
		for _, want := range []string{"FROM scratch", "COPY manifests /manifests/", "COPY metadata /metadata/"} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("%s: the bundle Dockerfile lacks %q", v, want)
			}
		}
		if !strings.Contains(string(raw), "COPY tests/scorecard /tests/scorecard/") {
			t.Errorf("%s: the bundle Dockerfile does not copy tests/scorecard, where the bundle's scorecard annotation points", v)
		}
	}
}
