// Package admissionfuzz sends seeded random mutations of the CelldFleet samples to a real
// kube-apiserver and checks that admission and the operator agree: a refusal names the field it
// refuses, an admitted object is admitted by Validate too, and the operator renders and
// reconciles it without a panic or an error loop. The mutator is a pure function of its seed.
package admissionfuzz

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Object is a Kubernetes object as generic JSON: maps, lists, strings, float64 or int64
// numbers, booleans and nil.
type Object = map[string]any

// Mutation records one change the mutator made: where (a field path such as
// spec.placement.zones[1], as the API server spells paths) and what.
type Mutation struct {
	Path string
	Kind string
	// Key is the last map key of the path (the field's own name), for matching refusal
	// messages that name a field without its full path.
	Key string
}

func (m Mutation) String() string { return m.Kind + " " + m.Path }

// Kinds of mutation.
const (
	KindWrongType    = "wrong-type"
	KindNull         = "null"
	KindEmptyString  = "empty-string"
	KindHugeString   = "huge-string"
	KindUnicode      = "unicode"
	KindEdgeString   = "edge-string"
	KindNumber       = "number"
	KindHugeList     = "huge-list"
	KindDuplicate    = "duplicate-item"
	KindEmptyList    = "empty-list"
	KindDelete       = "delete"
	KindEmptied      = "emptied-object"
	KindUnknownField = "unknown-field"
	KindGraft        = "graft"
)

// Mutate returns a mutated deep copy of base and the mutations applied (one to three). It is
// a pure function of its arguments: the same base, donors and seed give the same object.
// donors are other samples whose spec fields may be grafted onto base, so that fields absent
// from one sample are exercised together with another's (routing on a PersistentFleet).
// apiVersion, kind and metadata other than name are never touched: they select the endpoint
// and the test's namespace, not the admission rules.
func Mutate(base Object, donors []Object, seed uint64) (Object, []Mutation) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	obj := deepCopy(base).(Object)
	n := 1
	switch r := rng.IntN(10); {
	case r >= 9:
		n = 3
	case r >= 7:
		n = 2
	}
	var out []Mutation
	for range n {
		if m, ok := mutateOnce(rng, obj, donors); ok {
			out = append(out, m)
		}
	}
	return obj, out
}

// segment is one step of a path: a map key (string) or a list index (int).
type segment = any

type location struct {
	path  []segment
	value any
}

// locations lists every mutable node of obj: metadata.name and everything under spec.
func locations(obj Object) []location {
	var out []location
	if md, ok := obj["metadata"].(Object); ok {
		if v, ok := md["name"]; ok {
			out = append(out, location{[]segment{"metadata", "name"}, v})
		}
	}
	if spec, ok := obj["spec"]; ok {
		walk([]segment{"spec"}, spec, &out)
	}
	return out
}

func walk(path []segment, v any, out *[]location) {
	*out = append(*out, location{slices.Clone(path), v})
	switch t := v.(type) {
	case Object:
		for _, k := range sortedKeys(t) {
			walk(append(path, k), t[k], out)
		}
	case []any:
		for i, e := range t {
			walk(append(path, i), e, out)
		}
	}
}

func sortedKeys(m Object) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FormatPath spells a path as the API server does: spec.env[0].name.
func FormatPath(path []segment) string {
	var b strings.Builder
	for _, s := range path {
		switch t := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(t)
		case int:
			b.WriteString("[" + strconv.Itoa(t) + "]")
		}
	}
	return b.String()
}

func lastKey(path []segment) string {
	for i := len(path) - 1; i >= 0; i-- {
		if k, ok := path[i].(string); ok {
			return k
		}
	}
	return ""
}

// set replaces the node at path (which must exist, or be a new key of an existing map).
func set(obj Object, path []segment, v any) {
	parent := get(obj, path[:len(path)-1])
	switch p := parent.(type) {
	case Object:
		p[path[len(path)-1].(string)] = v
	case []any:
		p[path[len(path)-1].(int)] = v
	}
}

func get(obj Object, path []segment) any {
	var cur any = obj
	for _, s := range path {
		switch t := s.(type) {
		case string:
			cur = cur.(Object)[t]
		case int:
			cur = cur.([]any)[t]
		}
	}
	return cur
}

func mutateOnce(rng *rand.Rand, obj Object, donors []Object) (Mutation, bool) {
	if len(donors) > 0 && rng.IntN(8) == 0 {
		if m, ok := graft(rng, obj, donors[rng.IntN(len(donors))]); ok {
			return m, true
		}
	}
	locs := locations(obj)
	if len(locs) == 0 {
		return Mutation{}, false
	}
	loc := locs[rng.IntN(len(locs))]
	mut := func(kind string, path []segment) Mutation {
		return Mutation{Path: FormatPath(path), Kind: kind, Key: lastKey(path)}
	}
	// A map can gain an unknown field; any node but spec itself can be deleted (a list item
	// is removed from its list).
	if m, ok := loc.value.(Object); ok && rng.IntN(3) == 0 {
		name := unknownName(rng)
		m[name] = scalar(rng)
		return mut(KindUnknownField, append(slices.Clone(loc.path), name)), true
	}
	if len(loc.path) > 1 && loc.path[0] == "spec" && rng.IntN(7) == 0 {
		del(obj, loc.path)
		return mut(KindDelete, loc.path), true
	}
	switch rng.IntN(4) {
	case 0:
		set(obj, loc.path, wrongType(rng, loc.value))
		return mut(KindWrongType, loc.path), true
	case 1:
		if rng.IntN(3) == 0 {
			set(obj, loc.path, nil)
			return mut(KindNull, loc.path), true
		}
	}
	switch v := loc.value.(type) {
	case string:
		kind, s := mutateString(rng, v)
		set(obj, loc.path, s)
		return mut(kind, loc.path), true
	case float64, int64, int:
		set(obj, loc.path, number(rng, v))
		return mut(KindNumber, loc.path), true
	case []any:
		kind, l := mutateList(rng, v)
		set(obj, loc.path, l)
		return mut(kind, loc.path), true
	case Object:
		// a map: replace it by a huge list or an empty map
		if rng.IntN(2) == 0 {
			set(obj, loc.path, Object{})
			return mut(KindEmptied, loc.path), true
		}
		set(obj, loc.path, hugeList(rng, v))
		return mut(KindHugeList, loc.path), true
	}
	set(obj, loc.path, wrongType(rng, loc.value))
	return mut(KindWrongType, loc.path), true
}

// del removes the node at path: a map key, or a list item.
func del(obj Object, path []segment) {
	parentPath := path[:len(path)-1]
	switch p := get(obj, parentPath).(type) {
	case Object:
		delete(p, path[len(path)-1].(string))
	case []any:
		i := path[len(path)-1].(int)
		set(obj, parentPath, slices.Delete(slices.Clone(p), i, i+1))
	}
}

// graft copies one field of a donor (a spec field at any depth reached through maps only)
// onto obj, creating the objects that hold it and replacing obj's own value. Fields whose
// value obj already has are not drawn.
func graft(rng *rand.Rand, obj Object, donor Object) (Mutation, bool) {
	spec, ok := donor["spec"]
	if !ok {
		return Mutation{}, false
	}
	var all, fresh []location
	walk([]segment{"spec"}, spec, &all)
	for _, l := range all {
		if len(l.path) < 2 || !keysOnly(l.path) {
			continue
		}
		if cur, ok := lookup(obj, l.path); !ok || !reflect.DeepEqual(cur, l.value) {
			fresh = append(fresh, l)
		}
	}
	if len(fresh) == 0 {
		return Mutation{}, false
	}
	l := fresh[rng.IntN(len(fresh))]
	// The mutation is where obj changed: the outermost object the graft had to create (its
	// other required fields are missing there), else the field itself.
	changed := l.path
	cur := obj
	for i, k := range l.path[:len(l.path)-1] {
		next, ok := cur[k.(string)].(Object)
		if !ok {
			if len(changed) == len(l.path) {
				changed = l.path[:i+1]
			}
			next = Object{}
			cur[k.(string)] = next
		}
		cur = next
	}
	cur[lastKey(l.path)] = deepCopy(l.value)
	return Mutation{Path: FormatPath(changed), Kind: KindGraft, Key: lastKey(changed)}, true
}

func keysOnly(path []segment) bool {
	for _, s := range path {
		if _, ok := s.(string); !ok {
			return false
		}
	}
	return true
}

// lookup returns the node at a path of map keys, if there is one.
func lookup(obj Object, path []segment) (any, bool) {
	var cur any = obj
	for _, s := range path {
		m, ok := cur.(Object)
		if !ok {
			return nil, false
		}
		if cur, ok = m[s.(string)]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func unknownName(rng *rand.Rand) string {
	names := []string{"foo", "Replicas", "replica", "zone", "storageclassname", "x-extra", "sizeGB", "überField", "_", "apiVersion"}
	return names[rng.IntN(len(names))]
}

// scalar is a random JSON scalar.
func scalar(rng *rand.Rand) any {
	switch rng.IntN(5) {
	case 0:
		return "value"
	case 1:
		return int64(rng.IntN(1000))
	case 2:
		return true
	case 3:
		return nil
	default:
		return -1.5
	}
}

// wrongType replaces v by a value of another JSON type.
func wrongType(rng *rand.Rand, v any) any {
	candidates := []any{"3", int64(3), 2.5, true, Object{"a": "b"}, []any{"x"}, []any{}, Object{}}
	for {
		c := candidates[rng.IntN(len(candidates))]
		if jsonType(c) != jsonType(v) {
			return c
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64, int64, int:
		return "number"
	case bool:
		return "bool"
	case Object:
		return "object"
	case []any:
		return "list"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// Unicode samples: accents, CJK, emoji, right-to-left, combining marks, a zero-width joiner,
// a byte-order mark, a NUL and other control characters, and look-alikes of ASCII letters.
var unicodeBits = []string{"é", "ü", "名前", "🚀", "👩‍💻", "\u202e", "a\u0301", "\u200d", "\ufeff", "\x00", "\t", "\n", "ｓ", "ɑ", "Ω", "\u00a0"}

func mutateString(rng *rand.Rand, s string) (string, string) {
	switch rng.IntN(6) {
	case 0:
		return KindEmptyString, ""
	case 1:
		sizes := []int{41, 64, 129, 254, 513, 4097, 65537}
		n := sizes[rng.IntN(len(sizes))]
		fill := "a"
		if s != "" && rng.IntN(2) == 0 {
			fill = s
		}
		return KindHugeString, strings.Repeat(fill, n/len(fill)+1)[:n]
	case 2:
		bit := unicodeBits[rng.IntN(len(unicodeBits))]
		switch rng.IntN(3) {
		case 0:
			return KindUnicode, bit + s
		case 1:
			return KindUnicode, s + bit
		default:
			if s == "" {
				return KindUnicode, bit
			}
			i := rng.IntN(len(s))
			return KindUnicode, s[:i] + bit + s[i:]
		}
	case 3:
		edges := []string{" ", s + " ", " " + s, strings.ToUpper(s), s + "-", "-" + s, s + ".", "*", "0", "-1", "null", "true", "10.0.0.1", "::1", "http://", s + "/" + s, "a@b", "${HOME}", "' OR 1=1 --"}
		return KindEdgeString, edges[rng.IntN(len(edges))]
	default:
		// a random change of one character
		if s == "" {
			return KindEdgeString, "x"
		}
		b := []byte(s)
		b[rng.IntN(len(b))] = "aZ09-_./:@"[rng.IntN(10)]
		return KindEdgeString, string(b)
	}
}

func number(rng *rand.Rand, v any) any {
	var x float64
	switch t := v.(type) {
	case float64:
		x = t
	case int64:
		x = float64(t)
	case int:
		x = float64(t)
	}
	choices := []any{int64(0), int64(-1), int64(x) + 1, int64(x) - 1, int64(x) * 1000, int64(1) << 31, int64(1)<<31 - 1,
		int64(1) << 53, int64(-1) << 62, 1e300, 0.5, x + 0.5, int64(101), int64(65536)}
	return choices[rng.IntN(len(choices))]
}

func mutateList(rng *rand.Rand, l []any) (string, []any) {
	switch rng.IntN(3) {
	case 0:
		return KindEmptyList, []any{}
	case 1:
		if len(l) > 0 {
			out := append(slices.Clone(l), deepCopy(l[rng.IntN(len(l))]))
			return KindDuplicate, out
		}
	}
	return KindHugeList, hugeList(rng, l)
}

// hugeList is a list far longer than any the schema allows: copies of an existing item with
// a numbered suffix when the items are strings (so that they stay distinct), else copies.
func hugeList(rng *rand.Rand, v any) []any {
	sizes := []int{7, 17, 33, 65, 101, 129, 1000, 2000}
	n := sizes[rng.IntN(len(sizes))]
	var item any = "x"
	if l, ok := v.([]any); ok && len(l) > 0 {
		item = l[rng.IntN(len(l))]
	} else if _, ok := v.(Object); ok {
		item = v
	}
	out := make([]any, n)
	for i := range out {
		if s, ok := item.(string); ok {
			out[i] = s + strconv.Itoa(i)
		} else {
			out[i] = deepCopy(item)
		}
	}
	return out
}

// deepCopy copies generic JSON.
func deepCopy(v any) any {
	switch t := v.(type) {
	case Object:
		out := make(Object, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// FromJSON decodes JSON into an Object, with integers as int64 (as the API machinery's
// unstructured objects hold them).
func FromJSON(data []byte) (Object, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	o, ok := numbers(v).(Object)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return o, nil
}

func numbers(v any) any {
	switch t := v.(type) {
	case Object:
		for k, e := range t {
			t[k] = numbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = numbers(e)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}
