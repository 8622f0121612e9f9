package bundle

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/celld/celld-operator/tests/chart/cases"
)

// renderAsDependency renders the install chart as a dependency of a parent chart for a cluster
// of Kubernetes kube, the way Helm does: Helm checks only the parent's kubeVersion, so whatever
// refuses an older cluster must be the chart's own template.
func renderAsDependency(t *testing.T, kube string, vals map[string]any) (map[string]string, error) {
	t.Helper()
	parent := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "platform", Version: "1.0.0", Type: "application"}}
	parent.AddDependency(loadChart(t))
	if err := chartutil.ProcessDependenciesWithMerge(parent, vals); err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	v, err := chartutil.ParseKubeVersion(kube)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *v
	if parent.Metadata.KubeVersion != "" {
		t.Fatal("the parent chart must not carry a kubeVersion of its own")
	}
	top, err := chartutil.ToRenderValues(parent, vals, chartutil.ReleaseOptions{Name: cases.ReleaseName, Namespace: releaseNamespace, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	return (&engine.Engine{Strict: true}).Render(parent, top)
}

// TestChartAsADependencyRefusesAClusterBelowTheFloor: as a subchart, the chart still refuses a
// cluster older than its kubeVersion (the CRDs could not be created there), vendor builds of
// the floor included, and renders on the floor itself.
func TestChartAsADependencyRefusesAClusterBelowTheFloor(t *testing.T) {
	floor := semver.MustParse(strings.TrimSuffix(strings.TrimPrefix(loadChart(t).Metadata.KubeVersion, ">="), "-0"))
	for kube, wantErr := range map[string]bool{
		fmt.Sprintf("v%d.%d.0", floor.Major, floor.Minor):            false,
		fmt.Sprintf("v%d.%d.4-eks-1a2b3c", floor.Major, floor.Minor): false,
		"v1.37.2": false,
		fmt.Sprintf("v%d.%d.9", floor.Major, floor.Minor-1): true,
		"v1.29.0": true,
	} {
		_, err := renderAsDependency(t, kube, map[string]any{"celld-operator": map[string]any{}})
		switch {
		case wantErr && (err == nil || !strings.Contains(err.Error(), "celld-operator needs Kubernetes")):
			t.Errorf("Kubernetes %s: the subchart renders (err %v); it must refuse a cluster below %s", kube, err, floor)
		case !wantErr && err != nil:
			t.Errorf("Kubernetes %s: %v", kube, err)
		}
	}
}

// TestChartHonoursGlobalImagePullSecrets: a parent's global.imagePullSecrets, as names or as
// objects, reach the operator Pods beside the chart's own imagePullSecrets, each once.
func TestChartHonoursGlobalImagePullSecrets(t *testing.T) {
	for name, row := range map[string]struct {
		vals map[string]any
		want []string
	}{
		"names":            {map[string]any{"global": map[string]any{"imagePullSecrets": []any{"mirror", "team"}}}, []string{"mirror", "team"}},
		"objects":          {map[string]any{"global": map[string]any{"imagePullSecrets": []any{map[string]any{"name": "mirror"}}}}, []string{"mirror"}},
		"with the chart's": {map[string]any{"global": map[string]any{"imagePullSecrets": []any{"mirror"}}, "imagePullSecrets": []any{map[string]any{"name": "own"}, map[string]any{"name": "mirror"}}}, []string{"mirror", "own"}},
		"none":             {map[string]any{"global": map[string]any{"storageClass": "fast"}}, nil},
		"only the chart's": {map[string]any{"imagePullSecrets": []any{map[string]any{"name": "own"}}}, []string{"own"}},
	} {
		t.Run(name, func(t *testing.T) {
			d := deployment(t, mustRender(t, row.vals))
			var got []string
			for _, s := range d.Spec.Template.Spec.ImagePullSecrets {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, row.want) {
				t.Errorf("imagePullSecrets %v, want %v", got, row.want)
			}
		})
	}
	// As a dependency, from the parent's global values.
	files, err := renderAsDependency(t, "v1.37.2", map[string]any{"global": map[string]any{"imagePullSecrets": []any{"mirror"}}, "celld-operator": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if d := files["platform/charts/celld-operator/templates/deployment.yaml"]; !strings.Contains(d, "imagePullSecrets:\n        - name: mirror") {
		t.Errorf("the subchart's Deployment does not pull with the parent's global secret:\n%s", d)
	}
	// The schema refuses what Kubernetes would.
	if _, err := render(t, map[string]any{"global": map[string]any{"imagePullSecrets": []any{map[string]any{"secret": "x"}}}}); err == nil {
		t.Error("a global pull secret without a name was accepted")
	}
}
