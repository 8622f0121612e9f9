package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

const (
	m = time.Minute
	h = time.Hour
)

func wait(ordinal int32, msg string, requeue time.Duration) Decision {
	return Decision{Ordinal: ordinal, Reason: v1.ReasonProvisioning, Message: msg, RequeueAfter: requeue}
}

func act(a Action, ordinal int32, event, msg string) Decision {
	d := Decision{Action: a, Ordinal: ordinal, Reason: v1.ReasonLifecycleProgress, Message: msg}
	if event != "" {
		d.Event, d.EventMessage = event, msg
	}
	return d
}

func unschedulable(ordinal int32, msg string) Decision {
	return Decision{Ordinal: ordinal, Reason: v1.ReasonMemberUnschedulable, Message: msg}
}

var nothing = Decision{Ordinal: -1}

// The rows follow the self-healing table of the PersistentFleet lifecycle: each name is the
// rule it proves, and a failure prints it.
var healRows = []struct {
	name  string
	facts Facts
	want  Decision
}{
	{"a healthy fleet: nothing to do", fleet(3), nothing},
	{"paused: nothing, not even a stuck Pod or a Lost disk",
		fleet(3, paused, terminating(1, 10*m), claimPhase(2, corev1.ClaimLost)),
		Decision{Ordinal: -1, Reason: v1.ReasonMaintenancePaused, Message: "Workload changes suspended"}},

	// Force-delete.
	{"stuck terminating 2 min past grace: force-delete", fleet(3, terminating(1, 2*m)),
		act(ForceDeletePod, 1, v1.EventMemberForceDeleted, "Force-deleted Pod f-1: its node has not confirmed termination; the member returns on its own disk")},
	{"terminating within the 2 min margin: wait for the node, requeue when due", fleet(3, terminating(1, 90*time.Second)),
		wait(1, "Waiting for ready replicas; member f-1 is down; its Pod is terminating", 30*time.Second)},
	{"force-delete comes first, even before a Lost disk", fleet(3, claimPhase(0, corev1.ClaimLost), terminating(2, 3*m)),
		act(ForceDeletePod, 2, v1.EventMemberForceDeleted, "Force-deleted Pod f-2: its node has not confirmed termination; the member returns on its own disk")},
	{"a removed member's Pod stuck terminating is force-deleted too", fleet(3, func(f *Facts) {
		member(f, 3).Pod = Pod{Exists: true, UID: "old", Deleting: true, GraceEnds: t0.Add(-5 * m)}
	}), act(ForceDeletePod, 3, v1.EventMemberForceDeleted, "Force-deleted Pod f-3: its node has not confirmed termination; the member returns on its own disk")},
	{"an Ordered Bucket member stuck terminating is force-deleted", fleet(3, orderedBucket, terminating(0, 2*m)),
		act(ForceDeletePod, 0, v1.EventMemberForceDeleted, "Force-deleted Pod f-0: its node has not confirmed termination; the member returns on its own disk")},
	{"an Ordered Bucket fleet: no disk rule applies", fleet(3, orderedBucket, downFor(1, h), unschedulableFor(2, h)), nothing},

	// Lost volumes.
	{"a Lost claim is replaced", fleet(3, claimPhase(2, corev1.ClaimLost), downFor(2, m)),
		act(ReplaceMember, 2, v1.EventMemberDiskLost, "Replacing member f-2: its volume no longer exists; celld records a bounded loss for any session with no other copy")},
	{"a Lost claim is replaced even with another member down", fleet(3, claimPhase(2, corev1.ClaimLost), downFor(0, h)),
		act(ReplaceMember, 2, v1.EventMemberDiskLost, "Replacing member f-2: its volume no longer exists; celld records a bounded loss for any session with no other copy")},
	{"a Lost claim of a member without a Pod: only the claim goes", fleet(3, claimPhase(1, corev1.ClaimLost), recreating(1)),
		act(ReplaceMember, 1, v1.EventMemberDiskLost, "Replacing member f-1: its volume no longer exists; celld records a bounded loss for any session with no other copy")},
	{"another member's pod not yet decided by the scheduler: the Lost disk waits (#79)", fleet(3, claimPhase(2, corev1.ClaimLost), undecided(0)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},
	{"another member's pod being recreated: the Lost disk waits (#79)", fleet(3, claimPhase(2, corev1.ClaimLost), recreating(0)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},
	{"the StatefulSet not settled: the Lost disk waits (#79)", fleet(3, claimPhase(2, corev1.ClaimLost), templateDrift),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},

	// One member down.
	{"one member down past the delay while the rest is ready: fresh disk", fleet(3, downFor(2, 11*m)),
		act(ReplaceMember, 2, v1.EventMemberReplaced, "Replacing member f-2: down since 2026-09-26T14:53:05Z while the rest of the fleet is ready; it returns on a fresh disk")},
	{"one member down exactly the delay: fresh disk", fleet(3, downFor(0, 10*m)),
		act(ReplaceMember, 0, v1.EventMemberReplaced, "Replacing member f-0: down since 2026-09-26T14:54:05Z while the rest of the fleet is ready; it returns on a fresh disk")},
	{"one member down before the delay: it is replaced at T+delay unless it returns", fleet(3, downFor(2, 4*m)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is replaced on a fresh disk at 2026-09-26T15:10:05Z unless it returns", 6*m)},
	{"the rest not ready for five minutes yet: wait", fleet(3, downFor(2, 20*m), readyFor(0, 2*m)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is replaced on a fresh disk at 2026-09-26T15:07:05Z unless it returns", 3*m)},
	{"a shortened delay and window (e2e) are honoured", fleet(3, downFor(1, 61*time.Second), func(f *Facts) { f.ReplacementDelay, f.AbsorbWindow = m, m }),
		act(ReplaceMember, 1, v1.EventMemberReplaced, "Replacing member f-1: down since 2026-09-26T15:03:04Z while the rest of the fleet is ready; it returns on a fresh disk")},
	{"the one member down and unschedulable, on its old disk: replaced like any other", fleet(3, unschedulableFor(2, 11*m)),
		act(ReplaceMember, 2, v1.EventMemberReplaced, "Replacing member f-2: down since 2026-09-26T14:53:05Z while the rest of the fleet is ready; it returns on a fresh disk")},
	{"the StatefulSet not settled: replacement waits (#79)", fleet(3, downFor(2, 11*m), templateDrift),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},
	{"the StatefulSet has not observed its spec: replacement waits (#79)", fleet(3, downFor(2, 11*m), unobserved),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},
	{"a reconcile that writes the replica count replaces nothing (#79)", fleet(3, downFor(2, 11*m), applying(4)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is due to be replaced on a fresh disk", 0)},
	{"a member waiting on its image is left alone", fleet(3, downFor(2, h), waitingOn(2, "ImagePullBackOff")),
		wait(2, "Waiting for ready replicas; member f-2 is down; it waits on its image or configuration (ImagePullBackOff); a fresh disk would not help, so it is not replaced", 0)},
	{"a member waiting on its configuration is left alone", fleet(3, downFor(2, h), waitingOn(2, "CreateContainerConfigError")),
		wait(2, "Waiting for ready replicas; member f-2 is down; it waits on its image or configuration (CreateContainerConfigError); a fresh disk would not help, so it is not replaced", 0)},
	{"a member already on a disk made for its current pod is left alone", fleet(3, downFor(2, h), diskMadeForItsPod(2)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it is on a disk made for its current Pod; a fresh disk would not help, so it is not replaced", 0)},
	{"a member whose claim is not Bound has no disk to replace", fleet(3, downFor(2, h), claimPhase(2, corev1.ClaimPending)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it has no disk yet", 0)},
	{"a member whose Pod is being recreated is waited for", fleet(3, recreating(2)),
		wait(2, "Waiting for ready replicas; member f-2 is down; its Pod is being recreated", 0)},
	{"a one-member fleet: its only disk is never replaced", fleet(1, downFor(0, h)),
		wait(0, "Waiting for ready replicas; member f-0 is down; it is the only member, and its disk holds the only copy of its sessions, so it is not replaced", 0)},

	// Two or more down.
	{"two members down: nobody is replaced", fleet(3, downFor(1, h), downFor(2, h)),
		wait(1, "Waiting for ready replicas; members f-1 and f-2 are down; no member is replaced while another is also down", 0)},
	{"three members down: nobody is replaced", fleet(5, downFor(0, h), downFor(2, h), recreating(4)),
		wait(0, "Waiting for ready replicas; members f-0, f-2 and f-4 are down; no member is replaced while another is also down", 0)},
	{"a member with a deleted claim counts as down: the other down member is not replaced", fleet(3, downFor(0, h), claimDeleted(2)),
		wait(2, "Waiting to replace member f-2: its claim is deleted and its Pod is deleted once no other member is down or pending", 0)},

	// MemberUnschedulable.
	{"unscheduled past the delay while another member is down: MemberUnschedulable", fleet(3, downFor(1, h), unschedulableFor(2, 11*m)),
		unschedulable(2, "Member f-2 has not been scheduled since 2026-09-26T14:53:05Z: "+schedulerMessage+"; it is not replaced while member f-1 is also down")},
	{"unscheduled past the delay while two others are down: both are named", fleet(4, downFor(0, h), unschedulableFor(1, h), recreating(3)),
		unschedulable(1, "Member f-1 has not been scheduled since 2026-09-26T14:04:05Z: "+schedulerMessage+"; it is not replaced while members f-0 and f-3 are also down")},
	{"unscheduled for less than the delay: not blocked yet, requeue when it would be", fleet(3, downFor(1, h), unschedulableFor(2, 4*m)),
		wait(1, "Waiting for ready replicas; members f-1 and f-2 are down; no member is replaced while another is also down; the scheduler has found no node for member f-2 since 2026-09-26T15:00:05Z: "+schedulerMessage, 6*m)},
	{"no disk yet and waiting only for a node past the delay: MemberUnschedulable", fleet(3, unschedulableFor(2, 11*m), claimPhase(2, corev1.ClaimPending), diskMadeForItsPod(2)),
		unschedulable(2, "Member f-2 has not been scheduled since 2026-09-26T14:53:05Z: "+schedulerMessage)},
	{"no disk yet and waiting for a node for less than the delay: Provisioning", fleet(3, unschedulableFor(2, 9*m), claimPhase(2, corev1.ClaimPending)),
		wait(2, "Waiting for ready replicas; member f-2 is down; it has no disk yet; the scheduler has found no node for member f-2 since 2026-09-26T14:55:05Z: "+schedulerMessage, m)},

	// A claim already deleted.
	{"claim already deleted but a scheduled pod still holds it: delete the pod", fleet(3, claimDeleted(2)),
		act(DeletePod, 2, "", "Replacing member f-2: deleting its Pod so its old disk can be released")},
	{"claim deleted and its Pod down: delete the pod even with no other member ready for long", fleet(3, claimDeleted(2), downFor(2, m), readyFor(0, m)),
		act(DeletePod, 2, "", "Replacing member f-2: deleting its Pod so its old disk can be released")},
	{"claim deleted while another member's pod is undecided: wait (#79)", fleet(3, claimDeleted(2), undecided(1)),
		wait(2, "Waiting to replace member f-2: its claim is deleted and its Pod is deleted once no other member is down or pending", 0)},
	// Chaos campaign seed 152507984: two claims deleted by hand while both members served. Each
	// waited for the other, counted as down only because its claim was deleted, and neither
	// was ever released. The lowest goes first; the other waits while it is down.
	{"two claims deleted by hand, both members Ready: the lowest member's Pod is deleted first", fleet(3, claimDeleted(0), claimDeleted(2)),
		act(DeletePod, 0, "", "Replacing member f-0: deleting its Pod so its old disk can be released")},
	{"two claims deleted by hand, the first member already recreated and not Ready yet: the other waits", fleet(3, recreating(0), claimDeleted(2)),
		wait(2, "Waiting to replace member f-2: its claim is deleted and its Pod is deleted once no other member is down or pending", 0)},
	{"claim deleted and the Pod not scheduled: nothing holds the disk", fleet(3, claimDeleted(2), undecided(2)),
		wait(2, "Waiting for ready replicas; member f-2 is down; its old claim is being deleted", 0)},
}

func TestHealFollowsTheSelfHealingTable(t *testing.T) {
	for _, row := range healRows {
		t.Run(row.name, func(t *testing.T) {
			got := Heal(row.facts)
			got.Pod, got.Claim = Ref{}, Ref{}
			if got != row.want {
				t.Errorf("rule violated: %s\n got: %+v\nwant: %+v", row.name, got, row.want)
			}
		})
	}
}

func TestHealTakesAtMostOneActionAndNamesItsPreconditions(t *testing.T) {
	d := Heal(fleet(3, downFor(2, 11*m)))
	want := Decision{
		Action: ReplaceMember, Ordinal: 2,
		Pod:   Ref{Name: "f-2", UID: "pod-uid-2", ResourceVersion: "102"},
		Claim: Ref{Name: "data-f-2", UID: "claim-uid-2", ResourceVersion: "202"},
	}
	if d.Action != want.Action || d.Pod != want.Pod || d.Claim != want.Claim {
		t.Errorf("a replacement must name the Pod and claim with their UIDs and resourceVersions for the delete preconditions\n got: %+v %+v\nwant: %+v %+v", d.Pod, d.Claim, want.Pod, want.Claim)
	}

	d = Heal(fleet(3, terminating(1, 5*m)))
	if d.Pod != (Ref{Name: "f-1", UID: "pod-uid-1"}) || d.Claim != (Ref{}) {
		t.Errorf("a force-delete names only the Pod, with its UID: got %+v %+v", d.Pod, d.Claim)
	}

	d = Heal(fleet(3, claimDeleted(0)))
	if d.Pod != (Ref{Name: "f-0", UID: "pod-uid-0", ResourceVersion: "100"}) || d.Claim != (Ref{}) {
		t.Errorf("releasing a deleted claim deletes only the Pod, with UID and resourceVersion: got %+v %+v", d.Pod, d.Claim)
	}

	d = Heal(fleet(3, claimPhase(1, corev1.ClaimLost), recreating(1)))
	if d.Pod != (Ref{}) || d.Claim.UID != "claim-uid-1" {
		t.Errorf("a Lost claim with no Pod deletes only the claim: got %+v %+v", d.Pod, d.Claim)
	}
}

func TestHealIsDeterministic(t *testing.T) {
	for _, row := range healRows {
		if a, b := Heal(row.facts), Heal(row.facts); a != b {
			t.Errorf("%s: the same facts gave two decisions (%+v, %+v); decisions must be re-derivable on every reconcile", row.name, a, b)
		}
	}
}

func TestHealNeverDeletesADiskWhileAnotherMemberIsDown(t *testing.T) {
	// Every combination of two members' states in a five-member fleet: a claim is only ever
	// deleted for a Lost volume, or when every other member is up.
	states := []func(int32) edit{
		func(i int32) edit { return downFor(i, h) },
		func(i int32) edit { return unschedulableFor(i, h) },
		func(i int32) edit { return recreating(i) },
		func(i int32) edit { return terminating(i, 30*time.Second) },
		func(i int32) edit { return all(downFor(i, h), waitingOn(i, "ErrImagePull")) },
		func(i int32) edit { return all(downFor(i, h), claimPhase(i, corev1.ClaimLost)) },
		func(i int32) edit { return claimDeleted(i) },
	}
	for a, sa := range states {
		for b, sb := range states {
			f := fleet(5, sa(1), sb(3))
			d := Heal(f)
			if d.Action == ReplaceMember && f.Members[d.Ordinal].Claim.Phase != corev1.ClaimLost {
				t.Errorf("states %d and %d: member f-%d was given a fresh disk while another member was down", a, b, d.Ordinal)
			}
			// down is not serving: a Ready member whose claim is being deleted still serves
			// (state 6 twice: one of them must go first, or neither ever does)
			if d.Action != DeletePod || !f.Members[d.Ordinal].Pod.Ready {
				continue
			}
			for j, m := range f.Members {
				if int32(j) != d.Ordinal && !(m.Pod.live() && m.Pod.Ready) {
					t.Errorf("states %d and %d: the Ready member f-%d was taken down while member f-%d was down", a, b, d.Ordinal, j)
				}
			}
		}
	}
}

// The crash-loop rows: a member that keeps exiting on a template no ready member runs waits for
// a corrected spec on its own disk; once the template moved on, it is recreated from it.
func TestCrashLoopingMembersWaitForTheSpecAndAreRecreatedOnceItChanges(t *testing.T) {
	const crashMsg = "container celld keeps exiting with code 1: refused CELLD_LTX_PAGED=yes"
	for _, c := range []struct {
		name  string
		facts Facts
		want  Decision
	}{
		{"the first member on a new template keeps exiting: it is not replaced, even past the delay (MemberCrashLooping)",
			fleet(3, updateRevision("rev-b"), onRevision(2, "rev-b"), crashing(2, 11*m)),
			Decision{Ordinal: 2, Reason: v1.ReasonMemberCrashLooping, Message: "Member f-2 is down: it keeps exiting (" + crashMsg +
				") on a template that no ready member runs (revision rev-b); a fresh disk would not fix a configuration, so it is not replaced: correct the fleet's last change, and the member is recreated from the corrected template"}},
		{"a member that keeps exiting on the template the ready members run: its disk is the problem, so it is replaced after the delay",
			fleet(3, crashing(2, 11*m)),
			act(ReplaceMember, 2, v1.EventMemberReplaced, "Replacing member f-2: down since 2026-09-26T14:53:05Z while the rest of the fleet is ready; it returns on a fresh disk")},
		{"the spec was reverted: the member still on the bad revision is recreated from the current template on its disk",
			fleet(3, onRevision(2, "rev-b"), crashing(2, m)),
			act(DeletePod, 2, v1.EventMemberRecreated, "Recreating member f-2 from the current template: its Pod was made from revision rev-b and keeps exiting ("+
				crashMsg+"), and Kubernetes does not replace it after the template changed; it keeps its disk")},
		{"a member stuck not Ready on an earlier revision past the absorb window is recreated",
			fleet(3, onRevision(0, "rev-b"), downFor(0, 6*m)),
			act(DeletePod, 0, v1.EventMemberRecreated, "Recreating member f-0 from the current template: its Pod was made from revision rev-b and has not been Ready since 2026-09-26T14:58:05Z, and Kubernetes does not replace it after the template changed; it keeps its disk")},
		{"a member on an earlier revision not Ready for less than the absorb window: it may still come up, so it waits",
			fleet(3, onRevision(0, "rev-b"), downFor(0, 2*m)),
			wait(0, "Waiting for ready replicas; member f-0 is down; it is replaced on a fresh disk at 2026-09-26T15:12:05Z unless it returns", 8*m)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Heal(c.facts)
			got.Pod, got.Claim = Ref{}, Ref{}
			if got != c.want {
				t.Fatalf("\n got: %+v\nwant: %+v", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		name  string
		facts Facts
	}{
		{"never while another member is down", fleet(3, onRevision(2, "rev-b"), crashing(2, m), downFor(0, m))},
		{"never while paused", fleet(3, paused, onRevision(2, "rev-b"), crashing(2, m))},
		{"never before the StatefulSet observed the current template", fleet(3, unobserved, onRevision(2, "rev-b"), crashing(2, m))},
		{"never while the StatefulSet is not the operator's rendering", fleet(3, templateDrift, onRevision(2, "rev-b"), crashing(2, m))},
		{"never for a Pod already terminating", fleet(3, onRevision(2, "rev-b"), crashing(2, m), terminating(2, 0))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Heal(c.facts); got.Action != None {
				t.Fatalf("took %s on member %d (%s); want no action", got.Action, got.Ordinal, got.Message)
			}
		})
	}
}
