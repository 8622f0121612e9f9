package lifecycle

import (
	"strings"
	"time"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// explainWait is the end of the self-healing chain: no action is due, so it says what the
// fleet waits for. One member down is told when it will be replaced, or why it will not be;
// two or more down are never replaced (a Lost volume aside), because either disk may hold
// writes that only it has. A down member the scheduler cannot place and that will not be
// replaced blocks the fleet with MemberUnschedulable once it has gone unscheduled for the
// replacement delay.
func explainWait(f *Facts) (Decision, bool) {
	var d Decision
	switch x, n := f.downMembers(); n {
	case 0:
		d = Decision{Ordinal: -1}
	case 1:
		d = f.waitOne(x)
	default:
		d = f.waitMany()
	}
	if d.Reason == v1.ReasonProvisioning {
		d.Message += f.schedulerNote()
	}
	d.RequeueAfter = soonest(d.RequeueAfter, f.untilForceDelete())
	return d, true
}

// schedulerNote names the first member the scheduler has found no node for, with the
// scheduler's own message, so a user sees why at once rather than after the replacement delay
// (when the member blocks the fleet as MemberUnschedulable). Empty when every Pod is placed.
func (f *Facts) schedulerNote() string {
	for i := range f.Workload.Replicas {
		if p := &f.at(i).Pod; p.live() && !p.Scheduled && p.Unschedulable {
			return "; the scheduler has found no node for member " + f.name(i) + " since " + stamp(p.UnschedulableSince) + ": " + p.SchedulerMessage
		}
	}
	return ""
}

// waitOne explains the wait of x, the only member down.
func (f *Facts) waitOne(x int32) Decision {
	v := f.judge(x)
	name := f.name(x)
	if v.eligible {
		if f.Now.Before(v.due) {
			return Decision{
				Ordinal: x, Reason: v1.ReasonProvisioning,
				Message:      "Waiting for ready replicas; member " + name + " is down; it is replaced on a fresh disk at " + stamp(v.due) + " unless it returns",
				RequeueAfter: v.due.Sub(f.Now),
			}
		}
		return f.dueWait(x)
	}
	if d, ok := f.blocked(x, nil); ok {
		return d
	}
	if v.crashLoop {
		return Decision{Ordinal: x, Reason: v1.ReasonMemberCrashLooping, Message: "Member " + name + " is down: " + v.why}
	}
	return Decision{
		Ordinal: x, Reason: v1.ReasonProvisioning,
		Message:      "Waiting for ready replicas; member " + name + " is down; " + v.why,
		RequeueAfter: f.untilBlocked(x),
	}
}

// waitMany explains the wait of two or more members down: nobody is replaced.
func (f *Facts) waitMany() Decision {
	var down []int32
	for i := range f.Workload.Replicas {
		if f.impaired(i) {
			down = append(down, i)
		}
	}
	var requeue time.Duration
	for _, i := range down {
		if d, ok := f.blocked(i, down); ok {
			return d
		}
		requeue = soonest(requeue, f.untilBlocked(i))
	}
	return Decision{
		Ordinal: down[0], Reason: v1.ReasonProvisioning,
		Message:      "Waiting for ready replicas; " + f.members(down) + " are down; no member is replaced while another is also down",
		RequeueAfter: requeue,
	}
}

// blocked reports member x as MemberUnschedulable when the scheduler has found no node for it
// for at least the replacement delay. down lists every member down, x included, when x is not
// replaced because the others are down too.
func (f *Facts) blocked(x int32, down []int32) (Decision, bool) {
	p := &f.at(x).Pod
	if !p.live() || p.Scheduled || !p.Unschedulable || f.Now.Before(p.UnschedulableSince.Add(f.delay())) {
		return Decision{}, false
	}
	msg := "Member " + f.name(x) + " has not been scheduled since " + stamp(p.UnschedulableSince) + ": " + p.SchedulerMessage
	if others := without(down, x); len(others) > 0 {
		verb := " is"
		if len(others) > 1 {
			verb = " are"
		}
		msg += "; it is not replaced while " + f.members(others) + verb + " also down"
	}
	return Decision{Ordinal: x, Reason: v1.ReasonMemberUnschedulable, Message: msg}, true
}

// untilBlocked is how long until member x, unschedulable now, would block the fleet; 0 when
// it is not unschedulable.
func (f *Facts) untilBlocked(x int32) time.Duration {
	p := &f.at(x).Pod
	if !p.live() || p.Scheduled || !p.Unschedulable {
		return 0
	}
	return p.UnschedulableSince.Add(f.delay()).Sub(f.Now)
}

// untilForceDelete is how long until the next terminating Pod is due to be force-deleted; 0
// when none is terminating.
func (f *Facts) untilForceDelete() time.Duration {
	var d time.Duration
	for i := range f.Members {
		if p := &f.Members[i].Pod; p.Exists && p.Deleting {
			d = soonest(d, p.GraceEnds.Add(f.margin()).Sub(f.Now))
		}
	}
	return d
}

// members names a list of members: "member f-1", "members f-1 and f-2",
// "members f-0, f-1 and f-2".
func (f *Facts) members(list []int32) string {
	var b strings.Builder
	if len(list) == 1 {
		b.WriteString("member ")
	} else {
		b.WriteString("members ")
	}
	for k, i := range list {
		switch {
		case k == 0:
		case k == len(list)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(f.name(i))
	}
	return b.String()
}

func without(list []int32, x int32) []int32 {
	out := make([]int32, 0, len(list))
	for _, i := range list {
		if i != x {
			out = append(out, i)
		}
	}
	return out
}

// soonest is the earlier of two positive durations, ignoring zero or negative ones (a
// deadline already passed is acted on, not waited for).
func soonest(a, b time.Duration) time.Duration {
	switch {
	case b <= 0:
		return max(a, 0)
	case a <= 0 || b < a:
		return b
	}
	return a
}
