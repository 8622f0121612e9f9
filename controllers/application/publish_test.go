package application

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// publishedFleet is a fleet whose status already holds r, published at `at`.
func publishedFleet(r Result, at time.Time) *v1.CelldFleet {
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns", UID: "u1", Generation: r.Generation}}
	app := r.Application.DeepCopy()
	app.ObservedAt = &metav1.Time{Time: at}
	f.Status.Application = app
	f.Status.Conditions = []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned},
		condition(f, r, at),
	}
	return f
}

// TestWhichObservationsWaitAndWhichAreWrittenAtOnce: an observation that only moves
// observedAt waits for the refresh, one that changes only details under the same verdict waits
// for the pace, and a new verdict, generation or observedVersion is written at once.
func TestWhichObservationsWaitAndWhichAreWrittenAtOnce(t *testing.T) {
	opts := Options{Refresh: 5 * time.Minute, Pace: time.Minute}
	settled := Aggregate(facts(3, node("f-0"), node("f-1"), node("f-2")))
	oneUp := Aggregate(facts(3, node("f-0"), node("f-1", notReady), node("f-2", notReady)))
	twoUp := Aggregate(facts(3, node("f-0"), node("f-1"), node("f-2", notReady)))
	pendingOne := Aggregate(facts(3, node("f-0", pending(1)), node("f-1"), node("f-2")))
	pendingTwo := Aggregate(facts(3, node("f-0", pending(2)), node("f-1"), node("f-2")))
	released := Aggregate(facts(3, node("f-0", version(verB, preB)), node("f-1", version(verB, preB)), node("f-2", version(verB, preB))))
	nextGeneration := settled
	nextGeneration.Generation = 8
	if oneUp.Reason != twoUp.Reason || pendingOne.Reason != pendingTwo.Reason || settled.Reason != released.Reason {
		t.Fatalf("the cases need pairs with one verdict: %s/%s, %s/%s, %s/%s",
			oneUp.Reason, twoUp.Reason, pendingOne.Reason, pendingTwo.Reason, settled.Reason, released.Reason)
	}
	for _, tc := range []struct {
		name          string
		published, r  Result
		age           time.Duration
		wait          bool
		neverObserved bool
	}{
		{name: "unchanged, younger than the refresh", published: settled, r: settled, age: 4 * time.Minute, wait: true},
		{name: "unchanged, as old as the refresh", published: settled, r: settled, age: 5 * time.Minute},
		{name: "a member came up, the verdict is the same, younger than the pace", published: oneUp, r: twoUp, age: 30 * time.Second, wait: true},
		{name: "a member came up, the verdict is the same, as old as the pace", published: oneUp, r: twoUp, age: time.Minute},
		{name: "pending cells moved while converging, younger than the pace", published: pendingOne, r: pendingTwo, age: 10 * time.Second, wait: true},
		{name: "the last member came up: a new verdict", published: twoUp, r: settled, age: time.Second},
		{name: "cells began to swap: a new verdict", published: settled, r: pendingOne, age: time.Second},
		{name: "a new observedVersion under the same verdict", published: settled, r: released, age: time.Second},
		{name: "a new fleet generation", published: settled, r: nextGeneration, age: time.Second},
		{name: "a fleet never published", r: settled, neverObserved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := &v1.CelldFleet{}
			if !tc.neverObserved {
				live = publishedFleet(tc.published, t0.Add(-tc.age))
			}
			if got := deferred(live, tc.r, t0, opts); got != tc.wait {
				t.Errorf("deferred = %v, want %v (published %s %+v, now %s %+v)", got, tc.wait,
					tc.published.Reason, tc.published.Application, tc.r.Reason, tc.r.Application)
			}
		})
	}
}

func TestTheTransitionTimeMovesOnlyWithTheStatus(t *testing.T) {
	r := Aggregate(facts(1, node("f-0")))
	live := publishedFleet(r, t0.Add(-time.Hour))
	if c := condition(live, r, t0); !c.LastTransitionTime.Time.Equal(t0.Add(-time.Hour)) {
		t.Errorf("same status: lastTransitionTime %v, want the previous %v", c.LastTransitionTime, t0.Add(-time.Hour))
	}
	mixed := Aggregate(facts(2, node("f-0"), node("f-1", version(verB, preB))))
	if c := condition(live, mixed, t0); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("new status: lastTransitionTime %v, want now", c.LastTransitionTime)
	}
}

func TestTheApplyObjectHoldsOnlyTheObserversFields(t *testing.T) {
	r := Aggregate(facts(1, node("f-0")))
	live := publishedFleet(r, t0)
	live.Status.ObservedGeneration, live.Status.ReadyReplicas = 3, 1
	cfg, err := applyObject(live, r, t0)
	if err != nil {
		t.Fatal(err)
	}
	st := cfg.Status
	if st == nil || st.Application == nil || len(st.Conditions) != 1 {
		t.Fatalf("status %+v, want application and one condition", st)
	}
	if st.ObservedGeneration != nil || st.ReadyReplicas != nil || st.Capacity != nil || st.Replicas != nil {
		t.Fatalf("status %+v carries a reconciler field: the observer would take it from the reconciler", st)
	}
	c := st.Conditions[0]
	if *c.Type != v1.ConditionApplicationConverged || *c.Message != Message || *c.ObservedGeneration != r.Generation {
		t.Errorf("condition %+v, want only ApplicationConverged with the fixed message and the observation's generation", c)
	}
	live.ResourceVersion = "42"
	cfg, _ = applyObject(live, r, t0)
	if cfg.ResourceVersion == nil || *cfg.ResourceVersion != "42" {
		t.Errorf("metadata %+v, want the resourceVersion of the read, so the apply is conditional on it", cfg.ObjectMetaApplyConfiguration)
	}
}

func TestDue(t *testing.T) {
	f := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	last := observed{at: t0, generation: 4}
	cases := []struct {
		name string
		f    *v1.CelldFleet
		now  time.Time
		ok   bool
		want bool
	}{
		{"never observed", f, t0, false, true},
		{"observed 14 s ago, same generation: skipped", f, t0.Add(14 * time.Second), true, false},
		{"observed 15 s ago: due", f, t0.Add(15 * time.Second), true, true},
		{"new generation 1 s after a read: waits for the 15 s bound", &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Generation: 5}}, t0.Add(time.Second), true, false},
		{"new generation 15 s after a read: due", &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Generation: 5}}, t0.Add(15 * time.Second), true, true},
		{"deleting: due at once", &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Generation: 4, DeletionTimestamp: &metav1.Time{Time: t0}}}, t0.Add(time.Second), true, true},
	}
	for _, c := range cases {
		if got := due(c.now, 15*time.Second, c.f, last, c.ok); got != c.want {
			t.Errorf("%s: due %t, want %t", c.name, got, c.want)
		}
	}
}

func TestMemberIdentityNamesTheContainerIncarnation(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "f-0", UID: types.UID("p1")}}
	p.Status.PodIP = "10.0.0.7"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	started := metav1.NewTime(t0)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "istio-proxy", ContainerID: "containerd://proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		{Name: "celld", ContainerID: "containerd://abc", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
	}
	m := memberOf(p)
	if m.identity != "p1/containerd://abc/2" || !m.ready || m.ip != "10.0.0.7" || !m.started.Equal(t0) {
		t.Fatalf("member %+v, want identity p1/containerd://abc/2 of the celld container", m)
	}
	p.Status.ContainerStatuses[1].ContainerID = ""
	if got := memberOf(p); got.identity != "p1//2" {
		t.Fatalf("identity %q of a running container without an ID (kwok), want p1//2", got.identity)
	}
	p.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	if got := memberOf(p); got.identity != "" {
		t.Fatalf("identity %q of a container that is not running, want none", got.identity)
	}
	a := inventory{members: []member{m}}
	b := inventory{members: []member{m}}
	b.members[0].identity = "p1/containerd://def/3"
	if a.sameAs(b) {
		t.Fatal("a restarted container must make the inventories differ")
	}
	restarted := inventory{members: []member{m}}
	restarted.members[0].started = t0.Add(time.Second)
	if a.sameAs(restarted) {
		t.Fatal("a container started again must make the inventories differ even with the same ID and count")
	}
	c := inventory{members: []member{m}, workload: workloadFacts{replicas: 4}}
	if a.sameAs(c) {
		t.Fatal("a workload replica change must make the inventories differ")
	}
}
