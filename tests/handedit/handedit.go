// Package handedit generates random hand edits of Kubernetes objects, of the shapes people and
// tools make: keys added at any depth (inside list items too), keys removed, scalars changed,
// list items reordered or duplicated, labels and annotations added or changed, on the object
// and on a Pod template. The drift property tests apply each edit to a real API server, run
// the operator, and check that what the operator renders came back.
//
// Random keys would be dropped by the API server as unknown fields, so additions come from a
// catalogue of real optional fields per kind (Additions); every other operation is generic.
// An edit the API server refuses is simply not an edit: callers count and skip it.
package handedit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Addition is a real optional field: Key with Value set on every map matching Path, where
// "[*]" matches each item of a list ("spec.ingress[*].from[*]").
type Addition struct {
	Path  string
	Key   string
	Value any
}

// Edit is one generated edit.
type Edit struct {
	// What the edit did, for failure messages ("+spec.ingress[0].from[0].namespaceSelector").
	What string
	// Foreign: the edit is of a label or annotation the operator does not set, which the
	// operator must leave alone.
	Foreign bool
}

// Operation names, for counting what a run covered.
const (
	OpAdd          = "add"
	OpRemove       = "remove"
	OpScalar       = "scalar"
	OpReorder      = "reorder"
	OpDuplicate    = "duplicate"
	OpOwnLabel     = "own-label"
	OpForeignLabel = "foreign-label"
	OpForeignAnno  = "foreign-annotation"
	OpTemplateMeta = "template-metadata"
)

// Ops are every operation Random chooses from.
var Ops = []string{OpAdd, OpRemove, OpScalar, OpReorder, OpDuplicate, OpOwnLabel, OpForeignLabel, OpForeignAnno, OpTemplateMeta}

// Random edits obj in place with operation op and reports what it did; ok is false when obj
// has nothing this operation can edit. ownLabels are the label keys the operator sets.
func Random(rng *rand.Rand, obj *unstructured.Unstructured, op string, adds []Addition, ownLabels []string) (Edit, bool) {
	spec, _ := obj.Object["spec"].(map[string]any)
	if spec == nil {
		return Edit{}, false
	}
	switch op {
	case OpAdd:
		return add(rng, obj.Object, adds)
	case OpRemove:
		paths := keyPaths(spec, "spec")
		if len(paths) == 0 {
			return Edit{}, false
		}
		p := paths[rng.IntN(len(paths))]
		parent, key := p.parent, p.key
		delete(parent, key)
		return Edit{What: "-" + p.path}, true
	case OpScalar:
		leaves := scalarPaths(spec, "spec")
		if len(leaves) == 0 {
			return Edit{}, false
		}
		l := leaves[rng.IntN(len(leaves))]
		l.set(changed(rng, l.value))
		return Edit{What: "~" + l.path}, true
	case OpReorder, OpDuplicate:
		lists := listPaths(spec, "spec", op == OpReorder)
		if len(lists) == 0 {
			return Edit{}, false
		}
		l := lists[rng.IntN(len(lists))]
		items := slices.Clone(l.items)
		if op == OpReorder {
			i := rng.IntN(len(items))
			j := (i + 1 + rng.IntN(len(items)-1)) % len(items)
			items[i], items[j] = items[j], items[i]
			l.set(items)
			return Edit{What: fmt.Sprintf("%s: swapped items %d and %d", l.path, i, j)}, true
		}
		i := rng.IntN(len(items))
		l.set(append(items, runtimeCopy(items[i])))
		return Edit{What: fmt.Sprintf("+%s[%d] (a copy of item %d)", l.path, len(items), i)}, true
	case OpOwnLabel:
		labels := obj.GetLabels()
		var keys []string
		for _, k := range ownLabels {
			if _, ok := labels[k]; ok {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return Edit{}, false
		}
		k := keys[rng.IntN(len(keys))]
		labels[k] = labels[k] + "-edited"
		obj.SetLabels(labels)
		return Edit{What: "~metadata.labels." + k}, true
	case OpForeignLabel, OpForeignAnno:
		k := fmt.Sprintf("example.com/hand-%d", rng.IntN(1000))
		if op == OpForeignLabel {
			m := obj.GetLabels()
			if m == nil {
				m = map[string]string{}
			}
			m[k] = "yes"
			obj.SetLabels(m)
			return Edit{What: "+metadata.labels." + k, Foreign: true}, true
		}
		m := obj.GetAnnotations()
		if m == nil {
			m = map[string]string{}
		}
		m[k] = "yes"
		obj.SetAnnotations(m)
		return Edit{What: "+metadata.annotations." + k, Foreign: true}, true
	case OpTemplateMeta:
		tmpl, ok := spec["template"].(map[string]any)
		if !ok {
			return Edit{}, false
		}
		md, _ := tmpl["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			tmpl["metadata"] = md
		}
		field := []string{"labels", "annotations"}[rng.IntN(2)]
		m, _ := md[field].(map[string]any)
		if m == nil {
			m = map[string]any{}
			md[field] = m
		}
		k := fmt.Sprintf("example.com/hand-%d", rng.IntN(1000))
		m[k] = "yes"
		return Edit{What: "+spec.template.metadata." + field + "." + k}, true
	}
	return Edit{}, false
}

func add(rng *rand.Rand, obj map[string]any, adds []Addition) (Edit, bool) {
	type target struct {
		m    map[string]any
		path string
		a    Addition
	}
	var targets []target
	for _, a := range adds {
		for _, m := range match(obj, "", strings.Split(a.Path, ".")) {
			if _, exists := m.m[a.Key]; !exists {
				targets = append(targets, target{m.m, m.path, a})
			}
		}
	}
	if len(targets) == 0 {
		return Edit{}, false
	}
	t := targets[rng.IntN(len(targets))]
	t.m[t.a.Key] = runtimeCopy(t.a.Value)
	return Edit{What: "+" + t.path + "." + t.a.Key}, true
}

type matched struct {
	m    map[string]any
	path string
}

// match finds the maps at a dotted path whose segments may end in "[*]".
func match(v any, path string, segs []string) []matched {
	if len(segs) == 0 {
		if m, ok := v.(map[string]any); ok {
			return []matched{{m, path}}
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	seg, each := strings.CutSuffix(segs[0], "[*]")
	next := m[seg]
	p := join(path, seg)
	if !each {
		return match(next, p, segs[1:])
	}
	items, _ := next.([]any)
	var out []matched
	for i, it := range items {
		out = append(out, match(it, p+"["+strconv.Itoa(i)+"]", segs[1:])...)
	}
	return out
}

type keyPath struct {
	parent map[string]any
	key    string
	path   string
}

func keyPaths(v any, path string) []keyPath {
	var out []keyPath
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := join(path, k)
			out = append(out, keyPath{x, k, p})
			out = append(out, keyPaths(c, p)...)
		}
	case []any:
		for i, c := range x {
			out = append(out, keyPaths(c, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return out
}

type leaf struct {
	path  string
	value any
	set   func(any)
}

func scalarPaths(v any, path string) []leaf {
	var out []leaf
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			switch c.(type) {
			case map[string]any, []any:
				out = append(out, scalarPaths(c, join(path, k))...)
			default:
				out = append(out, leaf{join(path, k), c, func(n any) { x[k] = n }})
			}
		}
	case []any:
		for i, c := range x {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch c.(type) {
			case map[string]any, []any:
				out = append(out, scalarPaths(c, p)...)
			default:
				out = append(out, leaf{p, c, func(n any) { x[i] = n }})
			}
		}
	}
	return out
}

type list struct {
	path  string
	items []any
	set   func([]any)
}

// listPaths finds lists with at least one item (two when they are to be reordered).
func listPaths(v any, path string, needTwo bool) []list {
	var out []list
	minLen := 1
	if needTwo {
		minLen = 2
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := join(path, k)
			if l, ok := c.([]any); ok && len(l) >= minLen {
				out = append(out, list{p, l, func(n []any) { x[k] = n }})
			}
			out = append(out, listPaths(c, p, needTwo)...)
		}
	case []any:
		for i, c := range x {
			out = append(out, listPaths(c, path+"["+strconv.Itoa(i)+"]", needTwo)...)
		}
	}
	return out
}

// changed returns another value of the same type.
func changed(rng *rand.Rand, v any) any {
	switch x := v.(type) {
	case bool:
		return !x
	case int64:
		return x + 1 + int64(rng.IntN(3))
	case float64:
		return x + 1
	case string:
		return x + "x"
	}
	return "changed"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// Write applies an edit as a person or a tool would: a full Update under the manager
// "kubectl-edit" (kubectl edit, kubectl replace), or a forced server-side apply of the edited
// object's labels, annotations and spec under a manager of its own ("gitops-tool").
func Write(ctx context.Context, c client.Client, edited *unstructured.Unstructured, viaApply bool) error {
	if !viaApply {
		return c.Update(ctx, edited, client.FieldOwner("kubectl-edit"))
	}
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": edited.GetAPIVersion(), "kind": edited.GetKind(),
		"metadata": map[string]any{"name": edited.GetName(), "namespace": edited.GetNamespace()},
		"spec":     edited.Object["spec"],
	}}
	if l := edited.GetLabels(); len(l) > 0 {
		cfg.SetLabels(l)
	}
	if a := edited.GetAnnotations(); len(a) > 0 {
		cfg.SetAnnotations(a)
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(cfg), client.FieldOwner("gitops-tool"), client.ForceOwnership)
}

// Via names how Write applied an edit.
func Via(viaApply bool) string {
	if viaApply {
		return "server-side apply"
	}
	return "update"
}
