package children

import (
	"bytes"
	"fmt"
	"io/fs"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

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

// LoadWatches reads a watches file from fsys (os.DirFS(".") for the working directory) and
// checks it the way the operator needs it at start: every entry names a version, a kind and a
// chart embedded in the binary, and no kind appears twice. Unknown fields are refused, so a
// typo is an error rather than a silently ignored setting.
func LoadWatches(fsys fs.FS, name string) ([]Watch, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read watches file %s: %w", name, err)
	}
	var watches []Watch
	if err := yaml.UnmarshalStrict(data, &watches); err != nil {
		return nil, fmt.Errorf("parse watches file %s: %w", name, err)
	}
	if len(bytes.TrimSpace(data)) == 0 || len(watches) == 0 {
		return nil, fmt.Errorf("watches file %s lists no kinds; map celld.eric.dev/v1alpha1 CelldFleet to %s", name, FleetChart)
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
		if _, err := embeddedDir(w.Chart); err != nil {
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
