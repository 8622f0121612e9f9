package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMemberNames(t *testing.T) {
	if got := MemberName("f", 12); got != "f-12" {
		t.Errorf("MemberName = %q", got)
	}
	if got := ClaimName("f", 0); got != "data-f-0" {
		t.Errorf("ClaimName = %q", got)
	}
	for _, c := range []struct {
		fleet, pod string
		n          int32
		ok         bool
	}{
		{"f", "f-0", 0, true}, {"f", "f-99", 99, true}, {"my-fleet", "my-fleet-3", 3, true},
		{"f", "f-", 0, false}, {"f", "f", 0, false}, {"f", "g-1", 0, false}, {"f", "ff-1", 0, false},
		{"f", "f-01", 0, false}, {"f", "f--1", 0, false}, {"f", "f-+1", 0, false}, {"f", "f-100", 0, false},
		{"f", "f-x-1", 0, false}, {"f", "f-1a", 0, false}, {"f", "f-9999999999", 0, false},
		{"my", "my-fleet-3", 0, false}, {"f", "f-abcde", 0, false}, {"f", "f-1-0", 0, false},
	} {
		n, ok := MemberOrdinal(c.fleet, c.pod)
		if n != c.n && ok || ok != c.ok {
			t.Errorf("MemberOrdinal(%q, %q) = %d, %v; want %d, %v", c.fleet, c.pod, n, ok, c.n, c.ok)
		}
	}
	for _, c := range []struct {
		claim string
		n     int32
		ok    bool
	}{{"data-f-4", 4, true}, {"f-4", 0, false}, {"data-g-4", 0, false}, {"data-f-04", 0, false}, {"data-f-100", 0, false}} {
		n, ok := ClaimOrdinal("f", c.claim)
		if n != c.n && ok || ok != c.ok {
			t.Errorf("ClaimOrdinal(f, %q) = %d, %v; want %d, %v", c.claim, n, ok, c.n, c.ok)
		}
	}
	for claim, fleet := range map[string]string{"data-f-4": "f", "data-my-fleet-12": "my-fleet", "data-f-1-0": "f-1",
		"data-f-04": "", "data-f-100": "", "data-f-": "", "data--1": "", "f-4": "", "data-f": "", "data-f-x": ""} {
		if got := ClaimFleet(claim); got != fleet {
			t.Errorf("ClaimFleet(%q) = %q; want %q", claim, got, fleet)
		}
		if fleet != "" {
			if _, ok := ClaimOrdinal(fleet, claim); !ok {
				t.Errorf("ClaimOrdinal(%q, %q) refuses what ClaimFleet accepts", fleet, claim)
			}
		}
	}
	for n := range int32(MaxMembers) {
		if got := ClaimFleet(ClaimName("my-fleet-2", n)); got != "my-fleet-2" {
			t.Fatalf("ClaimFleet does not invert ClaimName at %d: %q", n, got)
		}
		if got, ok := MemberOrdinal("fleet", MemberName("fleet", n)); !ok || got != n {
			t.Fatalf("MemberOrdinal does not invert MemberName at %d", n)
		}
		if got, ok := ClaimOrdinal("fleet", ClaimName("fleet", n)); !ok || got != n {
			t.Fatalf("ClaimOrdinal does not invert ClaimName at %d", n)
		}
	}
}

func TestRunsAsStatefulSet(t *testing.T) {
	for _, c := range []struct {
		profile  Profile
		workload BucketWorkload
		want     bool
	}{
		{ProfilePersistentFleet, "", true},
		{ProfileBucket, BucketWorkloadOrdered, true},
		{ProfileBucket, BucketWorkloadDeployment, false},
	} {
		f := &CelldFleet{Spec: CelldFleetSpec{Profile: c.profile, BucketWorkload: c.workload}}
		if got := f.RunsAsStatefulSet(); got != c.want {
			t.Errorf("%s/%s: RunsAsStatefulSet = %v, want %v", c.profile, c.workload, got, c.want)
		}
	}
}

func TestOwns(t *testing.T) {
	f := &CelldFleet{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	yes, other := true, types.UID("u2")
	for _, c := range []struct {
		name string
		obj  metav1.ObjectMeta
		want bool
	}{
		{"labelled", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u1"}}, true},
		{"labelled and controlled by the fleet (an earlier release)", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u1"},
			OwnerReferences: []metav1.OwnerReference{{UID: "u1", Controller: &yes}}}, true},
		{"labelled, another owner that is not a controller (the garbage collector would follow it)", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u1"},
			OwnerReferences: []metav1.OwnerReference{{UID: other}}}, false},
		{"labelled, the fleet as a non-controller owner", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u1"},
			OwnerReferences: []metav1.OwnerReference{{UID: "u1"}}}, true},
		{"labelled but controlled by someone else", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u1"},
			OwnerReferences: []metav1.OwnerReference{{UID: other, Controller: &yes}}}, false},
		{"another fleet's", metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: "u2"}}, false},
		{"unlabelled", metav1.ObjectMeta{}, false},
	} {
		if got := f.Owns(&c.obj); got != c.want {
			t.Errorf("%s: Owns = %v, want %v", c.name, got, c.want)
		}
	}
	if (&CelldFleet{}).Owns(&metav1.ObjectMeta{Labels: map[string]string{LabelFleetUID: ""}}) {
		t.Error("a fleet without a UID owns nothing")
	}
}
