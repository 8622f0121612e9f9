package watches

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	helmcharts "github.com/celld/celld-operator/helm-charts"
)

func TestLoad(t *testing.T) {
	cases := []struct {
		name, file, err string
	}{
		{"the repository's file", "", ""},
		{"a chart that is not embedded", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/nope}\n", "not embedded"},
		{"a chart outside helm-charts", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: /tmp/chart}\n", "not under helm-charts/"},
		{"a kind listed twice", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/celld-fleet}\n- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/celld-fleet}\n", "listed twice"},
		{"a misspelled field", "- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/celld-fleet, reconcilePeriode: 1m}\n", "unknown field"},
		{"no kind", "- {group: celld.eric.dev, version: v1alpha1, chart: helm-charts/celld-fleet}\n", "version and kind are required"},
		{"an empty file", "", "lists no kinds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"watches.yaml": {Data: []byte(c.file)}}
			if c.name == "the repository's file" {
				data, err := os.ReadFile("../../watches.yaml")
				if err != nil {
					t.Fatal(err)
				}
				fsys["watches.yaml"].Data = data
			}
			ws, err := Load(fsys, "watches.yaml", helmcharts.FS)
			if c.err == "" {
				if err != nil || len(ws) != 1 || ws[0].Chart != fleetChart || ws[0].GroupVersionKind() != v1.GroupVersion.WithKind("CelldFleet") {
					t.Fatalf("Load = %+v, %v", ws, err)
				}
				if !*ws[0].WatchDependentResources || ws[0].ReconcilePeriod == nil {
					t.Errorf("defaults not applied: %+v", ws[0])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Load error = %v; want one mentioning %q", err, c.err)
			}
		})
	}
}

// The charts come from the file system given to Load, not from a fixed embed.
func TestLoadLooksForTheChartInTheGivenFileSystem(t *testing.T) {
	fsys := fstest.MapFS{"watches.yaml": {Data: []byte("- {group: celld.eric.dev, version: v1alpha1, kind: CelldFleet, chart: helm-charts/other}\n")}}
	charts := fstest.MapFS{"other/Chart.yaml": {Data: []byte("apiVersion: v2\nname: other\nversion: 0.1.0\n")}}
	if ws, err := Load(fsys, "watches.yaml", charts); err != nil || len(ws) != 1 || ws[0].Chart != "helm-charts/other" {
		t.Fatalf("Load with the chart in the given file system = %+v, %v", ws, err)
	}
	if _, err := Load(fsys, "watches.yaml", helmcharts.FS); err == nil || !strings.Contains(err.Error(), "not embedded") {
		t.Fatalf("Load with a file system lacking the chart = %v; want not embedded", err)
	}
}
