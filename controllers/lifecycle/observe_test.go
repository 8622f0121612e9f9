package lifecycle

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func TestPodFactsReadTheConditionsTheChainNeeds(t *testing.T) {
	created := metav1.NewTime(t0.Add(-h))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "f-2", UID: "u", ResourceVersion: "7", CreationTimestamp: created,
			DeletionTimestamp: new(metav1.NewTime(t0.Add(-3 * m)))},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(t0.Add(-20 * m))},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}},
		},
	}
	got := PodFacts(pod)
	want := Pod{
		Exists: true, UID: "u", ResourceVersion: "7", Created: created.Time,
		Unschedulable: true, UnschedulableSince: t0.Add(-20 * m), SchedulerMessage: "0/3 nodes are available",
		ReadyTransition: created.Time, Deleting: true, GraceEnds: t0.Add(-3 * m), ConfigWait: "ErrImagePull",
	}
	if got != want {
		t.Errorf("a Pod with no Ready condition is down since its creation; its deletionTimestamp is the end of its grace\n got: %+v\nwant: %+v", got, want)
	}

	pod.Spec.NodeName = "node-a"
	pod.DeletionTimestamp = nil
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-9 * m))},
	}
	pod.Status.ContainerStatuses = nil
	got = PodFacts(pod)
	if !got.Scheduled || got.Unschedulable || !got.Ready || !got.ReadyTransition.Equal(t0.Add(-9*m)) || got.Deleting || got.ConfigWait != "" {
		t.Errorf("a scheduled Ready Pod: got %+v", got)
	}
}

func TestClaimFactsProveOwnershipByTheFleetUIDLabel(t *testing.T) {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-f-0", UID: "c", ResourceVersion: "3",
			Labels: map[string]string{v1.LabelFleetUID: "fleet-uid"}, DeletionTimestamp: new(metav1.Now())},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost},
	}
	got := ClaimFacts(c, "fleet-uid")
	if !got.Owned || !got.Terminating || got.Phase != corev1.ClaimLost || got.UID != "c" {
		t.Errorf("claim facts: got %+v", got)
	}
	if ClaimFacts(c, "another-fleet").Owned {
		t.Error("a claim labelled for another fleet UID (a fleet recreated under the same name) is not owned")
	}
	if ClaimFacts(c, "").Owned {
		t.Error("an empty fleet UID owns nothing")
	}
}

func TestWorkloadFacts(t *testing.T) {
	if WorkloadFacts(nil, true).Exists {
		t.Error("a nil StatefulSet is absent")
	}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: 4},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, ReadyReplicas: 2, UpdatedReplicas: 1,
			CurrentRevision: "a", UpdateRevision: "b"},
	}
	w := WorkloadFacts(s, true)
	if !w.Exists || w.Replicas != 1 || w.Observed() || w.RevisionCurrent || w.ReadyReplicas != 2 {
		t.Errorf("unset replicas default to 1, generation 4 is not observed at 3, revisions differ: %+v", w)
	}
}

func TestFactsFromObjects(t *testing.T) {
	f := Facts{Fleet: "f", Now: t0}
	if f.AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-0"}}) {
		t.Error("another fleet's Pod was recorded")
	}
	if !f.AddClaim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-f-4"}}, "u") {
		t.Fatal("a removed member's claim must be recorded: growth reattaches it")
	}
	if !f.AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "f-1", CreationTimestamp: metav1.NewTime(t0)}}) {
		t.Fatal("a member Pod must be recorded")
	}
	if f.AddClaim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "f-1"}}, "u") {
		t.Error("a claim not named after the claim template was recorded")
	}
	if len(f.Members) != 5 || !f.Members[4].Claim.Exists || f.Members[4].Claim.Owned || !f.Members[1].Pod.Exists || f.Members[0].Pod.Exists {
		t.Errorf("members by ordinal: %+v", f.Members)
	}
}

func TestPodFactsTellACrashLoopFromOneExit(t *testing.T) {
	exited := func(code int32, msg string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg}
	}
	for _, c := range []struct {
		name  string
		ready bool
		st    corev1.ContainerStatus
		want  *Crash
	}{
		{name: "between restarts after a failed start (the simulator, a fast kubelet)",
			st:   corev1.ContainerStatus{Name: "celld", RestartCount: 2, State: corev1.ContainerState{Terminated: exited(1, "refused CELLD_LTX_PAGED")}},
			want: &Crash{Container: "celld", ExitCode: 1, Message: "refused CELLD_LTX_PAGED", Restarts: 2}},
		{name: "in CrashLoopBackOff, the failed exit in the last state",
			st: corev1.ContainerStatus{Name: "celld", RestartCount: 5,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: exited(78, "")}},
			want: &Crash{Container: "celld", ExitCode: 78, Restarts: 5}},
		{name: "running again after a failed exit, not Ready yet",
			st: corev1.ContainerStatus{Name: "celld", RestartCount: 1,
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: exited(1, "x")}},
			want: &Crash{Container: "celld", ExitCode: 1, Message: "x", Restarts: 1}},
		{name: "the first exit, not restarted yet: not a loop",
			st: corev1.ContainerStatus{Name: "celld", State: corev1.ContainerState{Terminated: exited(1, "x")}}},
		{name: "restarted after a clean exit: not a crash",
			st: corev1.ContainerStatus{Name: "celld", RestartCount: 3, LastTerminationState: corev1.ContainerState{Terminated: exited(0, "")}}},
		{name: "Ready again after crashes: not down, so not crash-looping", ready: true,
			st: corev1.ContainerStatus{Name: "celld", RestartCount: 3, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: exited(1, "x")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ready := corev1.ConditionFalse
			if c.ready {
				ready = corev1.ConditionTrue
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "f-2", Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: "f-abc"}},
				Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
					ContainerStatuses: []corev1.ContainerStatus{c.st}},
			}
			got := PodFacts(pod)
			if got.Revision != "f-abc" {
				t.Errorf("revision = %q", got.Revision)
			}
			if (got.Crash == nil) != (c.want == nil) || (got.Crash != nil && *got.Crash != *c.want) {
				t.Fatalf("crash = %+v, want %+v", got.Crash, c.want)
			}
		})
	}
}
