package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The API server restarted (restart-apiserver). What it does to members, as the campaign
// found it (docs/reliability.md, finding 2): while the API server is away no kubelet (here
// kwok) can renew its node's Lease, so once it serves again the node lifecycle controller of
// kube-controller-manager finds every Lease older than its grace period, marks the nodes
// NotReady and every Pod on them Ready=False (MarkPodsNotReady), and the kubelet sets Ready
// back only once it notices; here the celld simulator, whose watch reconnects with client-go's
// backoff (up to a minute). Every member of every fleet can be down at once, none by the
// operator: the injected fault's effect. The fault journal records the restart before it
// starts, and a member is excused by it when its Pod is the one that served, is not
// terminating, and its Ready=False was written by kube-controller-manager during the restart's
// effect window. A member the operator deletes or rolls meanwhile is a new or terminating Pod
// and is never excused this way.
//
// Every client's watches also resume late (the same backoff) and each stream on its own, so
// for a while after a restart the monitor's Pod and workload views can be seconds apart. In
// that reconnect window a suspected violation of rule a is confirmed by a fresh read of the
// fleet's Pods and workload before it fails the run.

const (
	// restartEffect: kube-controller-manager marks Pods of nodes whose Leases it has not seen
	// renewed for the grace period (20 s); its own Lease watch resumes within the reflector's
	// maximum backoff (60 s with jitter) of the API server's return. 90 s covers both.
	restartEffect = 90 * time.Second
	// reconnectWindow: every watch has resumed within the reflector's maximum backoff (30 s,
	// doubled by jitter) of the API server's return.
	reconnectWindow = time.Minute
	// nodeControllerManager is the field manager of the node lifecycle controller's Pod status
	// writes.
	nodeControllerManager = "kube-controller-manager"
)

// apiRestart is one restart-apiserver: from the SIGTERM until /readyz answered again.
type apiRestart struct {
	start, end time.Time
}

// addAPIRestart journals an API server restart before it starts; the returned func ends it.
func (m *monitor) addAPIRestart() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &apiRestart{start: time.Now()}
	m.apiRestarts = append(m.apiRestarts, r)
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		r.end = time.Now()
	}
}

// restartMarked reports whether t falls in a journaled restart's effect window. Caller holds
// mu.
func (m *monitor) restartMarked(t time.Time) bool {
	for _, r := range m.apiRestarts {
		if !t.Before(r.start) && (r.end.IsZero() || t.Before(r.end.Add(restartEffect))) {
			return true
		}
	}
	return false
}

// reconnecting reports whether the monitor's watches may still be resuming after a restart.
// Caller holds mu.
func (m *monitor) reconnecting(now time.Time) bool {
	for _, r := range m.apiRestarts {
		if !now.Before(r.start) && (r.end.IsZero() || now.Before(r.end.Add(reconnectWindow))) {
			return true
		}
	}
	return false
}

// nodeMarkedAt returns when the node lifecycle controller marked p not Ready, or zero when
// p's readiness is not its doing (the last write of p's status was someone else's).
func nodeMarkedAt(p *corev1.Pod) time.Time {
	if p.DeletionTimestamp != nil {
		return time.Time{}
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	var last metav1.ManagedFieldsEntry
	for _, mf := range p.ManagedFields {
		if mf.Subresource == "status" && mf.Time != nil && (last.Time == nil || !mf.Time.Before(last.Time)) {
			last = mf
		}
	}
	if ready || last.Time == nil || last.Manager != nodeControllerManager {
		return time.Time{}
	}
	return last.Time.Time
}

// restartDown lists the down members the restart's effect excuses: down members whose Pod
// the node lifecycle controller marked inside a restart's window. down holds ordinals for a
// StatefulSet and "missing-N" for a Deployment, whose marked Pods count in any order.
// Caller holds mu.
func (m *monitor) restartDown(stateful bool, pods []memberPod, down []string) map[string]bool {
	out := map[string]bool{}
	isDown := map[string]bool{}
	for _, d := range down {
		isDown[d] = true
	}
	marked := 0
	for _, p := range pods {
		if p.serving || p.nodeMarkedAt.IsZero() || !m.restartMarked(p.nodeMarkedAt) {
			continue
		}
		if stateful {
			if o := fmt.Sprint(p.ordinal); isDown[o] {
				out[o], out["pod:"+p.name] = true, true
			}
			continue
		}
		if marked < len(down) {
			out[down[marked]], out["pod:"+p.name] = true, true
			marked++
		}
	}
	return out
}

// verifyMembers re-reads f's Pods and workload from the API server and judges rule a on that
// fresh view: a suspected violation in the reconnect window after a restart fails only if the
// API server's own state shows it.
func (m *monitor) verifyMembers(ns, name, uid string, stateful bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, perr := m.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + uid})
	var replicas *int32
	var werr error
	if stateful {
		var s *appsv1.StatefulSet
		if s, werr = m.cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{}); werr == nil {
			replicas = s.Spec.Replicas
		}
	} else {
		var d *appsv1.Deployment
		if d, werr = m.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); werr == nil {
			replicas = d.Spec.Replicas
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fleets[ns]
	if f == nil || f.uid != uid {
		return
	}
	f.verifying = false
	if perr != nil || werr != nil || replicas == nil {
		return // judged again on the next tick, with another read
	}
	m.fresh++
	f.pods = map[string]memberPod{}
	for i := range pods.Items {
		f.pods[pods.Items[i].Name] = memberPodOf(f, &pods.Items[i])
	}
	f.members.setDesired(int(*replicas), f.podList())
	f.verified = true
	m.judgeMembers(f)
	f.verified = false
}

// onNode records every change of a Node's Ready condition, for the report.
func (m *monitor) onNode(_, obj any, deleted bool) {
	n, ok := obj.(*corev1.Node)
	if !ok || deleted {
		return
	}
	status := corev1.ConditionUnknown
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = c.Status
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodeReady[n.Name] == status {
		return
	}
	m.nodeReady[n.Name] = status
	m.nodeLog = append(m.nodeLog, fmt.Sprintf("%s node %s Ready=%s (as the monitor's watch delivered it)", time.Now().Format("15:04:05.000"), n.Name, status))
}

// diagnostics is the report's account of the restarts and the Nodes. Caller holds mu.
func (m *monitor) diagnostics() string {
	var b strings.Builder
	for _, r := range m.apiRestarts {
		end := "still restarting"
		if !r.end.IsZero() {
			end = "serving again at " + r.end.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "API server restart from %s, %s\n", r.start.Format("15:04:05.000"), end)
	}
	if m.fresh > 0 || m.restartExcused > 0 {
		fmt.Fprintf(&b, "judgements that read the API server afresh in a reconnect window: %d; members excused as marked NotReady by the node lifecycle controller after a restart: %d judgements\n", m.fresh, m.restartExcused)
	}
	for _, l := range m.nodeLog[max(0, len(m.nodeLog)-24):] {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// markedPod is a member Pod that served and that the node lifecycle controller marked not
// Ready at `at`, with the field manager entries the API server keeps.
func markedPod(name string, at time.Time, manager string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("u-" + name), ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "chaos.test", Subresource: "status", Time: &metav1.Time{Time: at.Add(-time.Minute)}},
			{Manager: manager, Subresource: "status", Time: &metav1.Time{Time: at}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
}

func TestMembersTheNodeControllerMarkedAfterAnAPIServerRestartAreExcusedAndNoOthers(t *testing.T) {
	now := time.Now()
	m := watchedFleet(false, 0)
	f := servingFleet(m, 4)
	// a restart whose watches have resumed (no fresh read needed), still in its effect window
	m.apiRestarts = []*apiRestart{{start: now.Add(-80 * time.Second), end: now.Add(-70 * time.Second)}}
	markedAt := now.Add(-75 * time.Second)
	for _, name := range []string{"pf-1", "pf-2"} {
		f.pods[name] = memberPodOf(f, markedPod(name, markedAt, nodeControllerManager))
	}
	f.pods["pf-3"] = memberPod{name: "pf-3", ordinal: 3, terminating: true} // the operator's delete
	m.judgeMembers(f)
	f.twoDownAt = now.Add(-time.Minute)
	m.judgeMembers(f)
	if m.Violation() != "" {
		t.Fatalf("two members the node controller marked after a restart and one the operator took down: one by the operator, allowed: %s", m.Violation())
	}
	// a member marked NotReady by someone else (the kubelet's prober) is not the restart's doing
	f.pods["pf-2"] = memberPodOf(f, markedPod("pf-2", markedAt, "celldsim"))
	m.judgeMembers(f)
	f.twoDownAt = now.Add(-time.Minute)
	m.judgeMembers(f)
	if !strings.Contains(m.Violation(), ruleMembers) {
		t.Fatalf("a member down for another reason and one the operator took down: rule a must fail, got %q", m.Violation())
	}
	// outside every restart's window the node controller's mark excuses nothing
	m = watchedFleet(false, 0)
	m.apiRestarts = []*apiRestart{{start: now.Add(-5 * time.Minute), end: now.Add(-4 * time.Minute)}}
	if !nodeMarkedAt(markedPod("x", now, nodeControllerManager)).Equal(now) || m.restartMarked(now) || m.restartMarked(now.Add(-6*time.Minute)) {
		t.Fatal("a mark outside a journaled restart's window is not excused")
	}
	if !nodeMarkedAt(markedPod("x", now, "celldsim")).IsZero() {
		t.Fatal("a NotReady written by the kubelet's prober is no node controller mark")
	}
}

func TestInTheReconnectWindowRuleAFailsOnlyOnAFreshRead(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pf"}, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3))}}
	pod := func(i int, ready bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("pf-", i), Labels: map[string]string{v1.LabelFleetUID: "u1"}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
		}
	}
	for _, c := range []struct {
		name  string
		fresh []bool // readiness of pf-0..2 on the API server
		fails bool
	}{
		{"the watch was behind: every member serves", []bool{true, true, true}, false},
		{"the API server shows two members down", []bool{true, false, false}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := []runtime.Object{sts}
			for i, r := range c.fresh {
				objs = append(objs, pod(i, r))
			}
			m := watchedFleet(false, 0)
			m.cs = fake.NewClientset(objs...)
			f := servingFleet(m, 3)
			m.apiRestarts = []*apiRestart{{start: time.Now().Add(-30 * time.Second), end: time.Now().Add(-10 * time.Second)}}
			f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1}
			f.pods["pf-2"] = memberPod{name: "pf-2", ordinal: 2}
			m.judgeMembers(f)
			f.twoDownAt = time.Now().Add(-time.Minute)
			m.judgeMembers(f)
			if m.Violation() != "" || !f.verifying {
				t.Fatalf("in the reconnect window a suspicion waits for a fresh read: %q, verifying %v", m.Violation(), f.verifying)
			}
			m.verifyMembers("ns", "pf", "u1", true)
			if failed := strings.Contains(m.Violation(), ruleMembers); failed != c.fails {
				t.Fatalf("rule a failed %v, want %v: %q", failed, c.fails, m.Violation())
			}
		})
	}
}
