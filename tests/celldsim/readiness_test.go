package celldsim

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// probingMember is a serving member whose probes the test sends itself (probeOnce), its celld
// container carrying a readiness probe with failureThreshold threshold (none if 0).
func probingMember(t *testing.T, ip string, threshold int32) *member {
	t.Helper()
	m, out := testMember(ip, plain("CELLD_SIM_LEASE_MS=0"))
	if threshold > 0 {
		m.pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{FailureThreshold: threshold}
	}
	m.s.probe = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	started(t, out, func() bool { m.startProc(time.Now(), false); return m.proc != nil })
	t.Cleanup(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.proc != nil {
			m.proc.close()
		}
	})
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		m.probeOnce()
		return readyVerdict(m), nil
	})
	if err != nil {
		t.Fatalf("the member never answered its health route (%v)", err)
	}
	return m
}

// readyVerdict is the readiness writeStatus would patch.
func readyVerdict(m *member) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && m.probeOK
}

func setHealth(m *member, mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.k.overrides[KnobHealthMode] = mode
}

// A kubelet turns a Ready pod not Ready after failureThreshold consecutive failed probes, not
// after one: the operator renders failureThreshold 3 so that one slow answer does not take a
// member out of service, and the simulator keeps that count.
func TestAReadyMemberTurnsNotReadyOnlyAfterFailureThresholdFailedProbes(t *testing.T) {
	m := probingMember(t, "127.213.0.12", 3)

	setHealth(m, "fail")
	for i := 1; i <= 2; i++ {
		m.probeOnce()
		if !readyVerdict(m) {
			t.Fatalf("after %d failed probe(s) of 3 the member must stay Ready", i)
		}
	}
	setHealth(m, "auto")
	m.probeOnce()
	setHealth(m, "fail")
	for i := 1; i <= 2; i++ {
		m.probeOnce()
		if !readyVerdict(m) {
			t.Fatalf("a success restarts the count: after %d failed probe(s) the member must stay Ready", i)
		}
	}
	m.probeOnce()
	if readyVerdict(m) {
		t.Fatal("the third consecutive failed probe must turn the member not Ready")
	}
	setHealth(m, "auto")
	m.probeOnce()
	if !readyVerdict(m) {
		t.Fatal("one successful probe must make the member Ready again")
	}
}

func TestTheFailureThresholdIsThePodsOrTheKubeletsDefault(t *testing.T) {
	pod := func(c ...corev1.Container) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Containers: c}} }
	probe := func(n int32) *corev1.Probe { return &corev1.Probe{FailureThreshold: n} }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"no probe", pod(corev1.Container{Name: ContainerName}), 3},
		{"the celld container's", pod(corev1.Container{Name: "side", ReadinessProbe: probe(7)}, corev1.Container{Name: ContainerName, ReadinessProbe: probe(5)}), 5},
		{"else the first container's", pod(corev1.Container{Name: "x", ReadinessProbe: probe(1)}), 1},
	} {
		if got := failureThreshold(tc.pod); got != tc.want {
			t.Errorf("%s: failureThreshold %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The probes run in the simulator's process, not on the member's node: a probe that fails
// while that process was not scheduled (a loaded CI machine) is no verdict on the member.
// Without this, one starved second turned every member of every fleet not Ready at once.
func TestAProbeThatFailsWhileTheSimulatorStallsCountsForNothing(t *testing.T) {
	m := probingMember(t, "127.213.0.13", 1)
	setHealth(m, "fail")

	m.s.stalls.beat(time.Now().Add(-time.Second)) // the heartbeat is a second overdue
	m.probeOnce()
	if !readyVerdict(m) {
		t.Fatal("a probe that failed during a stall of the simulator must not turn the member not Ready")
	}

	m.s.stalls.beat(time.Now()) // the process runs again
	m.probeOnce()
	if readyVerdict(m) {
		t.Fatal("a failed probe after the stall counts (failureThreshold 1)")
	}
}

func TestStallWatchSeesAnOverdueHeartbeat(t *testing.T) {
	var w stallWatch
	t0 := time.Date(2026, 12, 2, 0, 33, 3, 0, time.UTC)
	if w.stalledSince(t0, t0.Add(time.Hour)) {
		t.Fatal("without a heartbeat nothing is a stall")
	}
	w.beat(t0)
	w.beat(t0.Add(heartbeat))
	if w.stalledSince(t0, t0.Add(heartbeat+stallGap/2)) {
		t.Fatal("beats on time are no stall")
	}
	if !w.stalledSince(t0, t0.Add(heartbeat+2*stallGap)) {
		t.Fatal("an overdue heartbeat is a stall in progress")
	}
	w.beat(t0.Add(2 * time.Second))
	if !w.stalledSince(t0.Add(time.Second), t0.Add(2*time.Second+heartbeat)) {
		t.Fatal("a probe that started before the stall ended overlapped it")
	}
	if w.stalledSince(t0.Add(2*time.Second+time.Millisecond), t0.Add(2*time.Second+heartbeat)) {
		t.Fatal("a probe that started after the stall ended did not overlap it")
	}
}

// transitionOf is the lastTransitionTime statusPatch writes for the Ready condition.
func transitionOf(t *testing.T, m *member, ready bool) time.Time {
	t.Helper()
	var patch struct {
		Status struct {
			Conditions []corev1.PodCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(m.statusPatch(ready), &patch); err != nil {
		t.Fatal(err)
	}
	for _, c := range patch.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatal("the status patch carries no Ready condition")
	return time.Time{}
}

// The kubelet keeps a condition's lastTransitionTime while its status does not change. The
// operator's replacement delay counts from it: a member that restarts every second and never
// turns Ready must age, as it does on a real node, or no crash-looping member is ever due.
func TestTheReadyConditionKeepsItsTransitionTimeWhileReadinessDoesNotChange(t *testing.T) {
	m, _ := testMember("127.213.0.14", plain("CELLD_SIM_LEASE_MS=0"))
	since := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	m.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: since}}

	if got := transitionOf(t, m, false); !got.Equal(since.Time) {
		t.Fatalf("a not-Ready member written not Ready again must keep its transition time %s, got %s", since, got)
	}
	if got := transitionOf(t, m, true); !got.After(since.Time) {
		t.Fatalf("turning Ready is a transition and must stamp the present, got %s", got)
	}
}

// A member told to exit at once (CELLD_SIM_CRASH_AFTER_MS=0) never runs long enough for a probe
// to find it healthy: a crash-looping member must never turn Ready between two restarts.
func TestAMemberDueToCrashAtStartExitsBeforeAnyProbe(t *testing.T) {
	m, _ := testMember("127.213.0.15", plain("CELLD_SIM_LEASE_MS=0", "CELLD_SIM_CRASH_AFTER_MS=0"))
	m.startProc(time.Now(), false)
	if m.proc != nil {
		m.proc.close()
		t.Fatal("a process due to exit at start is still running after its start: a probe can find it healthy")
	}
	if term := m.status.State.Terminated; term == nil || term.ExitCode != 1 {
		t.Fatalf("the container must be Terminated with exit 1, got %+v", m.status.State)
	}
}
