package gitops

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const root = "../.."

// captured are the fleets tests/e2e/gitops_health_test.go took from the local cluster, and what
// each tool must make of them.
var captured = []struct {
	file, argo, flux string
}{
	{"ready.json", Healthy, Current},
	{"provisioning.json", Progressing, InProgress},
	{"blocked.json", Degraded, Failed},
	{"blocked-ready.json", Degraded, Failed},
	{"paused.json", Suspended, Current},
	{"deleting.json", Progressing, InProgress},
}

func load(t *testing.T) *Checks {
	t.Helper()
	c, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decodeFile(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Decode(raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obj
}

// TestChecksOnFleetsFromTheLocalCluster evaluates both published checks on every captured
// fleet, the way Argo CD and Flux evaluate them.
func TestChecksOnFleetsFromTheLocalCluster(t *testing.T) {
	c := load(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	var want []string
	for _, row := range captured {
		want = append(want, filepath.Join("testdata", row.file))
		obj := decodeFile(t, row.file)
		if obj["kind"] != "CelldFleet" || obj["metadata"].(map[string]any)["uid"] == nil {
			t.Errorf("%s is not a fleet read from an API server", row.file)
			continue
		}
		got, err := ArgoHealth(c.ArgoScript, obj)
		switch {
		case err != nil:
			t.Errorf("%s: the Argo CD script failed: %v", row.file, err)
		case got.Status != row.argo:
			t.Errorf("%s: Argo CD would show %s (%q), want %s", row.file, got.Status, got.Message, row.argo)
		case got.Message == "":
			t.Errorf("%s: Argo CD would show %s with no message", row.file, got.Status)
		}
		status, err := FluxHealth(c.Flux, obj)
		switch {
		case err != nil:
			t.Errorf("%s: the Flux expressions failed: %v", row.file, err)
		case status != row.flux:
			t.Errorf("%s: Flux would see %s, want %s", row.file, status, row.flux)
		}
	}
	slices.Sort(files)
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("testdata holds %v, the table expects %v: capture the fleets again (see docs/gitops.md)", files, want)
	}
}

// TestArgoMessagesComeFromTheOperator: the message Argo CD shows is the reason and message of
// the condition that decided, as the operator wrote them.
func TestArgoMessagesComeFromTheOperator(t *testing.T) {
	c := load(t)
	for _, row := range []struct{ file, condition string }{
		{"blocked.json", "Blocked"}, {"paused.json", "Blocked"}, {"provisioning.json", "Progressing"},
		{"ready.json", "Ready"}, {"deleting.json", "Deleting"},
	} {
		obj := decodeFile(t, row.file)
		got, err := ArgoHealth(c.ArgoScript, obj)
		if err != nil {
			t.Fatal(err)
		}
		cond := conditionIn(obj, row.condition)
		if cond == nil {
			t.Fatalf("%s has no %s condition", row.file, row.condition)
		}
		if want := cond["reason"].(string) + ": " + cond["message"].(string); got.Message != want {
			t.Errorf("%s: Argo CD message %q, want the %s condition's %q", row.file, got.Message, row.condition, want)
		}
	}
}

func conditionIn(obj map[string]any, kind string) map[string]any {
	st, _ := obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == kind {
			return m
		}
	}
	return nil
}

// TestChecksOnStatesNotCaptured covers what the local cluster cannot be held in: a spec change
// the operator has not seen yet, and a fleet it has not reported at all.
func TestChecksOnStatesNotCaptured(t *testing.T) {
	c := load(t)

	stale := decodeFile(t, "ready.json")
	meta := stale["metadata"].(map[string]any)
	meta["generation"] = meta["generation"].(int64) + 1
	got, err := ArgoHealth(c.ArgoScript, stale)
	if err != nil || got.Status != Progressing {
		t.Errorf("a Ready fleet whose new spec the operator has not observed must be Progressing for Argo CD, got %+v %v", got, err)
	}
	if status, err := FluxHealth(c.Flux, stale); err != nil || status != InProgress {
		t.Errorf("a Ready fleet whose new spec the operator has not observed must be InProgress for Flux, got %s %v", status, err)
	}

	fresh := decodeFile(t, "ready.json")
	delete(fresh, "status")
	got, err = ArgoHealth(c.ArgoScript, fresh)
	if err != nil || got.Status != Progressing {
		t.Errorf("a fleet without status must be Progressing for Argo CD, got %+v %v", got, err)
	}
	// Flux reads a fleet without status as Unknown (the expressions cannot be evaluated) and
	// keeps polling until the operator's first status write.
	if _, err := FluxHealth(c.Flux, fresh); err == nil {
		t.Errorf("a fleet without status evaluated without error; docs/gitops.md says Flux sees it as Unknown")
	}
}

// TestTheArgoVMIsAsRestrictedAsArgoCD: Argo CD opens only the base, package and table libraries
// for a custom health script, so a script that works here works there; one that calls the
// string library must fail here as it would there.
func TestTheArgoVMIsAsRestrictedAsArgoCD(t *testing.T) {
	obj := decodeFile(t, "ready.json")
	if _, err := ArgoHealth(`return {status = string.format("%s", "Healthy")}`, obj); err == nil {
		t.Fatal("a script using the string library ran; Argo CD does not open it for custom health scripts")
	}
	got, err := ArgoHealth(`return {status = "Fine"}`, obj)
	if err != nil || got.Status != Unknown {
		t.Fatalf("an invalid health status must read as Unknown, got %+v %v", got, err)
	}
}

// TestTheGuideShowsThePublishedChecks: docs/gitops.md embeds the Lua script in an argocd-cm
// ConfigMap and the Flux Kustomization verbatim, so the guide cannot drift from what is tested.
func TestTheGuideShowsThePublishedChecks(t *testing.T) {
	c := load(t)
	guide, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlocks(string(guide))

	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	const key = "resource.customizations.health.celld.eric.dev_CelldFleet"
	found := false
	for _, b := range blocks {
		if yaml.Unmarshal([]byte(b), &cm) == nil && cm.Kind == "ConfigMap" {
			found = true
			if cm.Data[key] != c.ArgoScript {
				t.Errorf("docs/gitops.md: the argocd-cm %s differs from %s", key, ArgoScriptFile)
			}
		}
	}
	if !found {
		t.Errorf("docs/gitops.md shows no argocd-cm ConfigMap")
	}

	flux, err := os.ReadFile(filepath.Join(root, FluxKustomization))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(blocks, string(flux)) {
		t.Errorf("docs/gitops.md does not show %s verbatim", FluxKustomization)
	}
}

// yamlBlocks returns the contents of the ```yaml blocks of a Markdown document.
func yamlBlocks(doc string) []string {
	var out []string
	for _, part := range strings.Split(doc, "```yaml\n")[1:] {
		if end := strings.Index(part, "```"); end >= 0 {
			out = append(out, part[:end])
		}
	}
	return out
}
