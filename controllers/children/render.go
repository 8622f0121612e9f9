package children

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// FieldOwner is the one server-side apply field manager of every child.
const FieldOwner = "celld-operator"

// Renderer renders the fleet chart. It loads the chart once and remembers, per fleet UID, the
// last render and the hash of the values it came from, so a settled fleet costs one values
// hash and a copy instead of a template run. It is safe for concurrent use.
type Renderer struct {
	chart     *chart.Chart
	schema    *jsonschema.Schema
	overrides map[string]string

	mu      sync.Mutex
	cache   map[types.UID]cachedRender
	renders int // template runs, for tests of the cache
}

type cachedRender struct {
	key   string
	owner types.NamespacedName // the fleet's key, for ForgetFleet
	objs  []*unstructured.Unstructured
}

// NewRenderer loads the embedded chart at chartPath, its repository path (helm-charts/...), as a
// watches.yaml entry names it. overrideValues (the entry's --set style overrides) are applied
// on top of the computed values on every render.
func NewRenderer(chartPath string, overrideValues map[string]string) (*Renderer, error) {
	c, err := loadChart(chartPath)
	if err != nil {
		return nil, err
	}
	schema, err := compileSchema(c)
	if err != nil {
		return nil, err
	}
	return &Renderer{chart: c, schema: schema, overrides: overrideValues, cache: map[types.UID]cachedRender{}}, nil
}

// NewFleetRenderer is NewRenderer for helm-charts/celld-fleet without overrides.
func NewFleetRenderer() (*Renderer, error) {
	return NewRenderer(FleetChart, nil)
}

// Render returns the fleet's children in install order, each stamped with the fleet's namespace,
// UID label, controller reference and the hash annotation the Applier compares. The returned
// objects are the caller's to modify.
//
// A fleet whose NetworkPolicy enforcement is not attested renders nothing and gets a
// BlockedError (IsolationUnverified): a policy the CNI ignores would isolate nothing, and not
// applying keeps any existing route and policy as they are.
func (r *Renderer) Render(f *v1.CelldFleet, facts OperatorFacts) ([]*unstructured.Unstructured, error) {
	if !facts.NetworkPolicyEnforced {
		return nil, &BlockedError{
			Reason:  v1.ReasonIsolationUnverified,
			Message: "Administrator must verify a NetworkPolicy enforcing CNI and enable --network-policy-enforced before provisioning",
		}
	}
	vals, err := chartValues(f, facts)
	if err != nil {
		return nil, &BlockedError{Reason: v1.ReasonInvalidConfiguration, Message: err.Error()}
	}
	if err := r.applyOverrides(vals); err != nil {
		return nil, err
	}
	key, err := valuesKey(vals)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	hit, ok := r.cache[f.UID]
	r.mu.Unlock()
	if ok && hit.key == key {
		return deepCopyAll(hit.objs), nil
	}

	objs, err := r.render(f, vals)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.cache[f.UID] = cachedRender{key: key, owner: types.NamespacedName{Namespace: f.Namespace, Name: f.Name}, objs: objs}
	r.renders++
	r.mu.Unlock()
	return deepCopyAll(objs), nil
}

// Forget drops a fleet's cached render; call it when the fleet is gone.
func (r *Renderer) Forget(uid types.UID) {
	r.mu.Lock()
	delete(r.cache, uid)
	r.mu.Unlock()
}

// ForgetFleet drops the cached renders of every fleet with this key (a fleet that is gone,
// known by name only), so the cache holds live fleets alone.
func (r *Renderer) ForgetFleet(fleet types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, c := range r.cache {
		if c.owner == fleet {
			delete(r.cache, uid)
		}
	}
}

// Cached is the number of fleets whose render is cached.
func (r *Renderer) Cached() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache)
}

func (r *Renderer) applyOverrides(vals map[string]any) error {
	for k, v := range r.overrides {
		if err := strvals.ParseInto(k+"="+os.ExpandEnv(v), vals); err != nil {
			return fmt.Errorf("watches overrideValues %s: %w", k, err)
		}
	}
	return nil
}

// valuesKey hashes the values; encoding/json sorts map keys, so equal values give equal keys.
func valuesKey(vals map[string]any) (string, error) {
	b, err := json.Marshal(vals)
	if err != nil {
		return "", fmt.Errorf("encode chart values: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func (r *Renderer) render(f *v1.CelldFleet, vals map[string]any) ([]*unstructured.Unstructured, error) {
	// Helm compiles values.schema.json on every call, a third of a render; the schema was
	// compiled once in NewRenderer, so Helm's own validation is skipped and this one runs on
	// the same coalesced values.
	top, err := chartutil.ToRenderValuesWithSchemaValidation(r.chart, vals,
		chartutil.ReleaseOptions{Name: f.Name, Namespace: f.Namespace, IsInstall: true}, nil, true)
	if err != nil {
		return nil, fmt.Errorf("chart %s values: %w", r.chart.Name(), err)
	}
	if r.schema != nil {
		coalesced, _ := top["Values"].(chartutil.Values)
		if err := r.schema.Validate(coalesced.AsMap()); err != nil {
			return nil, fmt.Errorf("chart %s values do not meet values.schema.json: %w", r.chart.Name(), err)
		}
	}
	rendered, err := engine.Engine{Strict: true}.Render(r.chart, top)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", r.chart.Name(), err)
	}
	for name := range rendered {
		// NOTES.txt is text for a human after `helm install`, never an object.
		if path.Base(name) == "NOTES.txt" {
			delete(rendered, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(rendered, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", r.chart.Name(), err)
	}
	if len(hooks) > 0 {
		// Nothing runs hooks here; a hook in this chart would silently never happen.
		return nil, fmt.Errorf("chart %s renders hook %s; hooks are not supported", r.chart.Name(), hooks[0].Name)
	}
	objs := make([]*unstructured.Unstructured, 0, len(manifests))
	for _, m := range manifests {
		u, err := decode(m.Content)
		if err != nil {
			return nil, fmt.Errorf("chart %s %s: %w", r.chart.Name(), m.Name, err)
		}
		if u == nil {
			continue
		}
		if err := stamp(u, f); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// decode turns one YAML document into an object. Going through JSON gives int64 numbers, the
// same representation the API server's responses decode to, so desired and live compare.
func decode(doc string) (*unstructured.Unstructured, error) {
	if strings.TrimSpace(doc) == "" {
		return nil, nil
	}
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, err
	}
	if string(j) == "null" {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	return u, nil
}

// stamp forces what the Go side guarantees whatever the templates say: the fleet namespace, the
// UID label (the proof of ownership) and the hash of the desired object. Children carry no
// owner reference on purpose: with one, a foreground or background cascade lets the garbage
// collector delete the NetworkPolicy, Services and PDB while members still drain, opening peer
// isolation during deletion. The deletion phase removes them itself once the last member is
// gone.
func stamp(u *unstructured.Unstructured, f *v1.CelldFleet) error {
	if u.GetName() == "" || u.GetKind() == "" {
		return errors.New("rendered object without kind or name")
	}
	u.SetNamespace(f.Namespace)
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.LabelFleetUID] = string(f.UID)
	u.SetLabels(labels)
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1.AnnotationSpecHash] = hex.EncodeToString(sum[:16])
	u.SetAnnotations(ann)
	return nil
}

// compileSchema compiles the chart's values.schema.json once; nil when the chart has none.
// Remote references are not loaded: the schema must be self-contained.
func compileSchema(c *chart.Chart) (*jsonschema.Schema, error) {
	if len(c.Schema) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.Schema))
	if err != nil {
		return nil, fmt.Errorf("chart %s values.schema.json: %w", c.Name(), err)
	}
	compiler := jsonschema.NewCompiler()
	const url = "file:///values.schema.json"
	if err := compiler.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("chart %s values.schema.json: %w", c.Name(), err)
	}
	schema, err := compiler.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("chart %s values.schema.json: %w", c.Name(), err)
	}
	return schema, nil
}

func deepCopyAll(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
