package gen

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// fleetRoleFile holds the per-fleet-namespace Role. It is not in config/rbac's resources
// (it is applied per fleet namespace), so the generator reads it directly.
const fleetRoleFile = "rbac/fleet_namespace_role.yaml"

// Bundle is a rendered bundle: file contents keyed by path relative to the bundle directory
// (manifests/..., metadata/annotations.yaml, tests/scorecard/config.yaml), and the
// bundle.Dockerfile.
type Bundle struct {
	Files      map[string][]byte
	Dockerfile []byte
}

// inputs are the objects of config/manifests sorted by their role in the bundle.
type inputs struct {
	csv                             *unstructured.Unstructured
	crds                            []*unstructured.Unstructured
	deployment                      *unstructured.Unstructured
	clusterRoles, roles, fleetRoles []*unstructured.Unstructured
	services                        []*unstructured.Unstructured
	// readerRoles are ClusterRoles for others (the metrics reader, only nonResourceURLs): not
	// the operator's rights, so not in the CSV; the bundle ships them as manifests, which OLM
	// creates as they are.
	readerRoles []*unstructured.Unstructured
	examples    []*unstructured.Unstructured
	scorecard   *unstructured.Unstructured
}

// Render builds the bundle in memory.
func Render(o Options) (*Bundle, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	in, err := collect(o.ConfigDir)
	if err != nil {
		return nil, err
	}
	project, err := ReadProject(filepath.Join(o.ConfigDir, "..", "PROJECT"))
	if err != nil {
		return nil, fmt.Errorf("the operator-sdk PROJECT file beside %s: %w", o.ConfigDir, err)
	}
	o.ProjectLayout = project.Layout[0]
	b := &Bundle{Files: map[string][]byte{}}
	minKube, _, _ := unstructured.NestedString(in.csv.Object, "spec", "minKubeVersion")
	if minKube == "" {
		return nil, fmt.Errorf("the CSV base sets no spec.minKubeVersion")
	}
	openShift, err := OpenShiftVersions(minKube)
	if err != nil {
		return nil, err
	}

	csv, err := buildCSV(o, in)
	if err != nil {
		return nil, err
	}
	if err := b.add("manifests/"+PackageName+".clusterserviceversion.yaml", csv); err != nil {
		return nil, err
	}
	for _, crd := range in.crds {
		name := crd.GetName() // plural.group
		plural, group, _ := strings.Cut(name, ".")
		if err := b.add(fmt.Sprintf("manifests/%s_%s.yaml", group, plural), crd.Object); err != nil {
			return nil, err
		}
	}
	for _, svc := range in.services {
		s := svc.DeepCopy()
		s.SetNamespace("")
		if err := b.add(fmt.Sprintf("manifests/%s_v1_service.yaml", s.GetName()), s.Object); err != nil {
			return nil, err
		}
	}
	for _, role := range in.readerRoles {
		if err := b.add(fmt.Sprintf("manifests/%s_rbac.authorization.k8s.io_v1_clusterrole.yaml", role.GetName()), role.Object); err != nil {
			return nil, err
		}
	}
	b.Files["metadata/annotations.yaml"] = annotationsYAML(o, openShift)
	sc, err := scorecardConfig(o, in.scorecard)
	if err != nil {
		return nil, err
	}
	if err := b.add("tests/scorecard/config.yaml", sc); err != nil {
		return nil, err
	}
	b.Dockerfile = dockerfile(o, openShift)
	return b, nil
}

func (b *Bundle) add(path string, obj any) error {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("marshal %s: %w", path, err)
	}
	if strings.HasPrefix(path, "manifests/") {
		// End every manifest with a document separator. operator-framework/api v0.31's
		// GetBundleFromDir decodes each file twice through one decoder, seeking the file back
		// in between; with apimachinery's StreamReader (v0.34 and later) the second decode
		// only sees the file again when the first one stopped at a separator, not at EOF.
		raw = append(raw, []byte("---\n")...)
	}
	if _, dup := b.Files[path]; dup {
		return fmt.Errorf("two objects map to bundle file %s", path)
	}
	b.Files[path] = raw
	return nil
}

// collect resolves config/manifests and sorts every object into its place. An object of a
// kind the generator does not know is an error: it must be placed deliberately.
func collect(configDir string) (*inputs, error) {
	objs, err := Resolve(filepath.Join(configDir, "manifests"))
	if err != nil {
		return nil, err
	}
	in := &inputs{}
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterServiceVersion":
			if in.csv != nil {
				return nil, fmt.Errorf("config/manifests renders two ClusterServiceVersions")
			}
			in.csv = u
		case "CustomResourceDefinition":
			in.crds = append(in.crds, u)
		case "Deployment":
			if in.deployment != nil {
				return nil, fmt.Errorf("config/manifests renders two Deployments; the bundle installs one operator Deployment")
			}
			in.deployment = u
		case "ClusterRole":
			if readerRole(u) {
				in.readerRoles = append(in.readerRoles, u)
				continue
			}
			in.clusterRoles = append(in.clusterRoles, u)
		case "Role":
			in.roles = append(in.roles, u)
		case "Service":
			in.services = append(in.services, u)
		case "Configuration":
			in.scorecard = u
		case "CelldFleet", "CelldPreview":
			in.examples = append(in.examples, u)
		case "ServiceAccount", "ClusterRoleBinding", "RoleBinding", "Namespace", "HorizontalPodAutoscaler":
			// OLM creates the ServiceAccount and the bindings from the CSV and installs into a
			// namespace the user picks; the HPA belongs to a sample, not to the operator.
		default:
			return nil, fmt.Errorf("config/manifests renders a %s %q the bundle generator does not place; handle it in tests/tools/bundlegen/gen", u.GetKind(), u.GetName())
		}
	}
	switch {
	case in.csv == nil:
		return nil, fmt.Errorf("config/manifests renders no ClusterServiceVersion base")
	case in.deployment == nil:
		return nil, fmt.Errorf("config/manifests renders no operator Deployment")
	case in.scorecard == nil:
		return nil, fmt.Errorf("config/manifests renders no scorecard Configuration")
	case len(in.crds) == 0:
		return nil, fmt.Errorf("config/manifests renders no CRDs")
	}
	fleet, err := ReadObjects(filepath.Join(configDir, fleetRoleFile))
	if err != nil {
		return nil, err
	}
	for _, u := range fleet {
		if u.GetKind() == "Role" {
			in.fleetRoles = append(in.fleetRoles, u)
		}
	}
	if len(in.fleetRoles) != 1 {
		return nil, fmt.Errorf("%s must hold exactly one Role, found %d", fleetRoleFile, len(in.fleetRoles))
	}
	sort.SliceStable(in.crds, func(i, j int) bool { return in.crds[i].GetName() < in.crds[j].GetName() })
	return in, nil
}

// readerRole: a ClusterRole whose every rule names only nonResourceURLs (the metrics reader).
// It is for the identities that read the operator, not the operator's own rights.
func readerRole(u *unstructured.Unstructured) bool {
	rs, _, _ := unstructured.NestedSlice(u.Object, "rules")
	for _, r := range rs {
		rule, _ := r.(map[string]any)
		urls, _, _ := unstructured.NestedStringSlice(rule, "nonResourceURLs")
		if len(urls) == 0 || rule["resources"] != nil || rule["apiGroups"] != nil {
			return false
		}
	}
	return len(rs) > 0
}

func annotationsYAML(o Options, openShift string) []byte {
	var sb strings.Builder
	sb.WriteString("annotations:\n")
	for _, a := range o.Annotations(openShift) {
		fmt.Fprintf(&sb, "  %s: %s\n", a.Key, a.Value)
	}
	return []byte(sb.String())
}

func dockerfile(o Options, openShift string) []byte {
	var sb strings.Builder
	sb.WriteString("# Generated by tests/tools/bundlegen (make bundle); do not edit. The labels equal\n")
	sb.WriteString("# bundle/metadata/annotations.yaml.\nFROM scratch\n\n")
	for _, a := range o.Annotations(openShift) {
		fmt.Fprintf(&sb, "LABEL %s=%s\n", a.Key, a.Value)
	}
	dir := strings.TrimSuffix(filepath.ToSlash(o.ContextBundleDir), "/")
	fmt.Fprintf(&sb, "\nCOPY %s/manifests /manifests/\n", dir)
	fmt.Fprintf(&sb, "COPY %s/metadata /metadata/\n", dir)
	fmt.Fprintf(&sb, "COPY %s/tests/scorecard /tests/scorecard/\n", dir)
	return []byte(sb.String())
}

// scorecardConfig points every test of config/scorecard at the scorecard-test image.
func scorecardConfig(o Options, base *unstructured.Unstructured) (map[string]any, error) {
	cfg := base.DeepCopy()
	cfg.SetNamespace("")
	stages, _, err := unstructured.NestedSlice(cfg.Object, "stages")
	if err != nil || len(stages) == 0 {
		return nil, fmt.Errorf("scorecard configuration has no stages")
	}
	for _, s := range stages {
		tests, _, _ := unstructured.NestedSlice(s.(map[string]any), "tests")
		for _, t := range tests {
			tm := t.(map[string]any)
			if tm["image"] == scorecardImagePlaceholder {
				tm["image"] = o.ScorecardImage
			}
		}
		if err := unstructured.SetNestedSlice(s.(map[string]any), tests, "tests"); err != nil {
			return nil, err
		}
	}
	if err := unstructured.SetNestedSlice(cfg.Object, stages, "stages"); err != nil {
		return nil, err
	}
	return cfg.Object, nil
}

// almExamples is the alm-examples annotation: the sample fleets and previews as a JSON array.
func almExamples(examples []*unstructured.Unstructured) (string, error) {
	list := make([]map[string]any, 0, len(examples))
	for _, e := range examples {
		c := e.DeepCopy()
		c.SetNamespace("")
		list = append(list, c.Object)
	}
	raw, err := json.MarshalIndent(list, "", "  ")
	return string(raw), err
}
