package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Timings of the self-healing chain. Each is a Facts field as well, so an end-to-end suite can
// shorten it the way the operator's --member-replacement-delay flag does; a zero field means
// the default.
const (
	// DefaultReplacementDelay is patience, not the safety condition: it outlasts the roughly
	// six minutes Kubernetes takes to force-detach a volume from a lost node, and typical node
	// provisioning, so a member that can return usually does so on its own disk.
	DefaultReplacementDelay = 10 * time.Minute
	// DefaultAbsorbWindow is how long every other member must have been Ready before a down
	// member's disk may be given up. Leaders drop a departed member within seconds and every
	// node sweeps dead leaders every 30 s, so after five minutes no session depends on it.
	DefaultAbsorbWindow = 5 * time.Minute
	// DefaultTerminationMargin is how long past the end of its termination grace a Pod may stay
	// before it is force-deleted: two minutes past the grace, its node has stopped answering and
	// will never confirm the termination.
	DefaultTerminationMargin = 2 * time.Minute

	// diskMadeForPod: a claim created less than this before its Pod was made for that Pod (the
	// StatefulSet creates both together), so a fresh disk would not help that member.
	diskMadeForPod = time.Minute
)

// Facts is everything one lifecycle decision needs, observed once per reconcile.
type Facts struct {
	// Now is the reconcile's clock.
	Now time.Time
	// ReplacementDelay, AbsorbWindow and TerminationMargin override the defaults when non-zero.
	ReplacementDelay  time.Duration
	AbsorbWindow      time.Duration
	TerminationMargin time.Duration

	// Paused is spec.maintenance.paused: no workload write and no self-healing action.
	Paused bool
	// OrderedBucket marks a Bucket fleet on an Ordered StatefulSet. Its members have no claims,
	// so of the self-healing chain only the force-delete rule applies.
	OrderedBucket bool
	// Fleet is the fleet's name; member N is Fleet-N and its claim data-Fleet-N.
	Fleet string
	// Declared is spec.replicas after defaulting: the count a full stop returns to.
	Declared int32
	// Applied is the replica count this reconcile applies to the StatefulSet: the answer of
	// Growth, Contraction or FullStop, or the live count. Heal treats a reconcile in which it
	// differs from Workload.Replicas as one that writes the StatefulSet, and such a reconcile
	// replaces nothing (#79). Plan fills it.
	Applied int32

	// Workload is the live StatefulSet.
	Workload Workload
	// Members is indexed by ordinal. It covers the current members and every ordinal above
	// them that still has a kept claim (a removed member's disk), which growth reattaches.
	Members []Member
}

// Workload holds the facts of the live StatefulSet.
type Workload struct {
	Exists bool
	// Replicas is spec.replicas: the applied count.
	Replicas int32
	// TemplateMatches: the operator-owned spec other than the replica count (template, update
	// strategy, claim retention) equals what the operator renders, so only a replica change
	// could make this reconcile write the StatefulSet.
	TemplateMatches bool
	// Generation and ObservedGeneration are metadata.generation and status.observedGeneration.
	Generation         int64
	ObservedGeneration int64
	// UpdatedReplicas and ReadyReplicas are the status counts.
	UpdatedReplicas int32
	ReadyReplicas   int32
	// RevisionCurrent is status.currentRevision == status.updateRevision: no roll in progress.
	RevisionCurrent bool
	// UpdateRevision is status.updateRevision: the revision of the current template, once
	// observed.
	UpdateRevision string
}

// Member is one ordinal's Pod and claim; either may be absent.
type Member struct {
	Pod   Pod
	Claim Claim
}

// Pod holds the facts of one member Pod.
type Pod struct {
	Exists          bool
	UID             types.UID
	ResourceVersion string
	Created         time.Time
	// Scheduled: the Pod is bound to a node.
	Scheduled bool
	// Unschedulable: PodScheduled=False with reason Unschedulable, since UnschedulableSince,
	// with the scheduler's message.
	Unschedulable      bool
	UnschedulableSince time.Time
	SchedulerMessage   string
	// Ready is the Ready condition; ReadyTransition is its last transition, or the Pod's
	// creation when the kubelet has not reported it yet. A Pod that is not Ready has been down
	// since ReadyTransition.
	Ready           bool
	ReadyTransition time.Time
	// Deleting: metadata.deletionTimestamp is set. GraceEnds is that timestamp, which the API
	// server sets to the delete request plus the termination grace, so it is the end of grace.
	Deleting  bool
	GraceEnds time.Time
	// ConfigWait is the waiting reason of a container or init container that waits on its
	// image or configuration (ErrImagePull, ImagePullBackOff, InvalidImageName,
	// ErrImageNeverPull, CreateContainerConfigError), or empty.
	ConfigWait string
	// Revision is the StatefulSet revision the Pod was made from (controller-revision-hash).
	Revision string
	// Crash, when set, says the Pod keeps exiting: a container that has restarted after a
	// non-zero exit (or waits in CrashLoopBackOff) and is not Ready.
	Crash *Crash
	// ZoneGated: the Pod carries the Ordered layout's zone scheduling gate, which the operator
	// lifts once it has pinned the Pod to its ordinal's zone.
	ZoneGated bool
}

// Crash is the last failed exit of a crash-looping container.
type Crash struct {
	Container string
	ExitCode  int32
	// Message is the container's termination message (celld writes why it refused to start),
	// cut to a length a condition can carry.
	Message  string
	Restarts int32
}

// Claim holds the facts of one member claim.
type Claim struct {
	Exists          bool
	UID             types.UID
	ResourceVersion string
	Phase           corev1.PersistentVolumeClaimPhase
	// Owned: the claim carries this fleet's UID label. A claim at a member's name without it
	// is never adopted.
	Owned       bool
	Created     time.Time
	Terminating bool
}

// Observed is true when the StatefulSet controller has observed the current spec.
func (w Workload) Observed() bool {
	return w.Exists && w.ObservedGeneration >= w.Generation
}

// RolledOut is true when the previous change is complete: the operator's template is applied
// and observed, every member runs the update revision and every member is Ready.
func (w Workload) RolledOut() bool {
	return w.TemplateMatches && w.Observed() && w.RevisionCurrent &&
		w.UpdatedReplicas == w.Replicas && w.ReadyReplicas == w.Replicas
}

// MembersReady is the Ready condition's count rule: at least one member, all of them Ready,
// counted only once the StatefulSet has observed its spec.
func (w Workload) MembersReady() bool {
	return w.Observed() && w.ReadyReplicas > 0 && w.ReadyReplicas == w.Replicas
}

func (f *Facts) delay() time.Duration  { return orDefault(f.ReplacementDelay, DefaultReplacementDelay) }
func (f *Facts) absorb() time.Duration { return orDefault(f.AbsorbWindow, DefaultAbsorbWindow) }
func (f *Facts) margin() time.Duration {
	return orDefault(f.TerminationMargin, DefaultTerminationMargin)
}
func (f *Facts) name(i int32) string      { return v1.MemberName(f.Fleet, i) }
func (f *Facts) claimName(i int32) string { return v1.ClaimName(f.Fleet, i) }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// absent stands for an ordinal with neither Pod nor claim; callers only read it.
var absent Member

func (f *Facts) at(i int32) *Member {
	if i >= 0 && int(i) < len(f.Members) {
		return &f.Members[i]
	}
	return &absent
}

// live: the member has a Pod that is not being deleted.
func (p *Pod) live() bool { return p.Exists && !p.Deleting }

// down: the member is not serving, whatever the reason (no Pod, a Pod being deleted, or a
// Pod that is not Ready).
func (f *Facts) down(i int32) bool {
	p := &f.at(i).Pod
	return !p.live() || !p.Ready
}

// impaired: down, or about to lose its disk (the claim is Lost or already being deleted).
// Only one impaired member at a time may be given a fresh disk.
func (f *Facts) impaired(i int32) bool {
	c := &f.at(i).Claim
	return f.down(i) || (c.Exists && (c.Terminating || c.Phase == corev1.ClaimLost))
}

// decided: the scheduler has decided the member's Pod, placing it on a node or finding no
// node for it. A missing Pod or one being deleted is about to be recreated, so it is not.
func (f *Facts) decided(i int32) bool {
	p := &f.at(i).Pod
	return p.live() && (p.Scheduled || p.Unschedulable)
}

// settled: the StatefulSet runs the operator's current template and replica count and has
// observed them, so no rollout is about to recreate another member and this reconcile writes
// nothing. A reconcile that writes the StatefulSet replaces nothing.
func (f *Facts) settled() bool {
	w := &f.Workload
	return w.TemplateMatches && w.Observed() && f.Applied == w.Replicas
}

// undecidedOther returns the lowest current member other than x whose Pod the scheduler has
// not decided, or -1.
func (f *Facts) undecidedOther(x int32) int32 {
	for i := range f.Workload.Replicas {
		if i != x && !f.decided(i) {
			return i
		}
	}
	return -1
}

// fresh is the placement rule of #79: a member may get a fresh disk only when the StatefulSet
// is settled and the scheduler has decided every other member's Pod. A pending member leaves
// its zone looking empty to the zone spread, so a fresh disk created at that moment could
// take the zone the pending member needs.
func (f *Facts) fresh(x int32) bool {
	return f.settled() && f.undecidedOther(x) < 0
}
