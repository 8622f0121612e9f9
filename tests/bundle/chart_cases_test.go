package bundle

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartCase is one way to install the chart. Every case is linted (helm lint --strict), rendered
// and created on a real API server, so a value the README offers cannot render something the
// API server refuses.
type chartCase struct {
	name string
	// values are the install chart's values, or the parent chart's when asDependency is set.
	values map[string]any
	// asDependency installs the chart as a dependency of a parent chart, which is how Helm
	// hands it a global: key.
	asDependency bool
	// namespaces are those the render puts objects in besides the release namespace (fleet
	// namespaces, the dashboard's): they must exist before the render is installed, as before
	// helm install.
	namespaces []string
}

func chartCases() []chartCase {
	return []chartCase{
		{name: "defaults"},
		{name: "single replica", values: map[string]any{"replicaCount": 1}},
		{name: "high availability", values: map[string]any{
			"replicaCount":      2,
			"priorityClassName": "system-cluster-critical",
			"topologySpreadConstraints": []any{map[string]any{
				"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}},
		}},
		{name: "fleet namespaces", namespaces: []string{"chart-fleets-a", "chart-fleets-b"}, values: map[string]any{
			"fleetNamespaces":       []any{"chart-fleets-a", "chart-fleets-b"},
			"networkPolicyEnforced": true,
		}},
		{name: "metrics", namespaces: []string{"chart-grafana"}, values: map[string]any{"metrics": map[string]any{"enabled": true,
			"serviceMonitor":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"prometheusRule":   map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true, "namespace": "chart-grafana", "annotations": map[string]any{"grafana_folder": "celld"}}}}},
		{name: "customized", values: map[string]any{
			"nameOverride":           "celld-ops",
			"commonLabels":           map[string]any{"team": "storage"},
			"serviceAccount":         map[string]any{"create": false, "name": "platform-operator"},
			"crds":                   map[string]any{"enabled": false},
			"rbac":                   map[string]any{"aggregateToUserRoles": false},
			"memberReplacementDelay": "1h30m",
			"extraEnv":               []any{map[string]any{"name": "GOMEMLIMIT", "value": "200MiB"}},
			"extraVolumes":           []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
			"extraVolumeMounts":      []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}},
		}},
		{name: "as a dependency", asDependency: true, values: map[string]any{
			"global":         map[string]any{"storageClass": "fast", "labels": map[string]any{"tier": "platform"}},
			"celld-operator": map[string]any{"enabled": true, "networkPolicyEnforced": true},
		}},
	}
}

// dir returns the chart directory helm would be pointed at: the install chart, or a parent
// chart in a temporary directory holding a copy of it under charts/, enabled by a condition
// the way umbrella charts do.
func (c chartCase) dir(t *testing.T) string {
	t.Helper()
	if !c.asDependency {
		return repo(t, chartDir)
	}
	parent := filepath.Join(t.TempDir(), "platform")
	sub := filepath.Join(parent, "charts", "celld-operator")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(sub, os.DirFS(repo(t, chartDir))); err != nil {
		t.Fatal(err)
	}
	version := loadChart(t).Metadata.Version
	meta := map[string]any{"apiVersion": "v2", "name": "platform", "version": "1.0.0", "type": "application",
		"description":  "A parent chart that installs celld-operator as a dependency.",
		"dependencies": []any{map[string]any{"name": "celld-operator", "version": version, "condition": "celld-operator.enabled"}}}
	writeYAML(t, filepath.Join(parent, "Chart.yaml"), meta)
	writeYAML(t, filepath.Join(parent, "values.yaml"), map[string]any{"celld-operator": map[string]any{"enabled": false}})
	if err := os.MkdirAll(filepath.Join(parent, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	return parent
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
