// Package cases holds the ways the install chart (helm-charts/celld-operator) is installed in
// the tests, and renders them as helm template does. tests/bundle lints every case, renders it
// and installs it on a real API server; tests/chart runs it on the local cluster. One list, so a
// value set the README offers is checked everywhere at once.
package cases

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// ChartDir is the install chart, relative to the repository root.
const ChartDir = "helm-charts/celld-operator"

// ReleaseName is the release every case is installed as.
const ReleaseName = "celld-operator"

// KubeVersion is the Kubernetes version the cases are rendered for: the control plane the tests
// run (bin/kube-apiserver).
var KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

// Case is one way to install the chart.
type Case struct {
	Name string
	// Values are the install chart's values, or the parent chart's when AsDependency is set.
	Values map[string]any
	// AsDependency installs the chart as a dependency of a parent chart, which is how Helm
	// hands it a global: key.
	AsDependency bool
	// Namespaces are those the render puts objects in besides the release namespace (fleet
	// namespaces, the dashboard's): they must exist before the render is installed, as before
	// helm install.
	Namespaces []string
	// ServiceAccounts the values name without the chart creating them
	// (serviceAccount.create=false): they must exist in the release namespace beforehand.
	ServiceAccounts []string
}

// All returns every case.
func All() []Case {
	return []Case{
		{Name: "defaults"},
		{Name: "single replica", Values: map[string]any{"replicaCount": 1}},
		{Name: "high availability", Values: map[string]any{
			"replicaCount":      2,
			"priorityClassName": "system-cluster-critical",
			"topologySpreadConstraints": []any{map[string]any{
				"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}},
		}},
		{Name: "fleet namespaces", Namespaces: []string{"chart-fleets-a", "chart-fleets-b"}, Values: map[string]any{
			"fleetNamespaces":       []any{"chart-fleets-a", "chart-fleets-b"},
			"networkPolicyEnforced": true,
		}},
		{Name: "metrics", Namespaces: []string{"chart-grafana"}, Values: map[string]any{"metrics": map[string]any{"enabled": true,
			"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"},
				"tlsConfig": map[string]any{"insecureSkipVerify": true}},
			"prometheusRule":   map[string]any{"enabled": true},
			"grafanaDashboard": map[string]any{"enabled": true, "namespace": "chart-grafana", "annotations": map[string]any{"grafana_folder": "celld"}}}}},
		{Name: "customized", ServiceAccounts: []string{"platform-operator"}, Values: map[string]any{
			"nameOverride":           "celld-ops",
			"commonLabels":           map[string]any{"team": "storage"},
			"serviceAccount":         map[string]any{"create": false, "name": "platform-operator"},
			"crds":                   map[string]any{"enabled": false},
			"rbac":                   map[string]any{"aggregateToUserRoles": false},
			"memberReplacementDelay": "1h30m",
			"goMemLimit":             "300MiB",
			"goGC":                   "75",
			"extraEnv":               []any{map[string]any{"name": "GODEBUG", "value": "http2client=0"}},
			"extraVolumes":           []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
			"extraVolumeMounts":      []any{map[string]any{"name": "tmp", "mountPath": "/tmp"}},
		}},
		{Name: "as a dependency", AsDependency: true, Values: map[string]any{
			"global":         map[string]any{"storageClass": "fast", "labels": map[string]any{"tier": "platform"}},
			"celld-operator": map[string]any{"enabled": true, "networkPolicyEnforced": true},
		}},
	}
}

// Dir returns the chart directory helm would be pointed at: the install chart under root (the
// repository), or a parent chart written into tmp that holds a copy of it under charts/,
// enabled by a condition the way umbrella charts do.
func (c Case) Dir(root, tmp string) (string, error) {
	own := filepath.Join(root, ChartDir)
	if !c.AsDependency {
		return own, nil
	}
	parent := filepath.Join(tmp, "platform")
	sub := filepath.Join(parent, "charts", "celld-operator")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", err
	}
	if err := os.CopyFS(sub, os.DirFS(own)); err != nil {
		return "", err
	}
	chrt, err := loader.Load(own)
	if err != nil {
		return "", err
	}
	meta := map[string]any{"apiVersion": "v2", "name": "platform", "version": "1.0.0", "type": "application",
		"description": "A parent chart that installs celld-operator as a dependency.",
		"dependencies": []any{map[string]any{"name": "celld-operator", "version": chrt.Metadata.Version,
			"condition": "celld-operator.enabled"}}}
	if err := WriteYAML(filepath.Join(parent, "Chart.yaml"), meta); err != nil {
		return "", err
	}
	if err := WriteYAML(filepath.Join(parent, "values.yaml"), map[string]any{"celld-operator": map[string]any{"enabled": false}}); err != nil {
		return "", err
	}
	return parent, os.MkdirAll(filepath.Join(parent, "templates"), 0o755)
}

// Manifest renders chrt (the install chart, or a parent holding it as a dependency) into
// namespace as `helm template` does: dependency conditions processed, values coalesced and
// validated against values.schema.json, templates rendered by the engine in strict mode, every
// template but NOTES.txt and partials joined in name order.
func Manifest(chrt *chart.Chart, vals map[string]any, namespace string) (string, error) {
	files, err := renderFiles(chrt, vals, namespace)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var manifest strings.Builder
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		manifest.WriteString("---\n")
		manifest.WriteString(files[name])
		manifest.WriteString("\n")
	}
	return manifest.String(), nil
}

// Notes renders what helm install prints after installing chrt with vals: the install
// chart's NOTES.txt.
func Notes(chrt *chart.Chart, vals map[string]any, namespace string) (string, error) {
	files, err := renderFiles(chrt, vals, namespace)
	if err != nil {
		return "", err
	}
	notes, ok := files[chrt.Name()+"/templates/NOTES.txt"]
	if !ok {
		return "", fmt.Errorf("chart %s has no templates/NOTES.txt", chrt.Name())
	}
	return notes, nil
}

// renderFiles renders every template of chrt as helm template does, by template path.
func renderFiles(chrt *chart.Chart, vals map[string]any, namespace string) (map[string]string, error) {
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = KubeVersion
	for _, c := range append([]*chart.Chart{chrt}, chrt.Dependencies()...) {
		if v := c.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
			return nil, fmt.Errorf("chart %s's kubeVersion %q refuses Kubernetes %s", c.Name(), v, caps.KubeVersion)
		}
	}
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: ReleaseName, Namespace: namespace, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	e := engine.Engine{Strict: true}
	return e.Render(chrt, top)
}

// MonitoringCRDs stand in for the Prometheus Operator's CRDs (kinds and groups only, any
// content), which the metrics case's ServiceMonitor and PrometheusRule need.
func MonitoringCRDs() []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for kind, plural := range map[string]string{"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"} {
		open := true
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &open}}}},
			},
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WriteYAML writes v as YAML to path.
func WriteYAML(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
