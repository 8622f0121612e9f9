package lifecycle

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Action is the one disruptive step a self-healing decision asks for.
type Action int

const (
	// None: nothing to do; the decision may still explain a wait.
	None Action = iota
	// ForceDeletePod deletes Pod with grace 0 and a UID precondition. The StatefulSet
	// recreates it and the member keeps its disk.
	ForceDeletePod
	// ReplaceMember runs the replacement handoff: the Pod first (UID and resourceVersion
	// preconditions), then the claim (UID and resourceVersion preconditions). Pod is empty when
	// the member has no Pod; then only the claim is deleted. The StatefulSet recreates both and
	// the member returns on a fresh disk.
	ReplaceMember
	// DeletePod deletes Pod (UID and resourceVersion preconditions) so the already deleted claim
	// it still holds can be released.
	DeletePod
)

func (a Action) String() string {
	switch a {
	case ForceDeletePod:
		return "ForceDeletePod"
	case ReplaceMember:
		return "ReplaceMember"
	case DeletePod:
		return "DeletePod"
	}
	return "None"
}

// Ref names one object and the preconditions a delete of it carries.
type Ref struct {
	Name            string
	UID             types.UID
	ResourceVersion string
}

// Decision is the outcome of the self-healing chain.
type Decision struct {
	Action Action
	// Ordinal is the member acted on or reported, -1 when none.
	Ordinal int32
	Pod     Ref
	Claim   Ref
	// Reason and Message feed the lifecycle conditions: LifecycleProgress for an action,
	// Provisioning for a wait, MemberUnschedulable for a blocked member, MaintenancePaused
	// when paused. An empty Reason means healing has nothing to report.
	Reason  string
	Message string
	// Event and EventMessage are the Warning event of an action; Event is empty when the
	// action carries none.
	Event        string
	EventMessage string
	// RequeueAfter is when the facts next change on their own (a replacement or force-delete
	// becoming due, Blocked becoming due); zero when nothing is scheduled.
	RequeueAfter time.Duration
}

// PausedMessage is the message of a paused fleet.
const PausedMessage = "Workload changes suspended"

// configWaits are the waiting reasons of a member that waits on its image or configuration. A
// fresh disk would not help such a member, so it is never replaced.
var configWaits = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
}

// rule is one link of the self-healing chain: it returns a decision and whether the chain
// stops there.
type rule func(f *Facts) (Decision, bool)

// healChain is in priority order; the first rule that decides wins, so one reconcile takes at
// most one action.
var healChain = []rule{
	forceDeleteStuckPod,
	replaceLostDisk,
	recreateOnCurrentTemplate,
	replaceDownMember,
	releaseDeletedClaim,
	explainWait,
}

// Heal returns the one self-healing action to take for a StatefulSet fleet, or none with the
// reason it waits. A paused fleet gets no action at all.
func Heal(f Facts) Decision {
	if f.Paused {
		return Decision{Ordinal: -1, Reason: v1.ReasonMaintenancePaused, Message: PausedMessage}
	}
	for _, r := range healChain {
		if d, stop := r(&f); stop {
			return d
		}
	}
	return Decision{Ordinal: -1}
}

// forceDeleteStuckPod: a member Pod still present TerminationMargin after its grace ended has
// a node that no longer answers. Force-deleting it lets the StatefulSet recreate the member on
// its own disk. Every tracked ordinal counts, a removed member's Pod included, and this is the
// one rule that also applies to Ordered Bucket fleets.
func forceDeleteStuckPod(f *Facts) (Decision, bool) {
	for i := range int32(len(f.Members)) {
		p := &f.Members[i].Pod
		if !p.Exists || !p.Deleting || f.Now.Before(p.GraceEnds.Add(f.margin())) {
			continue
		}
		name := f.name(i)
		msg := "Force-deleted Pod " + name + ": its node has not confirmed termination; the member returns on its own disk"
		return Decision{
			Action: ForceDeletePod, Ordinal: i, Pod: Ref{Name: name, UID: p.UID},
			Reason: v1.ReasonLifecycleProgress, Message: msg,
			Event: v1.EventMemberForceDeleted, EventMessage: msg,
		}, true
	}
	if f.OrderedBucket {
		return Decision{Ordinal: -1, RequeueAfter: f.untilForceDelete()}, true
	}
	return Decision{}, false
}

// replaceLostDisk: a claim in phase Lost has no volume behind it, so the member cannot come
// back on its own; it is replaced even while another member is down. The placement rule
// still applies: the fresh disk waits until the StatefulSet is settled and every other Pod
// is decided, and the Pod must not be terminating already.
func replaceLostDisk(f *Facts) (Decision, bool) {
	for i := range f.Workload.Replicas {
		m := f.at(i)
		if !m.Claim.Exists || m.Claim.Terminating || m.Claim.Phase != corev1.ClaimLost {
			continue
		}
		if m.Pod.Exists && m.Pod.Deleting || !f.fresh(i) {
			return f.dueWait(i), true
		}
		msg := "Replacing member " + f.name(i) + ": its volume no longer exists; celld records a bounded loss for any session with no other copy"
		return f.replace(i, v1.EventMemberDiskLost, msg), true
	}
	return Decision{}, false
}

// recreateOnCurrentTemplate: Kubernetes' StatefulSet stops a rolling update at a member that
// never becomes Ready, and reverting the template does not move that member: its Pod stays on
// the revision it was made from, crash-looping, until someone deletes it. When the operator's
// template is applied and observed, exactly one member is down, and that member's Pod was made
// from another revision and keeps exiting (or has not been Ready for the absorb window), its Pod
// is deleted, keeping its claim, so the StatefulSet recreates it from the current template on
// the same disk. Every other member is Ready, so this never takes a second member down.
func recreateOnCurrentTemplate(f *Facts) (Decision, bool) {
	w := &f.Workload
	if !w.TemplateMatches || !w.Observed() || w.UpdateRevision == "" || f.Applied != w.Replicas {
		return Decision{}, false
	}
	x, n := f.downMembers()
	if n != 1 {
		return Decision{}, false
	}
	m := f.at(x)
	p := &m.Pod
	if !p.live() || !p.Scheduled || p.Revision == "" || p.Revision == w.UpdateRevision || m.Claim.Terminating {
		return Decision{}, false
	}
	why := "has not been Ready since " + stamp(p.ReadyTransition)
	if p.Crash != nil {
		why = "keeps exiting (" + p.Crash.describe() + ")"
	} else if f.Now.Before(p.ReadyTransition.Add(f.absorb())) {
		return Decision{}, false // it may still come up on its own revision
	}
	msg := "Recreating member " + f.name(x) + " from the current template: its Pod was made from revision " + p.Revision +
		" and " + why + ", and Kubernetes does not replace it after the template changed; it keeps its disk"
	return Decision{
		Action: DeletePod, Ordinal: x,
		Pod:    Ref{Name: f.name(x), UID: p.UID, ResourceVersion: p.ResourceVersion},
		Reason: v1.ReasonLifecycleProgress, Message: msg,
		Event: v1.EventMemberRecreated, EventMessage: msg,
	}, true
}

// describe says how a container keeps exiting, for a condition message. The restart count is
// left out: it grows with every restart, and a message that changes would rewrite status.
func (c *Crash) describe() string {
	out := "container " + c.Container + " keeps exiting with code " + strconv.Itoa(int(c.ExitCode))
	if c.Message != "" {
		out += ": " + c.Message
	}
	return out
}

// replaceDownMember: exactly one member is down, a fresh disk would help it, and it has been
// down for the replacement delay while every other member has been Ready for the absorb
// window. Then no session depends on its disk, and it returns on a fresh one.
func replaceDownMember(f *Facts) (Decision, bool) {
	x, n := f.downMembers()
	if n != 1 || !f.down(x) {
		return Decision{}, false
	}
	v := f.judge(x)
	if !v.eligible || f.Now.Before(v.due) || !f.fresh(x) {
		return Decision{}, false
	}
	msg := "Replacing member " + f.name(x) + ": down since " + stamp(v.since) + " while the rest of the fleet is ready; it returns on a fresh disk"
	return f.replace(x, v1.EventMemberReplaced, msg), true
}

// releaseDeletedClaim: a member's claim is already being deleted (by a replacement or by hand)
// but a scheduled Pod still holds it, so the old disk is never released. Deleting the Pod lets
// the StatefulSet recreate the member on a fresh disk. It waits for the placement rule, and it
// never takes a Ready member down while another member is down. Another member whose claim is
// also being deleted but whose Pod is Ready is not down: counting it would make two such
// members wait for each other forever, so the lowest goes first and the next waits until it is
// Ready again.
func releaseDeletedClaim(f *Facts) (Decision, bool) {
	for i := range f.Workload.Replicas {
		m := f.at(i)
		if !m.Claim.Exists || !m.Claim.Terminating || !m.Pod.live() || !m.Pod.Scheduled {
			continue
		}
		if !f.fresh(i) || (m.Pod.Ready && f.otherDown(i) >= 0) {
			return Decision{
				Ordinal: i, Reason: v1.ReasonProvisioning,
				Message: "Waiting to replace member " + f.name(i) + ": its claim is deleted and its Pod is deleted once no other member is down or pending",
			}, true
		}
		return Decision{
			Action: DeletePod, Ordinal: i,
			Pod:     Ref{Name: f.name(i), UID: m.Pod.UID, ResourceVersion: m.Pod.ResourceVersion},
			Reason:  v1.ReasonLifecycleProgress,
			Message: "Replacing member " + f.name(i) + ": deleting its Pod so its old disk can be released",
		}, true
	}
	return Decision{}, false
}

// replace builds the ReplaceMember decision for member i.
func (f *Facts) replace(i int32, event, msg string) Decision {
	m := f.at(i)
	d := Decision{
		Action: ReplaceMember, Ordinal: i,
		Claim:  Ref{Name: f.claimName(i), UID: m.Claim.UID, ResourceVersion: m.Claim.ResourceVersion},
		Reason: v1.ReasonLifecycleProgress, Message: msg,
		Event: event, EventMessage: msg,
	}
	if m.Pod.Exists {
		d.Pod = Ref{Name: f.name(i), UID: m.Pod.UID, ResourceVersion: m.Pod.ResourceVersion}
	}
	return d
}

// downMembers returns the lowest impaired current member and how many are impaired.
func (f *Facts) downMembers() (first int32, n int) {
	first = -1
	for i := range f.Workload.Replicas {
		if f.impaired(i) {
			if n == 0 {
				first = i
			}
			n++
		}
	}
	return first, n
}

// otherDown returns the lowest current member other than x that is down (no live, Ready Pod),
// or -1. A serving member whose claim is going is not down.
func (f *Facts) otherDown(x int32) int32 {
	for i := range f.Workload.Replicas {
		if i != x && f.down(i) {
			return i
		}
	}
	return -1
}

// verdict says whether the one down member may get a fresh disk, and from when.
type verdict struct {
	eligible  bool
	crashLoop bool      // it keeps exiting on a template no ready member runs
	why       string    // when not eligible, why a fresh disk would not help or is not allowed
	since     time.Time // down since
	due       time.Time // since + delay, or later while the rest is inside the absorb window
}

// judge applies the conditions of the replacement rule, other than the clock and the
// placement rule, to member x, assumed to be the only impaired member.
func (f *Facts) judge(x int32) verdict {
	m := f.at(x)
	p, c := &m.Pod, &m.Claim
	v := verdict{since: p.ReadyTransition}
	switch {
	case !p.Exists:
		v.why = "its Pod is being recreated"
	case p.Deleting:
		v.why = "its Pod is terminating"
	case p.ConfigWait != "":
		v.why = "it waits on its image or configuration (" + p.ConfigWait + "); a fresh disk would not help, so it is not replaced"
	case p.Crash != nil && !f.revisionServes(x):
		// The first member on a new template that keeps exiting points at the template (a value
		// celld refuses, an image that does not start), not at the disk: a fresh disk would
		// only cost a full recovery and fail the same way.
		v.crashLoop = true
		v.why = "it keeps exiting (" + p.Crash.describe() + ") on a template that no ready member runs (revision " + p.Revision +
			"); a fresh disk would not fix a configuration, so it is not replaced: correct the fleet's last change, and the member is recreated from the corrected template"
	case c.Exists && c.Terminating:
		v.why = "its old claim is being deleted"
	case !c.Exists || c.Phase != corev1.ClaimBound:
		v.why = "it has no disk yet"
	case p.Created.Sub(c.Created) <= diskMadeForPod:
		v.why = "it is on a disk made for its current Pod; a fresh disk would not help, so it is not replaced"
	case f.Workload.Replicas < 2:
		// Never give up every member's disk: with no other member, every session's only
		// copy is on this one.
		v.why = "it is the only member, and its disk holds the only copy of its sessions, so it is not replaced"
	default:
		v.eligible = true
		v.due = v.since.Add(f.delay())
		for i := range f.Workload.Replicas {
			if i != x {
				v.due = later(v.due, f.at(i).Pod.ReadyTransition.Add(f.absorb()))
			}
		}
	}
	return v
}

// dueWait reports a member whose fresh disk is due but waits for the placement rule.
func (f *Facts) dueWait(i int32) Decision {
	return Decision{
		Ordinal: i, Reason: v1.ReasonProvisioning,
		Message: "Waiting for ready replicas; member " + f.name(i) + " is down; it is due to be replaced on a fresh disk",
	}
}

// revisionServes: another member made from x's revision is Ready, so that revision's template
// can run and x's trouble is its own (its disk, say). An unknown revision is given the benefit.
func (f *Facts) revisionServes(x int32) bool {
	rev := f.at(x).Pod.Revision
	if rev == "" {
		return true
	}
	for i := range f.Workload.Replicas {
		if p := &f.at(i).Pod; i != x && p.live() && p.Ready && p.Revision == rev {
			return true
		}
	}
	return false
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
