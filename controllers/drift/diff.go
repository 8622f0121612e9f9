package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// maxPaths bounds the paths Diff names: enough to say in a log line what was edited.
const maxPaths = 8

// Content is the part of an object that drift is judged on: everything but status and the
// server's bookkeeping in metadata (resourceVersion, managedFields, generation, timestamps),
// with metadata reduced to labels, annotations and owner references.
func Content(obj runtime.Object) (map[string]any, error) {
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = u.Object
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, fmt.Errorf("convert %T: %w", obj, err)
		}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "status", "apiVersion", "kind":
		case "metadata":
			md, _ := v.(map[string]any)
			kept := map[string]any{}
			for _, f := range []string{"labels", "annotations", "ownerReferences"} {
				if x, ok := md[f]; ok && !empty(x) {
					kept[f] = x
				}
			}
			out[k] = kept
		default:
			out[k] = v
		}
	}
	return out, nil
}

// Diff names the paths at which b differs from a ("+path" only in b, "-path" only in a,
// "~path" changed), at most maxPaths of them and then a count; nil when they are equal. An
// empty value and an absent one differ: a NetworkPolicy peer's `namespaceSelector: {}` selects
// every namespace, and its absence only the policy's own. Compare contents that took the same
// path (both from the API server's JSON, or both converted from typed objects).
func Diff(a, b map[string]any) []string {
	var out []string
	diff("", a, b, &out)
	slices.Sort(out)
	if len(out) > maxPaths {
		out = append(out[:maxPaths], fmt.Sprintf("and %d more", len(out)-maxPaths))
	}
	return out
}

func diff(path string, a, b any, out *[]string) {
	if a == nil && b == nil {
		return
	}
	am, aMap := a.(map[string]any)
	bm, bMap := b.(map[string]any)
	if aMap && bMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			diff(join(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aList := a.([]any)
	bl, bList := b.([]any)
	if aList && bList {
		for i := range max(len(al), len(bl)) {
			var x, y any
			if i < len(al) {
				x = al[i]
			}
			if i < len(bl) {
				y = bl[i]
			}
			if i >= len(al) {
				*out = append(*out, "+"+path+"["+strconv.Itoa(i)+"]")
				continue
			}
			if i >= len(bl) {
				*out = append(*out, "-"+path+"["+strconv.Itoa(i)+"]")
				continue
			}
			diff(path+"["+strconv.Itoa(i)+"]", x, y, out)
		}
		return
	}
	switch {
	case a == nil:
		*out = append(*out, "+"+path)
	case b == nil:
		*out = append(*out, "-"+path)
	case !reflect.DeepEqual(a, b):
		*out = append(*out, "~"+path)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// fingerprint identifies a pair of contents: the merged rendering and the live object.
func fingerprint(want, live map[string]any) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h) // maps encode with sorted keys, so equal contents hash alike
	if err := enc.Encode(want); err != nil {
		return "", err
	}
	if err := enc.Encode(live); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
