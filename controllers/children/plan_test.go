package children

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestPlanChildren: the children's steps are a pure function of the reads. Rows name the reads
// (what the cache holds at each rendered name, the fleet's listed children) and the plan.
func TestPlanChildren(t *testing.T) {
	f := fleetIn(t, "bucket", "ns")
	core := []*unstructured.Unstructured{
		child(gvkService, f.Name, ""), child(gvkService, f.Name+"-members", ""), child(gvkNetworkPolicy, f.Name, ""), child(gvkPDB, f.Name, ""),
	}
	own := func(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
		return child(gvk, name, string(f.UID))
	}
	foreign := child(gvkService, f.Name, "someone-else")
	controlled := own(gvkPDB, f.Name)
	controlled.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x", UID: "other", Controller: ptr.To(true)}})
	deleting := own(gvkService, f.Name+"-old")
	deleting.SetDeletionTimestamp(new(metav1.Now()))
	all := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{own(gvkService, f.Name), own(gvkService, f.Name+"-members"), own(gvkNetworkPolicy, f.Name), own(gvkPDB, f.Name)}
	}
	for _, tc := range []struct {
		name    string
		lives   []*unstructured.Unstructured
		owned   []*unstructured.Unstructured
		steps   []string // "action Kind/name"
		refused string   // the refused child's "Kind/name" and a part of why
	}{
		{name: "a new fleet: every child is created, nothing read that is not there",
			lives: make([]*unstructured.Unstructured, 4),
			steps: []string{"create Service/" + f.Name, "create Service/" + f.Name + "-members", "create NetworkPolicy/" + f.Name, "create PodDisruptionBudget/" + f.Name}},
		{name: "a settled fleet: every child converges, nothing is pruned",
			lives: all(), owned: all(),
			steps: []string{"converge Service/" + f.Name, "converge Service/" + f.Name + "-members", "converge NetworkPolicy/" + f.Name, "converge PodDisruptionBudget/" + f.Name}},
		{name: "a child the cache does not hold yet is created beside those it holds",
			lives: []*unstructured.Unstructured{own(gvkService, f.Name), nil, own(gvkNetworkPolicy, f.Name), own(gvkPDB, f.Name)},
			steps: []string{"converge Service/" + f.Name, "create Service/" + f.Name + "-members", "converge NetworkPolicy/" + f.Name, "converge PodDisruptionBudget/" + f.Name}},
		{name: "a foreign object at a rendered name: refused, nothing written or pruned",
			lives: []*unstructured.Unstructured{foreign, nil, nil, nil}, owned: []*unstructured.Unstructured{own(gvkService, f.Name+"-old")},
			refused: "Service/" + f.Name + ": does not carry this fleet's"},
		{name: "an object another controller controls is refused even with the fleet's label",
			lives:   []*unstructured.Unstructured{nil, nil, nil, controlled},
			refused: "PodDisruptionBudget/" + f.Name + ": is controlled by Deployment x"},
		{name: "an owned child no longer rendered is pruned after the writes; the routing policy and one being deleted are not",
			lives: all(),
			owned: append(all(), own(gvkService, f.Name+"-stale"), own(gvkNetworkPolicy, f.Name+"-routing"), deleting, own(gvkNetworkPolicy, f.Name+"-members")),
			steps: []string{"converge Service/" + f.Name, "converge Service/" + f.Name + "-members", "converge NetworkPolicy/" + f.Name, "converge PodDisruptionBudget/" + f.Name,
				"prune Service/" + f.Name + "-stale", "prune NetworkPolicy/" + f.Name + "-members"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanChildren(f, core, tc.lives, tc.owned)
			if tc.refused != "" {
				if p.Refused == nil {
					t.Fatalf("nothing refused; steps %v", steps(p))
				}
				if got := p.Refused.Want.GetKind() + "/" + p.Refused.Want.GetName() + ": " + p.Refused.Why; !strings.HasPrefix(got, tc.refused) {
					t.Fatalf("refused %q, want %q", got, tc.refused)
				}
				if len(p.Steps) != 0 {
					t.Fatalf("a refused plan has steps %v", steps(p))
				}
				return
			}
			if p.Refused != nil {
				t.Fatalf("refused %s: %s", p.Refused.Want.GetName(), p.Refused.Why)
			}
			if got := steps(p); !slices.Equal(got, tc.steps) {
				t.Fatalf("steps\n got %v\nwant %v", got, tc.steps)
			}
			if again := steps(PlanChildren(f, core, tc.lives, tc.owned)); !slices.Equal(again, tc.steps) {
				t.Fatalf("the same reads planned %v the second time", again)
			}
			if n := len(p.writes()) + len(p.prunes()); n != len(p.Steps) {
				t.Fatalf("writes and prunes hold %d of %d steps", n, len(p.Steps))
			}
		})
	}
}

func steps(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, string(s.Action)+" "+s.Object())
	}
	return out
}

// child is an object of gvk at name in namespace ns, with the fleet-UID label fleet when set.
func child(gvk schema.GroupVersionKind, name, fleet string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("ns")
	u.SetName(name)
	if fleet != "" {
		u.SetLabels(map[string]string{v1.LabelFleetUID: fleet})
	}
	return u
}
