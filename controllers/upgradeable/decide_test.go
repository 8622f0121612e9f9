package upgradeable

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func fleet(ns, name string, conds ...metav1.Condition) v1.CelldFleet {
	f := v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}}
	f.Status.Conditions = conds
	return f
}

func cond(t, reason string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason}
}

func TestBlockers(t *testing.T) {
	now := metav1.Now()
	deleting := fleet("a", "gone", cond(v1.ConditionDeleting, v1.ReasonNotDeleting, metav1.ConditionFalse))
	deleting.DeletionTimestamp = &now
	for _, c := range []struct {
		name   string
		fleets []v1.CelldFleet
		held   map[types.UID]bool
		want   []string // "ns/name:why,why"
	}{
		{name: "no fleet"},
		{name: "settled fleet", fleets: []v1.CelldFleet{fleet("a", "f",
			cond(v1.ConditionProgressing, v1.ReasonProvisioned, metav1.ConditionFalse),
			cond(v1.ConditionDeleting, v1.ReasonNotDeleting, metav1.ConditionFalse))}},
		{name: "rollout", fleets: []v1.CelldFleet{fleet("a", "f", cond(v1.ConditionProgressing, v1.ReasonLifecycleProgress, metav1.ConditionTrue))},
			want: []string{"a/f:rollout"}},
		{name: "provisioning does not hold the upgrade", fleets: []v1.CelldFleet{fleet("a", "f", cond(v1.ConditionProgressing, v1.ReasonProvisioning, metav1.ConditionTrue))}},
		{name: "blocked fleet does not hold the upgrade", fleets: []v1.CelldFleet{fleet("a", "f",
			cond(v1.ConditionProgressing, v1.ReasonIsolationUnverified, metav1.ConditionFalse),
			cond(v1.ConditionBlocked, v1.ReasonIsolationUnverified, metav1.ConditionTrue))}},
		{name: "held member Pod", fleets: []v1.CelldFleet{fleet("a", "f"), fleet("b", "g")}, held: map[types.UID]bool{"b-g": true},
			want: []string{"b/g:replacement"}},
		{name: "hold of a fleet no longer listed", fleets: []v1.CelldFleet{fleet("a", "f")}, held: map[types.UID]bool{"x-y": true}},
		{name: "deletion timestamp before the condition says so", fleets: []v1.CelldFleet{deleting}, want: []string{"a/gone:deleting"}},
		{name: "Deleting condition", fleets: []v1.CelldFleet{fleet("a", "f", cond(v1.ConditionDeleting, v1.ReasonDeleting, metav1.ConditionTrue))},
			want: []string{"a/f:deleting"}},
		{name: "every reason, sorted", fleets: []v1.CelldFleet{
			fleet("z", "last", cond(v1.ConditionProgressing, v1.ReasonLifecycleProgress, metav1.ConditionTrue)),
			fleet("a", "all", cond(v1.ConditionProgressing, v1.ReasonLifecycleProgress, metav1.ConditionTrue), cond(v1.ConditionDeleting, v1.ReasonDeleting, metav1.ConditionTrue)),
			fleet("a", "quiet"),
		}, held: map[types.UID]bool{"a-all": true}, want: []string{"a/all:rollout,replacement,deleting", "z/last:rollout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, b := range Blockers(c.fleets, c.held) {
				got = append(got, b.Fleet.String()+":"+strings.Join(b.Why, ","))
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("blockers %q, want %q", got, c.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	v := Decide(nil)
	if v.Status != metav1.ConditionTrue || v.Reason != ReasonSettled {
		t.Fatalf("no blocker must be Upgradeable=True, got %+v", v)
	}
	v = Decide([]Blocker{{Fleet: types.NamespacedName{Namespace: "fleets-a", Name: "web"}, Why: []string{Rollout, Replacement}}})
	if v.Status != metav1.ConditionFalse || v.Reason != ReasonMidHandoff || !strings.Contains(v.Message, "fleets-a/web (rollout, replacement)") {
		t.Fatalf("a blocker must be Upgradeable=False naming it, got %+v", v)
	}
	var many []Blocker
	for i := range maxNamed + 5 {
		many = append(many, Blocker{Fleet: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("f%02d", i)}, Why: []string{Deleting}})
	}
	v = Decide(many)
	if !strings.Contains(v.Message, "ns/f19 (deleting)") || strings.Contains(v.Message, "ns/f20") || !strings.HasSuffix(v.Message, "and 5 more") {
		t.Fatalf("the message names %d fleets and counts the rest: %q", maxNamed, v.Message)
	}
	// The reasons are valid metav1.Condition reasons (the OperatorCondition CRD checks them).
	for _, r := range []string{ReasonSettled, ReasonMidHandoff} {
		if strings.ContainsAny(r, " -.") {
			t.Errorf("reason %q is not a CamelCase condition reason", r)
		}
	}
	if !v.Same(&metav1.Condition{Status: v.Status, Reason: v.Reason, Message: v.Message}) || v.Same(nil) ||
		v.Same(&metav1.Condition{Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message}) {
		t.Fatal("Same compares status, reason and message")
	}
}
