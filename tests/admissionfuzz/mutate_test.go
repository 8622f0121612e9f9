package admissionfuzz

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func base() Object {
	o, err := FromJSON([]byte(`{"apiVersion":"celld.eric.dev/v1alpha1","kind":"CelldFleet","metadata":{"name":"f"},
		"spec":{"replicas":3,"storage":{"bucket":"b-1","region":"us-east-1"},
		"placement":{"zones":["us-east-1a","us-east-1b"],"azCount":2},"env":[{"name":"CELLD_LOG","value":"info"}]}}`))
	if err != nil {
		panic(err)
	}
	return o
}

func donor() Object {
	o, _ := FromJSON([]byte(`{"spec":{"routing":{"hostnames":["a.example.com"]}}}`))
	return o
}

func TestMutateIsAPureFunctionOfTheSeed(t *testing.T) {
	b := base()
	before, _ := json.Marshal(b)
	for seed := range uint64(500) {
		o1, m1 := Mutate(b, []Object{donor()}, seed)
		o2, m2 := Mutate(base(), []Object{donor()}, seed)
		if !reflect.DeepEqual(o1, o2) || !reflect.DeepEqual(m1, m2) {
			t.Fatalf("seed %d: two calls differ: %v %v", seed, m1, m2)
		}
	}
	if after, _ := json.Marshal(b); string(after) != string(before) {
		t.Fatalf("Mutate changed its input:\n%s\n%s", before, after)
	}
}

// TestMutateChangesTheObjectAndReportsWhere: every seed changes something, names a path of
// the object (or a key it added), never touches apiVersion, kind or metadata.namespace, and
// across seeds every kind of mutation occurs.
func TestMutateChangesTheObjectAndReportsWhere(t *testing.T) {
	kinds := map[string]int{}
	b := base()
	orig, _ := json.Marshal(b)
	for seed := range uint64(3000) {
		o, muts := Mutate(b, []Object{donor()}, seed)
		if len(muts) == 0 || len(muts) > 3 {
			t.Fatalf("seed %d: %d mutations", seed, len(muts))
		}
		for _, m := range muts {
			kinds[m.Kind]++
			if !strings.HasPrefix(m.Path, "spec") && !strings.HasPrefix(m.Path, "metadata.name") {
				t.Fatalf("seed %d: mutation outside spec and metadata.name: %v", seed, m)
			}
			if m.Key == "" || !strings.Contains(m.Path, m.Key) {
				t.Fatalf("seed %d: key %q does not belong to path %q", seed, m.Key, m.Path)
			}
		}
		if o["apiVersion"] != b["apiVersion"] || o["kind"] != b["kind"] {
			t.Fatalf("seed %d: apiVersion or kind changed", seed)
		}
		if _, ok := o["metadata"].(Object)["namespace"]; ok {
			t.Fatalf("seed %d: metadata.namespace set", seed)
		}
		data, _ := json.Marshal(o)
		if string(data) == string(orig) && len(muts) == 1 && !onlyNoOps(muts) { // two may cancel out
			t.Fatalf("seed %d: %v left the object unchanged", seed, muts)
		}
	}
	for _, k := range []string{KindWrongType, KindNull, KindEmptyString, KindHugeString, KindUnicode, KindEdgeString,
		KindNumber, KindHugeList, KindDuplicate, KindEmptyList, KindDelete, KindEmptied, KindUnknownField, KindGraft} {
		if kinds[k] == 0 {
			t.Errorf("no seed of 3000 made a %s mutation: %v", k, kinds)
		}
	}
}

// onlyNoOps: mutations that may legitimately reproduce the original value (a number or an
// edge string that happens to equal it, a graft of an identical field).
func onlyNoOps(muts []Mutation) bool {
	for _, m := range muts {
		switch m.Kind {
		case KindNumber, KindEdgeString, KindGraft, KindEmptyList, KindEmptied:
		default:
			return false
		}
	}
	return true
}

func TestHugeListsAndStringsAreHuge(t *testing.T) {
	var longest, largest int
	for seed := range uint64(3000) {
		o, muts := Mutate(base(), nil, seed)
		for _, m := range muts {
			if m.Kind != KindHugeList && m.Kind != KindHugeString {
				continue
			}
			data, _ := json.Marshal(o)
			if m.Kind == KindHugeString {
				longest = max(longest, len(data))
			} else {
				largest = max(largest, len(data))
			}
		}
	}
	if longest < 65537 || largest < 2000*4 {
		t.Fatalf("huge values are not huge: longest object with a huge string %d bytes, with a huge list %d", longest, largest)
	}
}

func TestFormatPath(t *testing.T) {
	if got := FormatPath([]segment{"spec", "env", 0, "name"}); got != "spec.env[0].name" {
		t.Fatal(got)
	}
}

func TestRefusalNamesAMutatedField(t *testing.T) {
	region := Mutation{Path: "spec.storage.region", Kind: KindEdgeString, Key: "region"}
	zone := Mutation{Path: "spec.placement.zones[1]", Kind: KindUnicode, Key: "zones"}
	storage := Mutation{Path: "spec.storage", Kind: KindDelete, Key: "storage"}
	name := Mutation{Path: "metadata.name", Kind: KindWrongType, Key: "name"}
	unknown := Mutation{Path: "spec.foo", Kind: KindUnknownField, Key: "foo"}
	secretName := Mutation{Path: "spec.telemetry.headersSecretKeyRef.name", Kind: KindEmptyString, Key: "name"}
	cause := func(field, msg string) metav1.StatusCause { return metav1.StatusCause{Field: field, Message: msg} }
	for _, c := range []struct {
		name  string
		r     Refusal
		muts  []Mutation
		named bool
	}{
		{"the field itself", Refusal{Causes: []metav1.StatusCause{cause("spec.storage.region", "Invalid value")}}, []Mutation{region}, true},
		{"the list holding the item", Refusal{Causes: []metav1.StatusCause{cause("spec.placement.zones", "bad")}}, []Mutation{zone}, true},
		{"a required field of a deleted object", Refusal{Causes: []metav1.StatusCause{cause("spec.storage.bucket", "Required value")}}, []Mutation{storage}, true},
		{"a cross-field rule naming the field", Refusal{Causes: []metav1.StatusCause{cause("spec.placement.zones", "must be zones of spec.storage.region")}}, []Mutation{region}, true},
		{"a metadata type error", Refusal{Message: "json: cannot unmarshal array into Go struct field ObjectMeta.name of type string"}, []Mutation{name}, true},
		{"an unknown field", Refusal{Message: `strict decoding error: unknown field "spec.foo"`}, []Mutation{unknown}, true},
		{"another field", Refusal{Causes: []metav1.StatusCause{cause("spec.replicas", "must be at most 100")}}, []Mutation{region, zone}, false},
		{"spec alone is no name", Refusal{Causes: []metav1.StatusCause{cause("spec", "something is wrong")}}, []Mutation{region}, false},
		{"a region-like word inside another", Refusal{Causes: []metav1.StatusCause{cause("spec.x", "subregional")}}, []Mutation{region}, false},
		{"a generic key needs its path", Refusal{Causes: []metav1.StatusCause{cause("metadata.name", "metadata.name must be a DNS label")}}, []Mutation{secretName}, false},
		{"no causes, no mention", Refusal{Message: "Internal error"}, []Mutation{region}, false},
	} {
		if _, got := c.r.Names(c.muts); got != c.named {
			t.Errorf("%s: Names = %v, want %v", c.name, got, c.named)
		}
	}
}
