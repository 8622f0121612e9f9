package chaos

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// The member rule (invariant a): the operator never takes a second member of a fleet down
// while one is already down. A member is down when it has served (Ready, Running, not
// terminating) since it joined the fleet's current count and no longer does; members that never
// served yet (a scale-out, a re-created fleet) are not down, they are arriving. Members downed
// by an injected fault are excluded: each open fault entry of the fleet excuses one down
// member, and a member the scheduler cannot place while a zone is cordoned is excused too.
// The rest is the operator's doing (its deletes, or the rollouts its writes start).

// memberPod is what the rule reads of one Pod.
type memberPod struct {
	name          string
	ordinal       int // -1 for a Deployment's Pod
	serving       bool
	unschedulable bool
	terminating   bool
	// proxied: it runs an Istio proxy; finished: Succeeded or Failed, it runs nothing (rule h)
	proxied, finished bool
	// detail says why a member does not serve, for the violation report: its UID, the Ready
	// condition and who last wrote the Pod's status.
	detail string
	// nodeMarkedAt: when the node lifecycle controller marked it not Ready (apiserver_test.go)
	nodeMarkedAt time.Time
	// uid is the Pod's; crashing: it carries the crash-loop-member knob (its celld exits at
	// every start)
	uid      string
	crashing bool
}

// memberState is one fleet's member bookkeeping, fed by the Pod and workload watches.
type memberState struct {
	stateful bool
	desired  int
	// established: StatefulSet ordinals that served since they entered [0, desired).
	established map[int]bool
	// baseline: for a Deployment, how many members served at most since desired last grew.
	baseline int
}

func newMemberState(stateful bool) *memberState {
	return &memberState{stateful: stateful, desired: -1, established: map[int]bool{}}
}

// setDesired records the workload's spec.replicas.
func (m *memberState) setDesired(n int, pods []memberPod) {
	if m.desired >= 0 && n > m.desired && !m.stateful {
		m.baseline = servingCount(pods, n)
	}
	m.desired = n
	for o := range m.established {
		if o >= n {
			delete(m.established, o)
		}
	}
}

// observe folds the current Pods into the bookkeeping and returns the down members' names
// (for a Deployment, "missing-N" names stand for members not serving).
func (m *memberState) observe(pods []memberPod) []string {
	if m.desired < 0 {
		return nil
	}
	if m.stateful {
		byOrdinal := map[int]memberPod{}
		for _, p := range pods {
			if p.ordinal >= 0 && p.ordinal < m.desired {
				byOrdinal[p.ordinal] = p
			}
		}
		var down []string
		for o := range m.desired {
			p, ok := byOrdinal[o]
			if ok && p.serving {
				m.established[o] = true
				continue
			}
			if m.established[o] {
				down = append(down, fmt.Sprint(o))
			}
		}
		sort.Strings(down)
		return down
	}
	serving := servingCount(pods, m.desired)
	m.baseline = min(max(m.baseline, serving), m.desired)
	var down []string
	for i := range m.baseline - serving {
		down = append(down, fmt.Sprintf("missing-%d", i))
	}
	return down
}

func servingCount(pods []memberPod, desired int) int {
	n := 0
	for _, p := range pods {
		if p.serving {
			n++
		}
	}
	return min(n, desired)
}

// operatorDown is how many of the down members no fault excuses.
func operatorDown(down int, openFaults int, unschedulableInCordon int) int {
	return max(0, down-openFaults-unschedulableInCordon)
}

// ordinalOf parses FLEET-N; -1 when the name is not a StatefulSet member's.
func ordinalOf(fleet, pod string) int {
	rest, ok := strings.CutPrefix(pod, fleet+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return n
}

// faultEntry is one injected fault in the fault journal: it excuses one down member of its
// fleet from injection until it has ended (its closer ran, or its one-shot effect had time to
// show) and the fleet was whole again.
type faultEntry struct {
	seq     int
	fleet   string // fleet UID
	key     string // what it hit: a Pod, a node's Pod, the workload
	started time.Time
	ended   time.Time // zero: still in force
	closed  bool
	// crashUID, for a crash-loop-member: the Pod made to exit at every start. The fault is in
	// force until that Pod, once seen, is replaced by another of the member's name (which starts
	// clean), or no longer carries the knob once it was seen with it (the heal cleared it).
	crashUID            string
	crashSeen, knobSeen bool
}

// effectLatency: a one-shot fault's effect (a Pod turning not Ready, a claim turning Lost) is
// visible within this time of the injection, even on a loaded machine.
const effectLatency = 5 * time.Second

// openFaults counts the distinct targets of a fleet's entries still in force, and closes the
// entries that have ended when the fleet has no member down. An entry whose Pod is excused
// otherwise (skip holds "pod:NAME") does not count: one member is never excused twice.
func openFaults(entries []*faultEntry, fleet string, now time.Time, downNow int, skip map[string]bool) int {
	keys := map[string]bool{}
	for _, e := range entries {
		if e.fleet != fleet || e.closed {
			continue
		}
		if !e.ended.IsZero() && now.Sub(e.ended) >= effectLatency && downNow == 0 {
			e.closed = true
			continue
		}
		if pod := podOfKey(e.key); pod != "" && skip["pod:"+pod] {
			continue
		}
		keys[e.key] = true
	}
	return len(keys)
}

// addCrashLoop records a crash-loop-member of pod (UID uid) before it is injected: a fault in
// force until the monitor sees that Pod replaced or without its knob (endCrashLoops). The
// returned func ends it at once (the injection failed).
func (m *monitor) addCrashLoop(seq int, ns, pod, uid string) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, end := m.addFaultLocked(seq, ns, "pod:"+pod, false)
	if e != nil {
		e.crashUID = uid
		m.crashLoops++
	}
	return end
}

// endCrashLoops ends the crash-loop-member entries of f whose Pod is gone (another Pod of the
// member's name, or none and the member left the count) or was seen with its knob and no
// longer carries it. Caller holds mu.
func (m *monitor) endCrashLoops(f *fleetView, now time.Time) {
	for _, e := range m.faults {
		if e.fleet != f.uid || e.crashUID == "" || !e.ended.IsZero() {
			continue
		}
		name := podOfKey(e.key)
		p, ok := f.pods[name]
		switch {
		case ok && p.uid == e.crashUID:
			e.crashSeen = true
			if p.crashing {
				e.knobSeen = true
			} else if e.knobSeen {
				e.ended = now
				m.crashEndedByKnob++
			}
		case ok && e.crashSeen: // the watch may still hold an older Pod of the name when the fault starts
			e.ended = now
			m.crashEndedByNewPod++
		case !ok && f.stateful && f.members != nil && f.members.desired >= 0 && ordinalOf(f.name, name) >= f.members.desired:
			e.ended = now // scaled in: the member is no longer in the count
		}
	}
}

// crashingDown counts the down members whose Pod carries the crash-loop-member knob: down by
// a fault in force, they do not keep the fleet from being whole for closing the other
// entries (a member that is never replaced would otherwise hold every ended fault of its
// fleet open for the rest of the storm, each excusing one more member of the operator's).
func crashingDown(stateful bool, pods []memberPod, down []string) int {
	crashing := map[string]bool{}
	n := 0
	for _, p := range pods {
		if p.crashing && !p.serving {
			crashing[fmt.Sprint(p.ordinal)] = true
			n++
		}
	}
	if !stateful {
		return min(n, len(down))
	}
	c := 0
	for _, d := range down {
		if crashing[d] {
			c++
		}
	}
	return c
}

// podOfKey returns the Pod a fault entry names ("pod:NAME", "node:NODE/NAME"), or "".
func podOfKey(key string) string {
	if pod, ok := strings.CutPrefix(key, "pod:"); ok {
		return pod
	}
	if rest, ok := strings.CutPrefix(key, "node:"); ok {
		if _, pod, ok := strings.Cut(rest, "/"); ok {
			return pod
		}
	}
	return ""
}

func TestAStatefulMemberIsDownOnlyOnceItServed(t *testing.T) {
	m := newMemberState(true)
	m.setDesired(3, nil)
	pods := []memberPod{{name: "f-0", ordinal: 0, serving: true}, {name: "f-1", ordinal: 1, serving: true}, {name: "f-2", ordinal: 2}}
	if down := m.observe(pods); len(down) != 0 {
		t.Fatalf("a member that never served is arriving, not down: %v", down)
	}
	pods[2].serving = true
	m.observe(pods)
	pods[1].serving, pods[2].serving = false, false
	if down := m.observe(pods); len(down) != 2 {
		t.Fatalf("two members that served and stopped are down, got %v", down)
	}
	m.setDesired(2, pods)
	if down := m.observe(pods[:2]); len(down) != 1 || down[0] != "1" {
		t.Fatalf("a member removed by scale-in is not down, got %v", down)
	}
	m.setDesired(3, pods)
	if down := m.observe(pods); len(down) != 1 {
		t.Fatalf("a member added back by scale-out is arriving until it serves, got %v", down)
	}
}

func TestADeploymentCountsMembersBelowWhatServedSinceItLastGrew(t *testing.T) {
	m := newMemberState(false)
	m.setDesired(3, nil)
	serving := func(n, total int) []memberPod {
		var out []memberPod
		for i := range total {
			out = append(out, memberPod{name: fmt.Sprint("d-", i), ordinal: -1, serving: i < n})
		}
		return out
	}
	if down := m.observe(serving(0, 3)); len(down) != 0 {
		t.Fatalf("a new Deployment is arriving: %v", down)
	}
	m.observe(serving(3, 3))
	if down := m.observe(serving(2, 3)); len(down) != 1 {
		t.Fatalf("one member stopped serving: want 1 down, got %v", down)
	}
	m.observe(serving(3, 3))
	m.setDesired(4, serving(3, 3))
	if down := m.observe(serving(3, 4)); len(down) != 0 {
		t.Fatalf("a scale-out's new member is arriving: %v", down)
	}
	m.setDesired(2, serving(3, 4))
	if down := m.observe(serving(2, 3)); len(down) != 0 {
		t.Fatalf("a scale-in's removed member is not down: %v", down)
	}
}

func TestFaultEntriesExcuseOneMemberEachUntilTheFleetIsWholeAgain(t *testing.T) {
	t0 := time.Now()
	entries := []*faultEntry{
		{fleet: "u", key: "pod:f-0", started: t0, ended: t0},
		{fleet: "u", key: "pod:f-0", started: t0, ended: t0}, // the same member twice excuses one
		{fleet: "u", key: "node:n1/f-2", started: t0},
		{fleet: "other", key: "pod:g-0", started: t0, ended: t0},
	}
	if got := openFaults(entries, "u", t0.Add(time.Second), 2, nil); got != 2 {
		t.Fatalf("want 2 distinct targets in force, got %d", got)
	}
	if got := operatorDown(3, 2, 0); got != 1 {
		t.Fatalf("three down, two excused: want 1 by the operator, got %d", got)
	}
	if got := openFaults(entries, "u", t0.Add(time.Second), 2, map[string]bool{"pod:f-2": true}); got != 1 {
		t.Fatalf("a member excused otherwise is not excused again by its fault entry: got %d", got)
	}
	if got := openFaults(entries, "u", t0.Add(effectLatency), 0, nil); got != 1 {
		t.Fatalf("ended entries close once the fleet is whole, the open node failure stays: got %d", got)
	}
	if !entries[0].closed || entries[2].closed {
		t.Fatalf("wrong entries closed: %+v %+v", entries[0], entries[2])
	}
}

func TestParsePathSplitsNamespaceResourceAndName(t *testing.T) {
	for _, c := range []struct{ path, ns, res, name string }{
		{"/api/v1/namespaces/n1/pods/f-0", "n1", "pods", "f-0"},
		{"/apis/apps/v1/namespaces/n1/statefulsets/f/scale", "n1", "statefulsets/scale", "f"},
		{"/apis/celld.eric.dev/v1alpha1/celldstoragereservations/s3-abc", "", "celldstoragereservations", "s3-abc"},
		{"/apis/events.k8s.io/v1/namespaces/n1/events", "n1", "events", ""},
	} {
		ns, res, name := parsePath(c.path)
		if ns != c.ns || res != c.res || name != c.name {
			t.Errorf("parsePath(%s) = %q %q %q, want %q %q %q", c.path, ns, res, name, c.ns, c.res, c.name)
		}
	}
}

// watchedFleet is a monitor with one fleet of UID "u1" in namespace ns, as its watch saw it.
func watchedFleet(paused bool, pausedFor time.Duration) *monitor {
	m := newMonitor(func() {})
	m.addFleet("ns", "pf", true, "chaos-secret-abc")
	f := m.fleets["ns"]
	f.uid, f.uids["u1"], f.members = "u1", true, newMemberState(true)
	f.paused, f.pausedAt = paused, time.Now().Add(-pausedFor)
	return m
}

// servingFleet declares n members of m's fleet, all serving, and judges them once: the
// starting point of the member-rule tests.
func servingFleet(m *monitor, n int) *fleetView {
	f := m.fleets["ns"]
	f.members.setDesired(n, nil)
	for i := range n {
		f.pods[fmt.Sprint("pf-", i)] = memberPod{name: fmt.Sprint("pf-", i), ordinal: i, serving: true}
	}
	m.judgeMembers(f)
	return f
}

func TestTheMonitorRefusesAWorkloadWriteToAFleetPausedLongEnough(t *testing.T) {
	w := writeRecord{Method: "PUT", Namespace: "ns", Resource: "statefulsets", Name: "pf", Kind: "StatefulSet", Labels: map[string]string{"celld.eric.dev/fleet-uid": "u1"}}
	early := watchedFleet(true, time.Second)
	early.onWrite(w)
	if early.Violation() != "" {
		t.Fatalf("a write sent within %s of the pause may have been decided before it: %s", pauseSeen, early.Violation())
	}
	m := watchedFleet(true, time.Minute)
	m.onWrite(w)
	if !strings.Contains(m.Violation(), rulePaused) {
		t.Fatalf("a workload write to a fleet paused for a minute must fail rule c, got %q", m.Violation())
	}
}

func TestThePauseRuleFollowsTheCampaignsJournalNotALateWatch(t *testing.T) {
	w := writeRecord{Method: "PUT", Namespace: "ns", Resource: "statefulsets", Name: "pf", Kind: "StatefulSet", Labels: map[string]string{"celld.eric.dev/fleet-uid": "u1"}}
	m := watchedFleet(false, 0)
	m.setPaused("ns", true)
	m.fleets["ns"].pausedAt = time.Now().Add(-time.Minute)
	m.setPaused("ns", false) // the unpause is journaled before it is sent
	stale := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "celld.eric.dev/v1alpha1", "kind": "CelldFleet",
		"metadata": map[string]any{"namespace": "ns", "name": "pf", "uid": "u1"}, "spec": map[string]any{"maintenance": map[string]any{"paused": true}}}}
	m.onFleet(nil, stale, false) // a watch resuming after an API server restart delivers the paused version late
	m.onWrite(w)
	if m.Violation() != "" {
		t.Fatalf("the operator's write after the unpause was judged on a late watch: %s", m.Violation())
	}
	m.setPaused("ns", true)
	m.fleets["ns"].pausedAt = time.Now().Add(-time.Minute)
	m.onWrite(w)
	if !strings.Contains(m.Violation(), rulePaused) {
		t.Fatalf("a write a minute into a journaled pause must fail rule c, got %q", m.Violation())
	}
}

func TestTheMonitorRefusesAWriteToAnObjectWithoutTheFleetLabel(t *testing.T) {
	m := watchedFleet(false, 0)
	m.onWrite(writeRecord{Method: "PATCH", Namespace: "ns", Resource: "services", Name: "other", Kind: "Service", Labels: map[string]string{"app": "x"}})
	if !strings.Contains(m.Violation(), ruleOwnership) {
		t.Fatalf("a write to a foreign Service must fail rule d, got %q", m.Violation())
	}
	m = watchedFleet(false, 0)
	m.onWrite(writeRecord{Method: "DELETE", Resource: "celldstoragereservations", Name: "s3-x"})
	if !strings.Contains(m.Violation(), ruleOwnership) {
		t.Fatalf("a reservation delete must fail rule d, got %q", m.Violation())
	}
}

func TestTheMonitorRefusesTwoFreshDisksInsideTheAbsorbWindowAndAnUnjustifiedClaimDelete(t *testing.T) {
	m := watchedFleet(false, 0)
	now := time.Now()
	claim := func(name string, at time.Time) writeRecord {
		return writeRecord{Method: "DELETE", Namespace: "ns", Resource: "persistentvolumeclaims", Name: name, At: at, Kind: "PersistentVolumeClaim", Labels: map[string]string{"celld.eric.dev/fleet-uid": "u1"}}
	}
	m.onWrite(claim("data-pf-1", now))
	m.onWrite(claim("data-pf-2", now.Add(time.Second)))
	if !strings.Contains(m.Violation(), ruleClaims) {
		t.Fatalf("two fresh disks a second apart must fail rule b, got %q", m.Violation())
	}
	m = watchedFleet(false, 0)
	m.onWrite(claim("data-pf-1", now.Add(-time.Minute)))
	m.mu.Lock()
	m.judgePending()
	m.mu.Unlock()
	if !strings.Contains(m.Violation(), "without a MemberDiskLost or MemberReplaced event") {
		t.Fatalf("a claim delete with no replacement event must fail rule b, got %q", m.Violation())
	}
	// logged judges a claim delete a minute old after the operator logged line a second before it.
	logged := func(line, deleted string) *monitor {
		m := watchedFleet(false, 0)
		m.scanLogLine(line)
		m.announced[0].at = now.Add(-time.Minute - time.Second)
		m.onWrite(claim(deleted, now.Add(-time.Minute)))
		m.mu.Lock()
		m.judgePending()
		m.mu.Unlock()
		return m
	}
	m = logged(`{"msg":"mutation","action":"delete","fleet":"ns/pf","object":"Pod/pf-1","why":"Replacing member pf-1: its volume no longer exists"}`, "data-pf-1")
	if m.Violation() != "" || m.eventless != 1 {
		t.Fatalf("a replacement the operator logged before the claim delete is justified (counted as eventless): %q, %d", m.Violation(), m.eventless)
	}
	// A claim deleted with no Pod to hold: the operator's "replacement" line, written before the
	// delete, is the only record when it dies right after sending it.
	m = logged(`{"msg":"replacement","fleet":"ns/pf","member":"pf-2","claim":"data-pf-2","why":"Replacing member pf-2: its volume no longer exists"}`, "data-pf-2")
	if m.Violation() != "" || m.eventless != 1 {
		t.Fatalf("a lone claim replacement the operator announced before the delete is justified (counted as eventless): %q, %d", m.Violation(), m.eventless)
	}
	m = logged(`{"msg":"replacement","fleet":"ns/pf","member":"pf-1","claim":"data-pf-1","why":"Replacing member pf-1"}`, "data-pf-2")
	if !strings.Contains(m.Violation(), "without a MemberDiskLost or MemberReplaced event") {
		t.Fatalf("an announcement of another member justifies nothing, got %q", m.Violation())
	}
}

func TestTheMonitorFindsASecretValueInALogLine(t *testing.T) {
	m := watchedFleet(false, 0)
	m.scanLogLine(`{"msg":"env","value":"chaos-secret-abc"}`)
	if !strings.Contains(m.Violation(), ruleSecrets) {
		t.Fatalf("a Secret value in the log must fail rule e, got %q", m.Violation())
	}
}

func TestTheMonitorFailsTwoMembersDownByTheOperatorOnlyOnceConfirmed(t *testing.T) {
	m := watchedFleet(false, 0)
	f := servingFleet(m, 3)
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1, terminating: true}
	f.pods["pf-2"] = memberPod{name: "pf-2", ordinal: 2, terminating: true}
	m.judgeMembers(f)
	if m.Violation() != "" {
		t.Fatalf("two down must last %s before it fails: %s", confirmDown, m.Violation())
	}
	f.twoDownAt = time.Now().Add(-confirmDown)
	m.judgeMembers(f)
	if !strings.Contains(m.Violation(), ruleMembers) {
		t.Fatalf("two members down by the operator must fail rule a, got %q", m.Violation())
	}
	m = watchedFleet(false, 0)
	f = servingFleet(m, 3)
	m.addFault(1, "ns", "pod:pf-1", true)
	f.pods["pf-1"] = memberPod{name: "pf-1", ordinal: 1}
	f.pods["pf-2"] = memberPod{name: "pf-2", ordinal: 2, terminating: true}
	m.judgeMembers(f)
	f.twoDownAt = time.Now().Add(-time.Minute)
	m.judgeMembers(f)
	if m.Violation() != "" {
		t.Fatalf("a member a fault took down is excluded: %s", m.Violation())
	}
}

func TestALeaseReleasedOnAGracefulStopHandsNothingOver(t *testing.T) {
	encode := func(holder *string, mediaType string) []byte {
		l := &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: holder}}
		info, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			t.Fatalf("no serializer for %s", mediaType)
		}
		var b bytes.Buffer
		if err := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion).Encode(l, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	holder, none := "host_1234", ""
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		if !leaseHeld(encode(&holder, mt)) {
			t.Fatalf("%s: a Lease naming a holder is held", mt)
		}
		if leaseHeld(encode(&none, mt)) || leaseHeld(encode(nil, mt)) {
			t.Fatalf("%s: a released Lease must not count as a handoff", mt)
		}
	}
	if leaseHeld([]byte("not a Lease")) {
		t.Fatal("garbage is not a held Lease")
	}
}

// encodeAs encodes obj as the API server answers in mediaType.
func encodeAs(t *testing.T, obj runtime.Object, gv schema.GroupVersion, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	var b bytes.Buffer
	if err := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTheRecorderReadsProtobufAndJSONAnswers(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "pf", Labels: map[string]string{"celld.eric.dev/fleet-uid": "u1"}},
		Spec: appsv1.StatefulSetSpec{Replicas: new(int32(4))}}
	for _, mt := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		kind, labels, _, replicas := decodeAnswer(encodeAs(t, sts, appsv1.SchemeGroupVersion, mt))
		if kind != "StatefulSet" || labels["celld.eric.dev/fleet-uid"] != "u1" || replicas == nil || *replicas != 4 {
			t.Fatalf("%s: read %q %v %v; rule d and g judge nothing they cannot read", mt, kind, labels, replicas)
		}
	}
	kind, labels, _, _ := decodeAnswer([]byte(`{"apiVersion":"celld.eric.dev/v1alpha1","kind":"CelldFleet","metadata":{"labels":{"a":"b"}}}`))
	if kind != "CelldFleet" || labels["a"] != "b" {
		t.Fatalf("a custom resource's JSON answer: %q %v", kind, labels)
	}
	status := encodeAs(t, &metav1.Status{Status: metav1.StatusSuccess}, schema.GroupVersion{Version: "v1"}, runtime.ContentTypeProtobuf)
	if kind, _, _, _ := decodeAnswer(status); kind != "Status" {
		t.Fatalf("a Status answer reads as %q", kind)
	}
}
