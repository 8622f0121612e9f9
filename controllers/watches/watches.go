// Package watches reads the operator's watches.yaml: the primary kinds it reconciles and, for
// each, the embedded chart that renders its static children. It knows the charts only through
// the file system it is given (helmcharts.FS in the operator), not through the renderer.
package watches

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// chartsDir is the repository directory the embedded chart file system mirrors; watches.yaml
// names charts by their repository path (helm-charts/celld-fleet), the hybrid convention.
const chartsDir = "helm-charts"

// fleetChart is the watches.yaml chart path of the fleet chart, named in the error for an
// empty file.
const fleetChart = chartsDir + "/celld-fleet"

// Watch is one watches.yaml entry: a primary kind and the embedded chart that renders its
// static children. The fields follow the operator-sdk hybrid convention so the file reads the
// same as in any Helm-based operator.
type Watch struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Chart is the chart's repository path, for example helm-charts/celld-fleet; it must be
	// embedded in the binary.
	Chart string `json:"chart"`
	// OverrideValues are --set style overrides (values may reference environment variables as
	// $VAR), applied after the operator's computed values and validated by the chart schema.
	OverrideValues map[string]string `json:"overrideValues,omitempty"`
	// ReconcilePeriod requeues every primary object at least this often.
	ReconcilePeriod *metav1.Duration `json:"reconcilePeriod,omitempty"`
	// WatchDependentResources (default true) asks the manager to watch the rendered kinds.
	WatchDependentResources *bool `json:"watchDependentResources,omitempty"`
	// MaxConcurrentReconciles bounds parallel reconciles of this kind; 0 is the manager default.
	MaxConcurrentReconciles int `json:"maxConcurrentReconciles,omitempty"`
}

// GroupVersionKind is the watched primary kind.
func (w Watch) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
}

// Load reads a watches file from fsys (os.DirFS(".") for the working directory) and checks it
// the way the operator needs it at start: every entry names a version, a kind and a chart
// embedded in the binary, and no kind appears twice. charts is the embedded chart file system
// (helmcharts.FS), whose root mirrors the repository's helm-charts directory: an entry's chart
// is embedded when charts holds its Chart.yaml. Unknown fields are refused, so a typo is an
// error rather than a silently ignored setting.
func Load(fsys fs.FS, name string, charts fs.FS) ([]Watch, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read watches file %s: %w", name, err)
	}
	var watches []Watch
	if err := yaml.UnmarshalStrict(data, &watches); err != nil {
		return nil, fmt.Errorf("parse watches file %s: %w", name, err)
	}
	if len(bytes.TrimSpace(data)) == 0 || len(watches) == 0 {
		return nil, fmt.Errorf("watches file %s lists no kinds; map celld.eric.dev/v1alpha1 CelldFleet to %s", name, fleetChart)
	}
	seen := map[schema.GroupVersionKind]bool{}
	for i := range watches {
		w := &watches[i]
		gvk := w.GroupVersionKind()
		if w.Version == "" || w.Kind == "" {
			return nil, fmt.Errorf("watches file %s entry %d: version and kind are required", name, i+1)
		}
		if seen[gvk] {
			return nil, fmt.Errorf("watches file %s: %s is listed twice; keep one entry per kind", name, gvk)
		}
		seen[gvk] = true
		if w.Chart == "" {
			return nil, fmt.Errorf("watches file %s: %s names no chart", name, gvk)
		}
		if err := embedded(charts, w.Chart); err != nil {
			return nil, fmt.Errorf("watches file %s: %s: %w", name, gvk, err)
		}
		if w.WatchDependentResources == nil {
			w.WatchDependentResources = new(true)
		}
		if w.MaxConcurrentReconciles < 0 {
			return nil, fmt.Errorf("watches file %s: %s: maxConcurrentReconciles must not be negative", name, gvk)
		}
	}
	return watches, nil
}

// embedded fails when the repository chart path is not under helm-charts/ or charts does not
// carry that chart.
func embedded(charts fs.FS, chartPath string) error {
	clean := path.Clean(chartPath)
	dir, ok := strings.CutPrefix(clean, chartsDir+"/")
	if !ok || dir == "" || dir == "." {
		return fmt.Errorf("chart %q is not under %s/; charts are embedded in the operator binary", chartPath, chartsDir)
	}
	if _, err := fs.Stat(charts, path.Join(dir, "Chart.yaml")); err != nil {
		return fmt.Errorf("chart %q is not embedded in the operator binary (no %s/Chart.yaml); add it to the go:embed directive in %s/embed.go", chartPath, dir, chartsDir)
	}
	return nil
}
