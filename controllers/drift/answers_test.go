package drift

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestAnswers(t *testing.T) {
	fleet := types.NamespacedName{Namespace: "ns", Name: "f"}
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns", UID: "sts-1",
		Labels: map[string]string{v1.LabelFleetUID: "fleet-1"}}}
	cases := []struct {
		name  string
		kind  string
		obj   string
		fleet types.UID
		at    time.Time
		found bool
	}{
		{"just created", "StatefulSet", "f", "fleet-1", t0.Add(time.Second), true},
		{"at the end of the TTL", "StatefulSet", "f", "fleet-1", t0.Add(AnswerTTL), true},
		{"past the TTL: ask the API server", "StatefulSet", "f", "fleet-1", t0.Add(AnswerTTL + time.Millisecond), false},
		{"a clock that went back", "StatefulSet", "f", "fleet-1", t0.Add(-time.Second), false},
		{"a fleet re-created under the same name", "StatefulSet", "f", "fleet-2", t0, false},
		{"a fleet without a UID", "StatefulSet", "f", "", t0, false},
		{"another kind at the same name", "Deployment", "f", "fleet-1", t0, false},
		{"another name", "StatefulSet", "g", "fleet-1", t0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a Answers
			a.Remember(fleet, "StatefulSet", sts, t0)
			got := a.Recent(tc.kind, "ns", tc.obj, tc.fleet, tc.at)
			if (got != nil) != tc.found {
				t.Fatalf("Recent = %v, want found %v", got, tc.found)
			}
			if got != nil && (got.GetUID() != "sts-1" || got == sts) {
				t.Fatalf("Recent returned %v (same pointer: %v), want a copy of the answer", got.GetUID(), got == sts)
			}
		})
	}

	var a Answers
	a.Remember(fleet, "StatefulSet", sts, t0)
	sts.Labels[v1.LabelFleetUID] = "changed after Remember"
	if a.Recent("StatefulSet", "ns", "f", "fleet-1", t0) == nil {
		t.Fatal("Answers kept the caller's object, not a copy")
	}
	a.Seen("StatefulSet", "ns", "f")
	if a.Len() != 0 {
		t.Fatal("an answer the cache has seen is still remembered")
	}
	a.Remember(fleet, "StatefulSet", sts, t0)
	a.Remember(types.NamespacedName{Namespace: "ns", Name: "other"}, "Service", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}}, t0)
	a.Forget(fleet)
	if a.Len() != 1 {
		t.Fatalf("Forget(fleet) left %d answers, want only the other fleet's", a.Len())
	}
	var none *Answers
	none.Remember(fleet, "StatefulSet", sts, t0)
	none.Seen("StatefulSet", "ns", "f")
	none.Forget(fleet)
	if none.Recent("StatefulSet", "ns", "f", "fleet-1", t0) != nil || none.Len() != 0 {
		t.Fatal("a nil Answers remembers a creation")
	}
}
