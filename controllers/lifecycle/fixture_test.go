package lifecycle

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// t0 is the fixture clock: every test decides at this instant.
var t0 = time.Date(2026, 9, 26, 15, 4, 5, 0, time.UTC)

const schedulerMessage = "0/6 nodes are available: 2 node(s) didn't match pod topology spread constraints, 4 node(s) didn't match PersistentVolume's node affinity. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling"

type edit func(*Facts)

// fleet returns fleet "f" with n members, settled: its StatefulSet runs the operator's
// template and count and has observed them, and every member has been Ready for an hour on a
// disk made a day before its Pod.
func fleet(n int32, edits ...edit) Facts {
	f := Facts{
		Now: t0, Fleet: "f", Declared: n, Applied: n,
		Workload: Workload{
			Exists: true, Replicas: n, TemplateMatches: true, Generation: 7, ObservedGeneration: 7,
			UpdatedReplicas: n, ReadyReplicas: n, RevisionCurrent: true, UpdateRevision: "rev-a",
		},
	}
	for i := range n {
		f.Members = append(f.Members, Member{Pod: healthyPod(i), Claim: keptClaim(i)})
	}
	for _, e := range edits {
		e(&f)
	}
	return f
}

func healthyPod(i int32) Pod {
	return Pod{
		Exists: true, UID: uid("pod", i), ResourceVersion: fmt.Sprint(100 + i),
		Created: t0.Add(-2 * time.Hour), Scheduled: true,
		Ready: true, ReadyTransition: t0.Add(-time.Hour), Revision: "rev-a",
	}
}

func keptClaim(i int32) Claim {
	return Claim{
		Exists: true, UID: uid("claim", i), ResourceVersion: fmt.Sprint(200 + i),
		Phase: corev1.ClaimBound, Owned: true, Created: t0.Add(-24 * time.Hour),
	}
}

func uid(kind string, i int32) types.UID { return types.UID(fmt.Sprintf("%s-uid-%d", kind, i)) }

func member(f *Facts, i int32) *Member {
	for int(i) >= len(f.Members) {
		f.Members = append(f.Members, Member{})
	}
	return &f.Members[i]
}

// downFor: member i's Pod is scheduled and running but has not been Ready for d.
func downFor(i int32, d time.Duration) edit {
	return func(f *Facts) {
		p := &member(f, i).Pod
		p.Ready, p.ReadyTransition = false, t0.Add(-d)
		f.Workload.ReadyReplicas--
	}
}

// readyFor: member i has been Ready for only d.
func readyFor(i int32, d time.Duration) edit {
	return func(f *Facts) { member(f, i).Pod.ReadyTransition = t0.Add(-d) }
}

// unschedulableFor: member i's Pod was recreated d ago and the scheduler has found no node
// for it since.
func unschedulableFor(i int32, d time.Duration) edit {
	return func(f *Facts) {
		p := &member(f, i).Pod
		*p = Pod{
			Exists: true, UID: uid("pending", i), ResourceVersion: "300",
			Created: t0.Add(-d), ReadyTransition: t0.Add(-d),
			Unschedulable: true, UnschedulableSince: t0.Add(-d), SchedulerMessage: schedulerMessage,
		}
		f.Workload.ReadyReplicas--
	}
}

// undecided: member i's Pod exists but the scheduler has not tried it yet.
func undecided(i int32) edit {
	return func(f *Facts) {
		member(f, i).Pod = Pod{Exists: true, UID: uid("new", i), Created: t0, ReadyTransition: t0}
		f.Workload.ReadyReplicas--
	}
}

// recreating: member i has no Pod; the StatefulSet is about to create it.
func recreating(i int32) edit {
	return func(f *Facts) { member(f, i).Pod = Pod{}; f.Workload.ReadyReplicas-- }
}

// terminating: member i's Pod was deleted and its grace ended past ago.
func terminating(i int32, past time.Duration) edit {
	return func(f *Facts) {
		p := &member(f, i).Pod
		p.Deleting, p.GraceEnds, p.Ready = true, t0.Add(-past), false
		p.ReadyTransition = t0.Add(-past)
	}
}

// crashing: member i keeps exiting (code 1, three restarts), not Ready for d.
func crashing(i int32, d time.Duration) edit {
	return all(downFor(i, d), func(f *Facts) {
		member(f, i).Pod.Crash = &Crash{Container: "celld", ExitCode: 1, Message: "refused CELLD_LTX_PAGED=yes", Restarts: 3}
	})
}

// onRevision: member i's Pod was made from revision rev.
func onRevision(i int32, rev string) edit {
	return func(f *Facts) { member(f, i).Pod.Revision = rev }
}

// updateRevision: the StatefulSet's current template is revision rev.
func updateRevision(rev string) edit {
	return func(f *Facts) { f.Workload.UpdateRevision = rev }
}

func waitingOn(i int32, reason string) edit {
	return func(f *Facts) { member(f, i).Pod.ConfigWait = reason }
}

// diskMadeForItsPod: member i's claim was created with its current Pod.
func diskMadeForItsPod(i int32) edit {
	return func(f *Facts) {
		m := member(f, i)
		m.Claim.Created = m.Pod.Created.Add(-30 * time.Second)
	}
}

func claimPhase(i int32, phase corev1.PersistentVolumeClaimPhase) edit {
	return func(f *Facts) { member(f, i).Claim.Phase = phase }
}

func claimDeleted(i int32) edit {
	return func(f *Facts) { member(f, i).Claim.Terminating = true }
}

// keptClaims: the removed members from..to-1 left their claims.
func keptClaims(from, to int32) edit {
	return func(f *Facts) {
		for i := from; i < to; i++ {
			member(f, i).Claim = keptClaim(i)
		}
	}
}

func foreignClaimAt(i int32) edit {
	return func(f *Facts) {
		c := keptClaim(i)
		c.Owned = false
		member(f, i).Claim = c
	}
}

var (
	paused        edit = func(f *Facts) { f.Paused = true }
	orderedBucket edit = func(f *Facts) {
		f.OrderedBucket = true
		for i := range f.Members {
			f.Members[i].Claim = Claim{}
		}
	}
	templateDrift edit = func(f *Facts) { f.Workload.TemplateMatches = false }
	unobserved    edit = func(f *Facts) { f.Workload.Generation++ }
	noWorkload    edit = func(f *Facts) { f.Workload = Workload{} }
)

func all(edits ...edit) edit {
	return func(f *Facts) {
		for _, e := range edits {
			e(f)
		}
	}
}

func applying(n int32) edit { return func(f *Facts) { f.Applied = n } }

func rolling(f *Facts) { f.Workload.RevisionCurrent = false; f.Workload.UpdatedReplicas-- }

func replicas(n int32) edit {
	return func(f *Facts) {
		f.Workload.Replicas, f.Applied = n, n
		f.Workload.UpdatedReplicas, f.Workload.ReadyReplicas = n, n
	}
}
