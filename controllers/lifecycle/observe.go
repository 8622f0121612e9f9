package lifecycle

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// WorkloadFacts reads a live StatefulSet. templateMatches is the reconciler's comparison of
// the operator-owned spec other than replicas with the rendered one. A nil StatefulSet is
// absent.
func WorkloadFacts(s *appsv1.StatefulSet, templateMatches bool) Workload {
	if s == nil {
		return Workload{}
	}
	return Workload{
		Exists:             true,
		Replicas:           ReplicasOf(s.Spec.Replicas),
		TemplateMatches:    templateMatches,
		Generation:         s.Generation,
		ObservedGeneration: s.Status.ObservedGeneration,
		UpdatedReplicas:    s.Status.UpdatedReplicas,
		ReadyReplicas:      s.Status.ReadyReplicas,
		RevisionCurrent:    s.Status.CurrentRevision == s.Status.UpdateRevision,
		UpdateRevision:     s.Status.UpdateRevision,
	}
}

// ReplicasOf is spec.replicas with the API's default of 1 for an unset field.
func ReplicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// DeploymentFacts reads a live Deployment as a Workload: its rollout is current when it runs
// no Pods besides the applied count (status.replicas counts old and new ReplicaSets). A nil
// Deployment is absent.
func DeploymentFacts(d *appsv1.Deployment, templateMatches bool) Workload {
	if d == nil {
		return Workload{}
	}
	replicas := ReplicasOf(d.Spec.Replicas)
	return Workload{
		Exists:             true,
		Replicas:           replicas,
		TemplateMatches:    templateMatches,
		Generation:         d.Generation,
		ObservedGeneration: d.Status.ObservedGeneration,
		UpdatedReplicas:    d.Status.UpdatedReplicas,
		ReadyReplicas:      d.Status.ReadyReplicas,
		RevisionCurrent:    d.Status.Replicas == replicas,
	}
}

// ZoneGated: p carries the Ordered layout's zone scheduling gate.
func ZoneGated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v1.SchedulingGateBucketZone })
}

// PodFacts reads a member Pod.
func PodFacts(p *corev1.Pod) Pod {
	out := Pod{
		Exists:          true,
		UID:             p.UID,
		ResourceVersion: p.ResourceVersion,
		Created:         p.CreationTimestamp.Time,
		Scheduled:       p.Spec.NodeName != "",
		ReadyTransition: p.CreationTimestamp.Time,
	}
	if p.DeletionTimestamp != nil {
		out.Deleting, out.GraceEnds = true, p.DeletionTimestamp.Time
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		switch c.Type {
		case corev1.PodReady:
			out.Ready = c.Status == corev1.ConditionTrue
			if !c.LastTransitionTime.IsZero() {
				out.ReadyTransition = c.LastTransitionTime.Time
			}
		case corev1.PodScheduled:
			if c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				out.Unschedulable = true
				out.UnschedulableSince = c.LastTransitionTime.Time
				out.SchedulerMessage = c.Message
			}
		}
	}
	out.ConfigWait = configWait(p.Status.InitContainerStatuses)
	if out.ConfigWait == "" {
		out.ConfigWait = configWait(p.Status.ContainerStatuses)
	}
	out.Revision = p.Labels[appsv1.ControllerRevisionHashLabelKey]
	out.ZoneGated = ZoneGated(p)
	if !out.Ready {
		out.Crash = crash(p.Status.InitContainerStatuses)
		if out.Crash == nil {
			out.Crash = crash(p.Status.ContainerStatuses)
		}
	}
	return out
}

// maxCrashMessage bounds the termination message carried into a condition.
const maxCrashMessage = 256

// crash finds a container that keeps exiting: it restarted at least once after a non-zero exit,
// or waits in CrashLoopBackOff. Its latest failed exit is the current state when it is between
// restarts, the last termination state otherwise.
func crash(statuses []corev1.ContainerStatus) *Crash {
	for i := range statuses {
		st := &statuses[i]
		backoff := st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff"
		last := st.State.Terminated
		if last == nil || last.ExitCode == 0 {
			last = st.LastTerminationState.Terminated
		}
		if last == nil || last.ExitCode == 0 || (st.RestartCount < 1 && !backoff) {
			continue
		}
		msg := strings.TrimSpace(last.Message)
		if len(msg) > maxCrashMessage {
			msg = msg[:maxCrashMessage] + "..."
		}
		return &Crash{Container: st.Name, ExitCode: last.ExitCode, Message: msg, Restarts: st.RestartCount}
	}
	return nil
}

func configWait(statuses []corev1.ContainerStatus) string {
	for i := range statuses {
		if w := statuses[i].State.Waiting; w != nil && configWaits[w.Reason] {
			return w.Reason
		}
	}
	return ""
}

// ClaimFacts reads a member claim; it is Owned only when it carries fleetUID's label.
func ClaimFacts(c *corev1.PersistentVolumeClaim, fleetUID types.UID) Claim {
	return Claim{
		Exists:          true,
		UID:             c.UID,
		ResourceVersion: c.ResourceVersion,
		Phase:           c.Status.Phase,
		Owned:           fleetUID != "" && c.Labels[v1.LabelFleetUID] == string(fleetUID),
		Created:         c.CreationTimestamp.Time,
		Terminating:     c.DeletionTimestamp != nil,
	}
}

// AddPod records p as the Pod of the member its name designates. It reports false, and
// records nothing, for a Pod that is not named like a member of f.Fleet.
func (f *Facts) AddPod(p *corev1.Pod) bool {
	i, ok := v1.MemberOrdinal(f.Fleet, p.Name)
	if ok {
		f.slot(i).Pod = PodFacts(p)
	}
	return ok
}

// AddClaim records c as the claim of the member its name designates. It reports false, and
// records nothing, for a claim that is not named like a member claim of f.Fleet.
func (f *Facts) AddClaim(c *corev1.PersistentVolumeClaim, fleetUID types.UID) bool {
	i, ok := v1.ClaimOrdinal(f.Fleet, c.Name)
	if ok {
		f.slot(i).Claim = ClaimFacts(c, fleetUID)
	}
	return ok
}

func (f *Facts) slot(i int32) *Member {
	if int(i) >= len(f.Members) {
		f.Members = append(f.Members, make([]Member, int(i)+1-len(f.Members))...)
	}
	return &f.Members[i]
}
