package celldsim

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ourStatus finds the status of the celld container (else the first) in the pod.
func ourStatus(p *corev1.Pod) corev1.ContainerStatus {
	name := ContainerName
	if len(p.Spec.Containers) > 0 {
		name = p.Spec.Containers[0].Name
		for _, c := range p.Spec.Containers {
			if c.Name == ContainerName {
				name = c.Name
			}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return corev1.ContainerStatus{Name: name}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeStatus patches the pod when readiness or our container's status differs from what
// the API shows. A re-patch of the same readiness waits 2 s for the watch to catch up.
func (m *member) writeStatus() {
	m.mu.Lock()
	if !m.powered || m.deleted || m.pod.DeletionTimestamp != nil && m.proc == nil {
		m.mu.Unlock()
		return
	}
	want := m.proc != nil && m.probeOK
	if m.synced && podReady(m.pod) == want && (m.ready == want) {
		m.mu.Unlock()
		return
	}
	if m.synced && m.ready == want && time.Since(m.patchedAt) < 2*time.Second {
		m.mu.Unlock()
		return
	}
	body := m.statusPatch(want)
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	_, err := m.s.o.Client.CoreV1().Pods(m.ns).Patch(ctx, m.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.s.log.Printf("%s/%s status patch: %v", m.ns, m.name, err)
		return
	}
	if m.ready != want {
		m.s.log.Printf("%s/%s Ready=%v", m.ns, m.name, want)
	}
	m.ready, m.synced, m.patchedAt = want, true, time.Now()
}

// statusPatch sends the whole containerStatuses list: the field has no patch merge key, so a
// partial list would replace the others (and drop image and state).
func (m *member) statusPatch(ready bool) []byte {
	st, reason, msg := corev1.ConditionFalse, "HealthCheckFailed", "GET "+HealthPath+" did not answer 200"
	switch {
	case ready:
		st, reason, msg = corev1.ConditionTrue, "", ""
	case m.proc == nil:
		reason, msg = "ContainersNotReady", "containers with unready status: ["+m.status.Name+"]"
	}
	ours := m.status
	ours.Ready = ready
	var list []corev1.ContainerStatus
	found := false
	for _, cs := range m.pod.Status.ContainerStatuses {
		if cs.Name == ours.Name {
			cs, found = ours, true
		} else {
			cs.Ready = ready
		}
		list = append(list, cs)
	}
	if !found {
		list = append(list, ours)
	}
	cond := func(t corev1.PodConditionType) map[string]any {
		return map[string]any{"type": t, "status": st, "reason": reason, "message": msg, "lastTransitionTime": transitionTime(m.pod, t, st)}
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{
		"conditions":        []map[string]any{cond(corev1.PodReady), cond(corev1.ContainersReady)},
		"containerStatuses": list,
	}})
	return b
}

// transitionTime is the lastTransitionTime a condition of type t gets when it is written with
// status st: the time it has now when its status does not change, as the kubelet keeps it, so
// a member that keeps restarting without ever turning Ready ages as it does on a real node.
// Only a change of status stamps the present.
func transitionTime(p *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus) metav1.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == st && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime
		}
	}
	return metav1.Now()
}
