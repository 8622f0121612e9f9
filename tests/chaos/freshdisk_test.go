package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// A replacement gives a member a fresh disk: the operator holds and deletes the member's Pod,
// tells MemberReplaced (MemberDiskLost for a lost volume), then deletes the claim the hold
// recorded, and the StatefulSet recreates both. Rule i: the fresh disk an announcement tells of
// is delivered. Once a MemberReplaced or MemberDiskLost event names member X, the claim X had
// when it was told (data-X, the one not yet going 2 s before the event's time) must be deleted
// (terminating or gone; the StatefulSet then makes X a claim with a new UID) within
// deliverWithin of the monitor seeing the event, and it must be so at the end of the storm
// on a fresh read, whatever the bound said. Excused: a MemberReplacementAbandoned naming X
// after it (the claim changed under the replacement, and the operator said so), a pause of
// the fleet (a paused fleet releases a hold and keeps the claim), and the fleet's deletion
// (every claim goes with it). The first violation fails the run; nothing is retried.
//
// Rule b gains the other half of the replacement rule: a member is given a fresh disk
// (MemberReplaced) only while it is the one member down. The replacement's Pod delete (the
// commitment, recognisable by the hold's intent it answers with) fails the rule when another
// member of the current count had been down for replaceSeen or more when it was sent. A
// MemberDiskLost is allowed beside another member down (a lost volume cannot come back).

const (
	// deliverWithin: a replacement the operator committed deletes its claim in the same pass,
	// or in the next one after a leader handoff (lease 15 s + retry, a replica restart of 2 s,
	// its caches' sync) or after a claim delete met a conflict five times (requeued with
	// backoff). A minute is twice the slow path; after an API server restart the judgement
	// waits for the reconnect window too.
	deliverWithin = time.Minute
	// announceSlack: the claim an announcement speaks of is the one not yet going this long
	// before the event's time. A replacement of a member with no Pod deletes the claim before
	// it tells, within milliseconds; a claim the StatefulSet makes after it is at least the
	// old Pod's termination later (metadata times are whole seconds, hence 2 s, not 1).
	announceSlack = 2 * time.Second
	// replaceSeen: a member down this long when a replacement of another member is committed
	// was down in the operator's view too: its caches lag by well under a second, and the
	// pass's reads, hold and delete take a few seconds at most on a loaded machine.
	replaceSeen = 10 * time.Second
)

// diskIncarnation is one claim of a name, as the claim watch saw it.
type diskIncarnation struct {
	uid     string
	owner   string    // its fleet-uid label
	created time.Time // its creationTimestamp
	gone    time.Time // when the monitor first saw it terminating or deleted; zero: live
}

// announcedDisk is one replacement event whose fresh disk is awaited.
type announcedDisk struct {
	ns, fleetUID, member, reason, event, note string
	at, seen                                  time.Time // the event's time, when the monitor saw it
	disk                                      *diskIncarnation
	done                                      bool
}

// freshDiskCounts says how announcements ended, for the summary.
type freshDiskCounts struct {
	delivered, abandoned, excused, nothing int
}

// noteDisk folds one claim change into the namespace's claim history. Caller holds mu.
func (f *fleetView) noteDisk(c *corev1.PersistentVolumeClaim, deleted bool, now time.Time) {
	var d *diskIncarnation
	for _, x := range f.disks[c.Name] {
		if x.uid == string(c.UID) {
			d = x
		}
	}
	if d == nil {
		d = &diskIncarnation{uid: string(c.UID), owner: c.Labels[v1.LabelFleetUID], created: c.CreationTimestamp.Time}
		f.disks[c.Name] = append(f.disks[c.Name], d)
		// the watch may deliver a claim's successor before its own deletion (a relist after
		// an API server restart): an older claim of the name is gone once a newer one exists
		for _, x := range f.disks[c.Name] {
			if x != d && x.gone.IsZero() {
				x.gone = now
			}
		}
	}
	if (deleted || c.DeletionTimestamp != nil) && d.gone.IsZero() {
		d.gone = now
	}
}

// diskAt returns the claim of that name not yet going at t, the earliest made if the history
// holds two, or nil. Caller holds mu.
func (f *fleetView) diskAt(name string, t time.Time) *diskIncarnation {
	for _, d := range f.disks[name] {
		if !d.created.After(t) && (d.gone.IsZero() || d.gone.After(t)) {
			return d
		}
	}
	return nil
}

// noteDown records since when each down member has been down. Caller holds mu.
func (f *fleetView) noteDown(down []string, now time.Time) {
	is := map[string]bool{}
	for _, d := range down {
		is[d] = true
		if _, ok := f.downSince[d]; !ok {
			f.downSince[d] = now
		}
	}
	for d := range f.downSince {
		if !is[d] {
			delete(f.downSince, d)
		}
	}
}

// memberNamed returns the first member of fleet named in note as a whole name (not inside
// data-NAME or NAME-x), or "".
func memberNamed(fleet, note string) string {
	re := regexp.MustCompile(`(?:^|[^a-z0-9.-])(` + regexp.QuoteMeta(fleet) + `-[0-9]+)(?:$|[^a-z0-9-])`)
	if m := re.FindStringSubmatch(note); m != nil {
		return m[1]
	}
	return ""
}

// names reports whether note names member X, or its claim data-X, as a whole name.
func names(note, member string) bool {
	re := regexp.MustCompile(`(?:^|[^a-z0-9.-])(?:data-)?` + regexp.QuoteMeta(member) + `(?:$|[^a-z0-9-])`)
	return re.MatchString(note)
}

// noteAnnouncement records a MemberReplaced or MemberDiskLost event of a campaign fleet, once
// per event time (a repeated event is patched into a series, with a later time). Caller holds
// mu.
func (m *monitor) noteAnnouncement(e *eventsv1.Event) {
	if e.Reason != v1.EventMemberReplaced && e.Reason != v1.EventMemberDiskLost {
		return
	}
	f := m.fleets[e.Namespace]
	at := eventTime(e)
	key := e.Namespace + "/" + e.Name + "@" + at.Format(time.RFC3339Nano)
	if f == nil || m.announceSeen[key] {
		return
	}
	m.announceSeen[key] = true
	member := memberNamed(f.name, e.Note)
	a := &announcedDisk{ns: e.Namespace, fleetUID: f.uid, member: member, reason: e.Reason, event: e.Name, note: e.Note, at: at, seen: time.Now()}
	if member == "" || f.uid == "" || f.deleting {
		a.done = true
		m.freshCounts.excused++
		return
	}
	a.disk = f.diskAt("data-"+member, at.Add(-announceSlack))
	if a.disk == nil {
		// no claim of the member was there to give up (already going when it was told): the
		// fresh disk is on its way
		a.done = true
		m.freshCounts.nothing++
		m.checks[ruleFreshDisk]++
		return
	}
	m.announcedDisks = append(m.announcedDisks, a)
	m.judgeFreshDisks(time.Now())
}

// abandonedAfter reports whether a MemberReplacementAbandoned naming a's member came after
// it. Caller holds mu.
func (m *monitor) abandonedAfter(a *announcedDisk) bool {
	for _, e := range m.events {
		if e.Namespace == a.ns && e.Reason == v1.EventReplacementAbandoned && !eventTime(e).Before(a.at.Add(-announceSlack)) && names(e.Note, a.member) {
			return true
		}
	}
	return false
}

// excusedFreshDisk says why a's claim may stay, or "". Caller holds mu.
func (m *monitor) excusedFreshDisk(a *announcedDisk) string {
	f := m.fleets[a.ns]
	switch {
	case f == nil || f.uid != a.fleetUID || f.deleting:
		return "deleted"
	case m.abandonedAfter(a):
		return "abandoned"
	case f.paused || f.pausedAt.After(a.at.Add(-pauseSeen)) || f.unpausedAt.After(a.at.Add(-pauseSeen)):
		return "paused"
	}
	return ""
}

// settleFreshDisk ends a when its claim went or an excuse applies; it reports whether a is
// settled. Caller holds mu.
func (m *monitor) settleFreshDisk(a *announcedDisk, gone bool) bool {
	switch why := m.excusedFreshDisk(a); {
	case gone || !a.disk.gone.IsZero():
		m.freshCounts.delivered++
		m.checks[ruleFreshDisk]++
	case why == "abandoned":
		m.freshCounts.abandoned++
		m.checks[ruleFreshDisk]++
	case why != "":
		m.freshCounts.excused++
	default:
		return false
	}
	a.done = true
	return true
}

// judgeFreshDisks is rule i, continuously: an announcement whose claim is still there
// deliverWithin after the monitor saw it fails. Caller holds mu.
func (m *monitor) judgeFreshDisks(now time.Time) {
	keep := m.announcedDisks[:0]
	for _, a := range m.announcedDisks {
		if a.done || m.settleFreshDisk(a, false) {
			continue
		}
		if now.Sub(a.seen) > deliverWithin && !m.reconnecting(now) {
			m.violate(ruleFreshDisk, "%s", a.failure(now.Sub(a.seen).Round(time.Second).String()+" after the event was seen"))
		}
		keep = append(keep, a)
	}
	m.announcedDisks = keep
}

func (a *announcedDisk) failure(when string) string {
	return fmt.Sprintf("the operator told %s for member %s of %s at %s (event %s: %q) and claim %s/data-%s (UID %s, created %s) was still there, not deleted, %s; no %s naming the member followed: the member keeps its old disk",
		a.reason, a.member, a.ns, a.at.Format("15:04:05.000"), a.event, a.note, a.ns, a.member, shortUID(a.disk.uid),
		a.disk.created.Format("15:04:05"), when, v1.EventReplacementAbandoned)
}

// finishFreshDisks is rule i at the end of the storm, once every fleet is Ready: every
// announcement still awaited is judged on a fresh read of its claim, with no bound left.
func (m *monitor) finishFreshDisks(ctx context.Context) error {
	m.mu.Lock()
	open := append([]*announcedDisk(nil), m.announcedDisks...)
	m.mu.Unlock()
	for _, a := range open {
		claim, err := m.cs.CoreV1().PersistentVolumeClaims(a.ns).Get(ctx, "data-"+a.member, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		gone := err != nil || string(claim.UID) != a.disk.uid || claim.DeletionTimestamp != nil
		m.mu.Lock()
		if !a.done && !m.settleFreshDisk(a, gone) {
			m.violate(ruleFreshDisk, "%s", a.failure("once every fleet was Ready after the storm"))
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.judgeFreshDisks(time.Now())
	m.mu.Unlock()
	return nil
}

// judgeReplacementStart is rule b on a replacement's Pod delete (the answer carries the
// hold's intent): a MemberReplaced only while no other member of the current count has been
// down for replaceSeen. Caller holds mu.
func (m *monitor) judgeReplacementStart(f *fleetView, w writeRecord) {
	var in struct {
		FleetUID string `json:"fleetUID"`
		Event    string `json:"event"`
	}
	if json.Unmarshal([]byte(w.Intent), &in) != nil || in.Event != v1.EventMemberReplaced || in.FleetUID != f.uid || f.deleting || !f.stateful {
		return
	}
	m.checks[ruleClaims]++
	if m.reconnecting(w.At) {
		return // the operator's watches may still be resuming after an API server restart
	}
	x := fmt.Sprint(ordinalOf(f.name, w.Name))
	for d, since := range f.downSince {
		if d != x && w.At.Sub(since) >= replaceSeen {
			m.violate(ruleClaims, "the operator committed the replacement of member %s of %s/%s (MemberReplaced, Pod deleted at %s) while member %s-%s had been down for %s: a fresh disk is given only to the one member down; pods: %s",
				w.Name, f.ns, f.name, w.At.Format("15:04:05.000"), f.name, d, w.At.Sub(since).Round(time.Millisecond), describePods(f.podList()))
			return
		}
	}
}

// freshDiskSummary is the summary's account of rules i and the crash-loop faults.
func (m *monitor) freshDiskSummary() string {
	c := m.freshCounts
	return fmt.Sprintf("  replacements announced (MemberReplaced, MemberDiskLost) whose old claim went: %d; abandoned with %s: %d; told when the claim was already going: %d; excused (paused or deleted fleet): %d\n"+
		"  crash-loop-member faults: %d, ended by a new Pod of the member (a replacement, a rollout, a delete): %d, by the heal clearing the knob: %d\n",
		c.delivered, v1.EventReplacementAbandoned, c.abandoned, c.nothing, c.excused, m.crashLoops, m.crashEndedByNewPod, m.crashEndedByKnob)
}

// --- unit tests of rule i, the replacement half of rule b and the crash-loop fault entries

// freshFleet is watchedFleet never paused.
func freshFleet() *monitor {
	m := watchedFleet(false, 0)
	m.fleets["ns"].pausedAt = time.Time{}
	return m
}

func claimObj(name, uid string, created time.Time, deleting bool) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid),
		CreationTimestamp: metav1.NewTime(created.Truncate(time.Second)), Labels: map[string]string{v1.LabelFleetUID: "u1"}}}
	if deleting {
		c.DeletionTimestamp = &metav1.Time{Time: created}
	}
	return c
}

func replacedEvent(name, reason, note string, at time.Time) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(at.Truncate(time.Second))},
		EventTime: metav1.NewMicroTime(at), Reason: reason, Note: note}
}

func TestAnAnnouncedReplacementMustDeleteTheClaimTheMemberHadWhenItWasTold(t *testing.T) {
	t0 := time.Now().Add(-2 * time.Minute)
	m := freshFleet()
	m.onClaim(nil, claimObj("data-pf-1", "c1", t0, false), false)
	m.onClaim(nil, claimObj("data-pf-10", "c10", t0, false), false)
	told := time.Now().Add(-deliverWithin - time.Second)
	m.onEvent(nil, replacedEvent("e1", v1.EventMemberReplaced, "Replacing member pf-1: down since x while the rest of the fleet is ready; it returns on a fresh disk", told), false)
	m.mu.Lock()
	if len(m.announcedDisks) != 1 || m.announcedDisks[0].disk.uid != "c1" {
		t.Fatalf("the announcement must await claim c1 of data-pf-1, got %+v", m.announcedDisks)
	}
	m.announcedDisks[0].seen = told
	m.judgeFreshDisks(time.Now())
	m.mu.Unlock()
	if !strings.Contains(m.Violation(), ruleFreshDisk) || !strings.Contains(m.Violation(), "data-pf-1") {
		t.Fatalf("a MemberReplaced whose claim stayed for %s must fail rule i, got %q", deliverWithin, m.Violation())
	}

	m = freshFleet()
	m.onClaim(nil, claimObj("data-pf-1", "c1", t0, false), false)
	told = time.Now()
	m.onEvent(nil, replacedEvent("e1", v1.EventMemberReplaced, "Replacing member pf-1: down", told), false)
	m.onClaim(nil, claimObj("data-pf-1", "c1", t0, true), false)                       // the replacement's claim delete
	m.onClaim(nil, claimObj("data-pf-1", "c2", told.Add(3*time.Second), false), false) // the fresh disk
	m.mu.Lock()
	m.judgeFreshDisks(time.Now().Add(2 * deliverWithin))
	m.mu.Unlock()
	if m.Violation() != "" || m.freshCounts.delivered != 1 {
		t.Fatalf("a replacement whose old claim went delivered its fresh disk: %q, %+v", m.Violation(), m.freshCounts)
	}

	// a member without a Pod: the claim goes just before the event, the fresh claim may be
	// made in the same second as it
	m = freshFleet()
	told = time.Now()
	m.onClaim(nil, claimObj("data-pf-2", "c1", t0, false), false)
	m.onClaim(nil, claimObj("data-pf-2", "c1", t0, true), false)
	m.onClaim(nil, claimObj("data-pf-2", "c1", t0, true), true)
	m.onClaim(nil, claimObj("data-pf-2", "c2", told, false), false)
	m.fleets["ns"].disks["data-pf-2"][0].gone = told.Add(-10 * time.Millisecond)
	m.onEvent(nil, replacedEvent("e2", v1.EventMemberDiskLost, "Replacing member pf-2: its volume no longer exists", told), false)
	m.mu.Lock()
	m.judgeFreshDisks(time.Now().Add(2 * deliverWithin))
	m.mu.Unlock()
	if m.Violation() != "" || m.freshCounts.delivered != 1 {
		t.Fatalf("the claim the member had when it was told is the old one, not its fresh disk: %q, %+v", m.Violation(), m.freshCounts)
	}
}

func TestAnAbandonedOrPausedReplacementMayKeepItsClaim(t *testing.T) {
	t0 := time.Now().Add(-2 * time.Minute)
	told := time.Now().Add(-deliverWithin - time.Second)
	for _, c := range []struct {
		name  string
		then  func(m *monitor)
		count func(freshDiskCounts) int
	}{
		{"abandoned", func(m *monitor) {
			m.onEvent(nil, replacedEvent("e2", v1.EventReplacementAbandoned, "Replacement of member pf-1 abandoned: claim ns/data-pf-1 changed while it was under way", told.Add(time.Second)), false)
		}, func(c freshDiskCounts) int { return c.abandoned }},
		{"paused", func(m *monitor) { m.setPaused("ns", true) }, func(c freshDiskCounts) int { return c.excused }},
		{"deleted", func(m *monitor) { m.setDeleting("ns") }, func(c freshDiskCounts) int { return c.excused }},
	} {
		m := freshFleet()
		m.onClaim(nil, claimObj("data-pf-1", "c1", t0, false), false)
		m.onEvent(nil, replacedEvent("e1", v1.EventMemberReplaced, "Replacing member pf-1: down", told), false)
		c.then(m)
		m.mu.Lock()
		m.announcedDisks[0].seen = told
		m.judgeFreshDisks(time.Now())
		m.mu.Unlock()
		if m.Violation() != "" || c.count(m.freshCounts) != 1 {
			t.Fatalf("%s: the claim may stay: %q, %+v", c.name, m.Violation(), m.freshCounts)
		}
	}
	// an abandonment of another member excuses nothing
	m := freshFleet()
	m.onClaim(nil, claimObj("data-pf-1", "c1", t0, false), false)
	m.onEvent(nil, replacedEvent("e1", v1.EventMemberReplaced, "Replacing member pf-1: down", told), false)
	m.onEvent(nil, replacedEvent("e2", v1.EventReplacementAbandoned, "Replacement of member pf-2 abandoned: claim ns/data-pf-2 changed", told), false)
	m.mu.Lock()
	m.announcedDisks[0].seen = told
	m.judgeFreshDisks(time.Now())
	m.mu.Unlock()
	if !strings.Contains(m.Violation(), ruleFreshDisk) {
		t.Fatalf("another member's abandonment excuses nothing, got %q", m.Violation())
	}
}

func TestTheMemberAReplacementNamesIsAWholeName(t *testing.T) {
	for note, want := range map[string]string{
		"Replacing member pf-1: down since 2025":                                "pf-1",
		"Replacement of member data-pf-2 abandoned: claim ns/data-pf-2 changed": "",
		"Replacing member pf-12: its volume no longer exists":                   "pf-12",
		"Replacing member pf-3: down; finished by a later pass":                 "pf-3",
	} {
		if got := memberNamed("pf", note); got != want {
			t.Errorf("memberNamed(%q) = %q, want %q", note, got, want)
		}
	}
	if !names("Replacement of member data-pf-2 abandoned", "pf-2") || names("Replacing member pf-12: x", "pf-1") || !names("member pf-1 abandoned", "pf-1") {
		t.Fatal("names must match a member or its claim as a whole name")
	}
}

func TestAReplacementIsCommittedOnlyWhileNoOtherMemberIsDown(t *testing.T) {
	intent := func(event string) string {
		return fmt.Sprintf(`{"fleetUID":"u1","claimName":"data-pf-0","event":%q}`, event)
	}
	del := func(event string, at time.Time) writeRecord {
		return writeRecord{Method: "DELETE", Namespace: "ns", Resource: "pods", Name: "pf-0", At: at, Kind: "Pod",
			Labels: map[string]string{v1.LabelFleetUID: "u1", v1.LabelReplacementFleet: "u1"}, Intent: intent(event)}
	}
	m := freshFleet()
	f := servingFleet(m, 3)
	f.pods["pf-0"] = memberPod{name: "pf-0", ordinal: 0}
	m.judgeMembers(f)
	m.onWrite(del(v1.EventMemberReplaced, time.Now()))
	if m.Violation() != "" {
		t.Fatalf("the one member down may be replaced: %s", m.Violation())
	}
	f.pods["pf-2"] = memberPod{name: "pf-2", ordinal: 2}
	m.judgeMembers(f)
	m.onWrite(del(v1.EventMemberReplaced, time.Now().Add(time.Second)))
	m.onWrite(del(v1.EventMemberDiskLost, time.Now().Add(replaceSeen)))
	if m.Violation() != "" {
		t.Fatalf("a member just down may not be in the operator's view yet, and a lost disk is replaced beside another member down: %s", m.Violation())
	}
	m.onWrite(del(v1.EventMemberReplaced, time.Now().Add(replaceSeen)))
	if !strings.Contains(m.Violation(), ruleClaims) || !strings.Contains(m.Violation(), "pf-2") {
		t.Fatalf("a replacement while another member is down for %s must fail rule b, got %q", replaceSeen, m.Violation())
	}
}

func TestACrashLoopIsInForceUntilItsPodIsGoneAndDoesNotHoldOtherFaultsOpen(t *testing.T) {
	m := freshFleet()
	f := servingFleet(m, 3)
	m.addFault(1, "ns", "pod:pf-2", true) // a kill-member long over
	m.faults[0].ended = time.Now().Add(-time.Minute)
	m.addCrashLoop(2, "ns", "pf-1", "p1")
	crash := m.faults[1]
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p1", crashing: true}
	m.judgeMembers(f)
	if !m.faults[0].closed || crash.closed || !crash.ended.IsZero() || !crash.knobSeen {
		t.Fatalf("the crash-looping member alone keeps its own entry open, not the ended kill's: %+v %+v", m.faults[0], crash)
	}
	// the operator takes pf-2 and pf-0 down beside the crash-looping member: rule a sees both
	f.pods["pf-0"] = memberPod{name: "pf-0", ordinal: 0, terminating: true}
	f.pods["pf-2"] = memberPod{name: "pf-2", ordinal: 2, terminating: true}
	m.judgeMembers(f)
	f.twoDownAt = time.Now().Add(-confirmDown)
	m.judgeMembers(f)
	if !strings.Contains(m.Violation(), ruleMembers) {
		t.Fatalf("two members down by the operator beside a crash-looping one must fail rule a, got %q", m.Violation())
	}

	m = freshFleet()
	f = servingFleet(m, 3)
	m.addCrashLoop(2, "ns", "pf-1", "p1")
	crash = m.faults[0]
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p0"} // the watch is behind the fault
	m.judgeMembers(f)
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p1"} // the knob is not seen yet
	m.judgeMembers(f)
	if !crash.ended.IsZero() {
		t.Fatal("a crash loop whose Pod or knob the watch has not delivered yet is in force")
	}
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p2"} // replaced: the new Pod starts clean
	m.judgeMembers(f)
	if crash.ended.IsZero() || m.crashEndedByNewPod != 1 {
		t.Fatalf("a crash loop ends with its Pod: %+v", crash)
	}
	m = freshFleet()
	f = servingFleet(m, 3)
	m.addCrashLoop(2, "ns", "pf-1", "p1")
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p1", crashing: true}
	m.judgeMembers(f)
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, uid: "p1"} // the heal cleared the knob
	m.judgeMembers(f)
	if m.faults[0].ended.IsZero() || m.crashEndedByKnob != 1 {
		t.Fatalf("a crash loop ends when its knob is cleared: %+v", m.faults[0])
	}
}
