package drift

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func policy() map[string]any {
	return map[string]any{
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "f"}},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "f"}}}},
				"ports": []any{map[string]any{"port": int64(8081), "protocol": "TCP"}},
			}},
		},
	}
}

func TestDiffNamesEveryShapeOfHandEdit(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{name: "nothing changed", edit: func(map[string]any) {}},
		{name: "an empty namespaceSelector added next to the fleet peer's podSelector admits every namespace", want: []string{"+spec.ingress[0].from[0].namespaceSelector"},
			edit: func(m map[string]any) {
				peer := m["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["from"].([]any)[0].(map[string]any)
				peer["namespaceSelector"] = map[string]any{}
			}},
		{name: "an endPort on the port opens a range", want: []string{"+spec.ingress[0].ports[0].endPort"},
			edit: func(m map[string]any) {
				m["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["endPort"] = int64(65535)
			}},
		{name: "a scalar changed", want: []string{"~spec.ingress[0].ports[0].port"},
			edit: func(m map[string]any) {
				m["spec"].(map[string]any)["ingress"].([]any)[0].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"] = int64(8080)
			}},
		{name: "a key removed", want: []string{"-spec.podSelector.matchLabels"},
			edit: func(m map[string]any) {
				delete(m["spec"].(map[string]any)["podSelector"].(map[string]any), "matchLabels")
			}},
		{name: "an extra list item", want: []string{"+spec.ingress[1]"},
			edit: func(m map[string]any) {
				s := m["spec"].(map[string]any)
				s["ingress"] = append(s["ingress"].([]any), map[string]any{"from": []any{}})
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := policy(), policy()
			c.edit(b)
			got := Diff(a, b)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Diff = %q, want %q", got, c.want)
			}
		})
	}
}

// An empty selector is not an absent one: `namespaceSelector: {}` beside a peer's podSelector
// admits every namespace. Treating them alike hid exactly that widening.
func TestDiffTellsAnEmptyValueFromAnAbsentOne(t *testing.T) {
	a := map[string]any{"spec": map[string]any{}}
	b := map[string]any{"spec": map[string]any{"namespaceSelector": map[string]any{}}}
	if got := Diff(a, b); !reflect.DeepEqual(got, []string{"+spec.namespaceSelector"}) {
		t.Fatalf("Diff = %q, want the added empty selector named", got)
	}
	if got := Diff(b, a); !reflect.DeepEqual(got, []string{"-spec.namespaceSelector"}) {
		t.Fatalf("Diff = %q, want the removed empty selector named", got)
	}
	c := map[string]any{"spec": map[string]any{"l": []any{"a"}}}
	d := map[string]any{"spec": map[string]any{"l": []any{"a", "b"}}}
	if got := Diff(c, d); !reflect.DeepEqual(got, []string{"+spec.l[1]"}) {
		t.Fatalf("Diff = %q", got)
	}
}

func TestDiffIsBoundedForLogLines(t *testing.T) {
	a, b := map[string]any{}, map[string]any{}
	for _, k := range strings.Split("a b c d e f g h i j k", " ") {
		b[k] = "x"
	}
	got := Diff(a, b)
	if len(got) != maxPaths+1 || got[maxPaths] != "and 3 more" {
		t.Fatalf("Diff = %q, want %d paths and a count", got, maxPaths)
	}
}

func TestContentIgnoresStatusAndServerBookkeeping(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "f", "resourceVersion": "7", "generation": int64(3),
			"managedFields": []any{map[string]any{"manager": "x"}}, "labels": map[string]any{"a": "b"}},
		"spec":   map[string]any{"clusterIP": "None"},
		"status": map[string]any{"loadBalancer": map[string]any{}},
	}}
	got, err := Content(u)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}, "spec": map[string]any{"clusterIP": "None"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Content = %v, want %v", got, want)
	}
}

func TestContentOfATypedObjectMatchesItsUnstructuredForm(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "f", Labels: map[string]string{"a": "b"}}}
	s.Spec.ServiceName = "f"
	got, err := Content(s)
	if err != nil {
		t.Fatal(err)
	}
	if got["spec"].(map[string]any)["serviceName"] != "f" || got["metadata"].(map[string]any)["labels"].(map[string]any)["a"] != "b" {
		t.Fatalf("Content = %v", got)
	}
	if _, ok := got["status"]; ok {
		t.Fatal("status must not count")
	}
}

func TestMergeKeepsWhatOthersSetAndTheOperatorWins(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{
			"name": "f", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
			"labels":          map[string]any{"webhook.example/added": "yes", "app": "hand-edited"},
			"annotations":     map[string]any{"other.example/note": "kept", "route.example/old": "stale"},
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "o1"}},
			"finalizers":      []any{"other.example/hold"},
		},
		"spec":   map[string]any{"clusterIP": "10.0.0.1", "externalIPs": []any{"1.2.3.4"}},
		"status": map[string]any{"loadBalancer": map[string]any{}},
	}}
	want := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "f", "namespace": "ns", "labels": map[string]any{"app": "f"},
			"annotations": map[string]any{"celld.example/hash": "h"}},
		"spec": map[string]any{"ports": []any{map[string]any{"port": int64(8080)}}},
	}}
	got := Merge(live, want, "route.example/old")
	if got.GetResourceVersion() != "42" || got.GetUID() != "u1" {
		t.Fatalf("the update must carry live's identity: rv=%q uid=%q", got.GetResourceVersion(), got.GetUID())
	}
	if l := got.GetLabels(); l["app"] != "f" || l["webhook.example/added"] != "yes" {
		t.Fatalf("labels = %v: the operator's value wins and others' labels stay", l)
	}
	if a := got.GetAnnotations(); a["other.example/note"] != "kept" || a["celld.example/hash"] != "h" || a["route.example/old"] != "" {
		t.Fatalf("annotations = %v", a)
	}
	if len(got.GetOwnerReferences()) != 1 || len(got.GetFinalizers()) != 1 {
		t.Fatalf("others' owner references and finalizers must stay: %v %v", got.GetOwnerReferences(), got.GetFinalizers())
	}
	spec := got.Object["spec"].(map[string]any)
	if _, ok := spec["externalIPs"]; ok {
		t.Fatal("a spec field the rendering lacks must not survive the merge")
	}
	if _, ok := got.Object["status"]; !ok {
		t.Fatal("status is carried over for kinds without a status subresource")
	}
	if live.GetLabels()["app"] != "hand-edited" {
		t.Fatal("Merge must not modify live")
	}
}

func TestANilDetectorRemembersNothing(t *testing.T) {
	var d *Detector
	o := types.NamespacedName{Namespace: "ns", Name: "o"}
	d.remember("u", o, "k")
	d.Forget(o)
	if d.verified("u", "k") || d.Len() != 0 {
		t.Fatal("a nil detector must remember nothing")
	}
	var z Detector
	f, g := types.NamespacedName{Namespace: "ns", Name: "f"}, types.NamespacedName{Namespace: "ns", Name: "g"}
	z.remember("u", f, "k")
	z.remember("v", g, "k")
	if !z.verified("u", "k") || z.verified("u", "other") {
		t.Fatal("a remembered pair is verified, another is not")
	}
	z.Forget(f)
	if z.verified("u", "k") || z.Len() != 1 {
		t.Fatal("Forget drops exactly the owner's entries")
	}
}
