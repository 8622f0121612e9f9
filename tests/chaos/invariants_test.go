package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/sidecarinjector"
)

// Invariant names, as the failure report and the check counts spell them.
const (
	ruleMembers     = "a: no second member taken down by the operator"
	ruleClaims      = "b: every claim deletion justified, no replacement beside another member down, no two fresh disks inside the absorb window"
	rulePaused      = "c: no workload write or member delete while paused"
	ruleOwnership   = "d: reservations kept and bound, only the fleet's objects modified"
	ruleSecrets     = "e: no Secret value in a log, event or status"
	ruleConvergence = "f: Ready after the storm, deleted fleets released"
	ruleFullStop    = "g: a full stop returns at the declared count in one step"
	ruleMesh        = "h: Provisioned only with every member's proxy as spec.mesh asks"
	ruleFreshDisk   = "i: a replacement that announces a fresh disk delivers one"
)

// Grace periods of the continuous checks, each the time a watch or a controller needs to see
// a change, so the check judges what the operator could know.
const (
	// confirmDown: two members down must last this long (the Pod and workload watches are
	// separate streams; their order between them is not the API server's).
	confirmDown = 2 * time.Second
	// pauseSeen: a write sent this long after the fleet turned paused was decided knowing it.
	pauseSeen = 3 * time.Second
	// justifyWithin: a replacement's event follows its claim delete within this time.
	justifyWithin = 30 * time.Second
)

// fleetView is what the monitors know of one fleet of the campaign, keyed by namespace.
type fleetView struct {
	ns, name  string
	stateful  bool
	uid       string
	uids      map[string]bool // every UID this namespace's fleet had
	paused    bool
	pausedAt  time.Time
	deleting  bool
	members   *memberState
	pods      map[string]memberPod
	twoDownAt time.Time
	verifying bool      // a fresh read of its Pods and workload is on its way
	verified  bool      // judging on a fresh read
	lastFresh time.Time // last claim delete that was not of a Lost claim, outside deletion
	lostClaim map[string]bool
	declared  int                  // the fleet's spec.replicas
	claims    map[string]claimView // the namespace's claims, by name
	stop      *fullStopView        // the full stop in progress, if any (fullstop_test.go)
	mesh      meshView             // mesh_test.go

	// freshdisk_test.go: every claim the namespace had, by name, in the order they appeared;
	// when each down member (as memberState.observe names it) went down; the campaign's last
	// unpause (a replacement a pause overlapped is excused)
	disks      map[string][]*diskIncarnation
	downSince  map[string]time.Time
	unpausedAt time.Time
}

// pendingJustification is a claim delete waiting for its replacement event.
type pendingJustification struct {
	ns, member, claim string
	at                time.Time
}

// monitor runs every continuous invariant. Its first violation cancels the campaign.
type monitor struct {
	mu         sync.Mutex
	fleets     map[string]*fleetView // by namespace
	faults     []*faultEntry
	cordonOpen bool
	cordonEnd  time.Time
	secrets    map[string]string // value -> namespace
	pending    []pendingJustification
	events     []*eventsv1.Event
	announced  []announcement
	// announcedDisks: replacement events (MemberReplaced, MemberDiskLost) whose fresh disk is
	// awaited, and the counts of how they ended (freshdisk_test.go)
	announcedDisks []*announcedDisk
	announceSeen   map[string]bool
	freshCounts    freshDiskCounts
	// eventless counts claim deletes justified by the operator's log only: no event followed.
	eventless  int
	checks     map[string]int
	opDownSeen int // times the operator took a member down while a fault had another down
	meshJoined int // times a meshed fleet was seen Provisioned with every member proxied (mesh_test.go)
	violation  string
	onViolate  func()

	// crash-loop-member faults recorded, and how they ended: the member's Pod replaced (a
	// replacement, a rollout, a delete) or its knob cleared by the heal
	crashLoops, crashEndedByNewPod, crashEndedByKnob int

	// apiserver_test.go: API server restarts, fresh reads, Node readiness
	cs             kubernetes.Interface
	apiRestarts    []*apiRestart
	fresh          int // rule a judgements made on a fresh read
	restartExcused int // rule a judgements that excused a restart's marks
	nodeReady      map[string]corev1.ConditionStatus
	nodeLog        []string
}

func newMonitor(onViolate func()) *monitor {
	return &monitor{fleets: map[string]*fleetView{}, secrets: map[string]string{}, checks: map[string]int{}, onViolate: onViolate,
		nodeReady: map[string]corev1.ConditionStatus{}, announceSeen: map[string]bool{}}
}

// violate records the first violation. Caller holds mu.
func (m *monitor) violate(rule, format string, args ...any) {
	if m.violation != "" {
		return
	}
	m.violation = fmt.Sprintf("[%s] at %s: %s", rule, time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	if d := m.diagnostics(); d != "" {
		m.violation += "\n\nwhat the monitor saw:\n" + d
	}
	go m.onViolate()
}

func (m *monitor) Violation() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.violation
}

func (m *monitor) Checks() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.checks {
		out[k] = v
	}
	return out
}

// addFleet registers a campaign namespace and its fleet.
func (m *monitor) addFleet(ns, name string, stateful bool, secret string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fleets[ns] = &fleetView{ns: ns, name: name, stateful: stateful, uids: map[string]bool{}, pods: map[string]memberPod{}, lostClaim: map[string]bool{},
		claims: map[string]claimView{}, disks: map[string][]*diskIncarnation{}, downSince: map[string]time.Time{}}
	m.secrets[secret] = ns
}

// addFault records an injected fault before it is injected; the returned func ends it.
func (m *monitor) addFault(seq int, ns, key string, oneShot bool) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, end := m.addFaultLocked(seq, ns, key, oneShot)
	return end
}

// addFaultLocked is addFault; it also returns the entry (nil when ns has no fleet now).
// Caller holds mu.
func (m *monitor) addFaultLocked(seq int, ns, key string, oneShot bool) (*faultEntry, func()) {
	f := m.fleets[ns]
	if f == nil || f.uid == "" {
		return nil, func() {}
	}
	e := &faultEntry{seq: seq, fleet: f.uid, key: key, started: time.Now()}
	if oneShot {
		e.ended = e.started
	}
	m.faults = append(m.faults, e)
	return e, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if e.ended.IsZero() {
			e.ended = time.Now()
		}
	}
}

// setCordon records a zone cordon's start (on) or end.
func (m *monitor) setCordon(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cordonOpen = on
	if !on {
		m.cordonEnd = time.Now()
	}
}

// start runs the informers behind the continuous checks until ctx ends.
func (m *monitor) start(ctx context.Context, c *campaign) error {
	m.cs = c.cs
	f := informers.NewSharedInformerFactory(c.cs, 0)
	pods := f.Core().V1().Pods().Informer()
	claims := f.Core().V1().PersistentVolumeClaims().Informer()
	sts := f.Apps().V1().StatefulSets().Informer()
	deps := f.Apps().V1().Deployments().Informer()
	events := f.Events().V1().Events().Informer()
	nodes := f.Core().V1().Nodes().Informer()
	df := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	fleets := df.ForResource(v1.GroupVersion.WithResource("celldfleets")).Informer()
	reservations := df.ForResource(v1.GroupVersion.WithResource("celldstoragereservations")).Informer()

	handle := func(inf cache.SharedIndexInformer, fn func(old, obj any, deleted bool)) error {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { fn(nil, obj, false) },
			UpdateFunc: func(old, obj any) { fn(old, obj, false) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				fn(nil, obj, true)
			},
		})
		return err
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(old, obj any, deleted bool)
	}{
		{fleets, m.onFleet}, {pods, m.onPod}, {sts, m.onWorkload}, {deps, m.onWorkload},
		{claims, m.onClaim}, {events, m.onEvent}, {reservations, m.onReservation}, {nodes, m.onNode},
	} {
		if err := handle(h.inf, h.fn); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	df.Start(ctx.Done())
	for _, inf := range []cache.SharedIndexInformer{pods, claims, sts, deps, events, fleets, reservations, nodes} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("informer caches did not sync")
		}
	}
	go m.tick(ctx)
	return nil
}

// tick re-judges the time-based rules: two members down for confirmDown, justifications due.
func (m *monitor) tick(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		for _, f := range m.fleets {
			m.judgeMembers(f)
			m.judgeFullStartDue(f, time.Now())
			m.judgeMesh(f, time.Now())
		}
		m.judgePending()
		m.judgeFreshDisks(time.Now())
		m.mu.Unlock()
	}
}

func (m *monitor) onFleet(_, obj any, deleted bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	fl := &v1.CelldFleet{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, fl) != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fleets[fl.Namespace]
	if f == nil || fl.Name != f.name {
		return
	}
	m.checks[ruleSecrets]++
	status, _ := json.Marshal(fl.Status)
	m.scanSecrets(string(status), "status of CelldFleet "+fl.Namespace+"/"+fl.Name)
	uid := string(fl.UID)
	if deleted {
		if f.uid == uid {
			f.uid, f.deleting = "", false
		}
		return
	}
	if f.uid != uid {
		if fl.DeletionTimestamp != nil {
			return // an earlier fleet's last updates
		}
		f.uid, f.uids[uid] = uid, true
		f.members, f.pods, f.twoDownAt, f.lastFresh = newMemberState(f.stateful), map[string]memberPod{}, time.Time{}, time.Time{}
		f.downSince = map[string]time.Time{}
		f.paused, f.pausedAt, f.stop, f.deleting, f.mesh = false, time.Time{}, nil, false, meshView{}
	}
	// only ever set here: a late watch after an API server restart must not undo the
	// campaign's journal of the deletion (setDeleting)
	if fl.DeletionTimestamp != nil {
		f.deleting = true
	}
	f.declared = 3
	if fl.Spec.Replicas != nil {
		f.declared = int(*fl.Spec.Replicas)
	}
	// f.paused is the campaign's journal (setPaused), not this watch: after an API server
	// restart the watch can deliver an unpause many seconds after the operator acted on it.
	f.mesh.observeFleet(fl)
	m.judgeMesh(f, time.Now())
}

// setDeleting journals the campaign's deletion of ns's fleet once the API server accepted it.
func (m *monitor) setDeleting(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fleets[ns]; f != nil && f.uid != "" {
		f.deleting = true
	}
}

// setPaused journals the campaign's own pause (once the API server accepted it) or unpause
// (before it is sent), so rule c judges a write against what the operator could know
// whatever the monitor's fleet watch has delivered. The campaign is the only writer of
// spec.maintenance.paused.
func (m *monitor) setPaused(ns string, paused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fleets[ns]
	if f == nil {
		return
	}
	if paused && !f.paused {
		f.pausedAt = time.Now()
	}
	if !paused && f.paused {
		f.unpausedAt = time.Now()
	}
	f.paused = paused
}

// fleetOf returns the view of obj's namespace and whether obj belongs to its current fleet.
func (m *monitor) fleetOf(ns string, labels map[string]string) (*fleetView, bool) {
	f := m.fleets[ns]
	if f == nil {
		return nil, false
	}
	return f, f.uid != "" && labels[v1.LabelFleetUID] == f.uid
}

func (m *monitor) onPod(_, obj any, deleted bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, mine := m.fleetOf(p.Namespace, p.Labels)
	if !mine {
		return
	}
	if deleted {
		delete(f.pods, p.Name)
	} else {
		f.pods[p.Name] = memberPodOf(f, p)
	}
	m.judgeMembers(f)
	m.judgeMesh(f, time.Now())
}

func memberPodOf(f *fleetView, p *corev1.Pod) memberPod {
	mp := memberPod{name: p.Name, ordinal: -1, terminating: p.DeletionTimestamp != nil,
		proxied: sidecarinjector.HasProxy(&p.Spec), finished: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
		uid: string(p.UID), crashing: p.Annotations[celldsim.AnnotationPrefix+celldsim.KnobCrashAfterMS] != ""}
	if f.stateful {
		mp.ordinal = ordinalOf(f.name, p.Name)
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			mp.unschedulable = true
		}
	}
	mp.serving = ready && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
	if !mp.serving {
		mp.detail = podDetail(p)
		mp.nodeMarkedAt = nodeMarkedAt(p)
	}
	return mp
}

// podDetail is what the report says of a Pod that does not serve: which Pod (UID), its phase,
// its Ready condition, and the last writer of its status (the celld simulator stands for the
// kubelet's prober; kube-controller-manager marks Pods of a NotReady node).
func podDetail(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "uid=%s phase=%s", shortUID(string(p.UID)), p.Status.Phase)
	if p.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " deleting-since=%s", p.DeletionTimestamp.Format("15:04:05"))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			fmt.Fprintf(&b, " Ready=%s(%s) at %s", c.Status, c.Reason, c.LastTransitionTime.Format("15:04:05"))
		}
	}
	var last metav1.ManagedFieldsEntry
	for _, mf := range p.ManagedFields {
		if mf.Subresource == "status" && mf.Time != nil && (last.Time == nil || !mf.Time.Before(last.Time)) {
			last = mf
		}
	}
	if last.Time != nil {
		fmt.Fprintf(&b, " status-by=%s at %s", last.Manager, last.Time.Format("15:04:05"))
	}
	return b.String()
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

func (m *monitor) onWorkload(_, obj any, deleted bool) {
	var ns, name string
	var labels map[string]string
	var replicas *int32
	switch w := obj.(type) {
	case *appsv1.StatefulSet:
		ns, name, labels, replicas = w.Namespace, w.Name, w.Labels, w.Spec.Replicas
	case *appsv1.Deployment:
		ns, name, labels, replicas = w.Namespace, w.Name, w.Labels, w.Spec.Replicas
	default:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, mine := m.fleetOf(ns, labels)
	if !mine || name != f.name || deleted || replicas == nil {
		return
	}
	f.members.setDesired(int(*replicas), f.podList())
	m.judgeMembers(f)
}

func (f *fleetView) podList() []memberPod {
	out := make([]memberPod, 0, len(f.pods))
	for _, p := range f.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// judgeMembers applies the member rule to f. Caller holds mu.
func (m *monitor) judgeMembers(f *fleetView) {
	if f.uid == "" || f.deleting || f.members == nil {
		f.twoDownAt = time.Time{}
		return
	}
	m.checks[ruleMembers]++
	pods := f.podList()
	down := f.members.observe(pods)
	now := time.Now()
	// members the node lifecycle controller marked after an API server restart
	// (apiserver_test.go) are excused one by one; the fault entries excuse others
	marked := m.restartDown(f.stateful, pods, down)
	if len(marked) > 0 {
		m.restartExcused++
	}
	var rest []string
	for _, d := range down {
		if !marked[d] {
			rest = append(rest, d)
		}
	}
	m.endCrashLoops(f, now)
	excused := openFaults(m.faults, f.uid, now, len(down)-crashingDown(f.stateful, pods, down), marked)
	f.noteDown(down, now)
	down = rest
	cordoned := 0
	if m.cordonOpen || now.Sub(m.cordonEnd) < effectLatency {
		for _, p := range pods {
			if p.unschedulable {
				cordoned++
			}
		}
	}
	byOperator := operatorDown(len(down), excused, cordoned)
	if byOperator >= 1 && excused > 0 {
		m.opDownSeen++
	}
	if byOperator < 2 {
		f.twoDownAt = time.Time{}
		return
	}
	if f.twoDownAt.IsZero() {
		f.twoDownAt = now
		return
	}
	if now.Sub(f.twoDownAt) < confirmDown {
		return
	}
	if m.reconnecting(now) && !f.verified {
		// the watches may still be resuming after an API server restart: judge a fresh read
		if !f.verifying && m.cs != nil {
			f.verifying = true
			go m.verifyMembers(f.ns, f.name, f.uid, f.stateful)
		}
		return
	}
	m.violate(ruleMembers, "fleet %s/%s had %d members down for %s, not excused by a fault (open faults %d, unschedulable in a cordoned zone %d, marked NotReady by the node controller after an API server restart %d); down and not so marked: %v; pods: %s",
		f.ns, f.name, byOperator, now.Sub(f.twoDownAt).Round(time.Millisecond), excused, cordoned, len(marked)/2, down, describePods(pods))
}

func describePods(pods []memberPod) string {
	var parts []string
	for _, p := range pods {
		s := p.name
		switch {
		case p.serving:
			s += "=serving"
		case p.terminating:
			s += "=terminating"
		case p.unschedulable:
			s += "=unschedulable"
		default:
			s += "=not-ready"
		}
		if p.detail != "" {
			s += " [" + p.detail + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func (m *monitor) onClaim(_, obj any, deleted bool) {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fleets[c.Namespace]
	if f == nil {
		return
	}
	f.noteDisk(c, deleted, time.Now())
	if deleted {
		delete(f.claims, c.Name)
		return
	}
	f.claims[c.Name] = claimView{owner: c.Labels[v1.LabelFleetUID], terminating: c.DeletionTimestamp != nil}
	if c.Status.Phase == corev1.ClaimLost {
		f.lostClaim[c.Name] = true
	}
}

func (m *monitor) onEvent(_, obj any, deleted bool) {
	e, ok := obj.(*eventsv1.Event)
	if !ok || deleted {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[ruleSecrets]++
	m.scanSecrets(e.Note, fmt.Sprintf("event %s/%s (%s)", e.Namespace, e.Name, e.Reason))
	if m.fleets[e.Namespace] != nil {
		m.events = append(m.events, e)
		m.noteAnnouncement(e)
	}
	m.judgePending()
}

func (m *monitor) onReservation(old, obj any, deleted bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[ruleOwnership]++
	uid, _, _ := unstructured.NestedString(u.Object, "spec", "fleetUID")
	if deleted {
		m.violate(ruleOwnership, "reservation %s (fleet UID %s) was deleted", u.GetName(), uid)
		return
	}
	if o, ok := old.(*unstructured.Unstructured); ok {
		before, _, _ := unstructured.NestedString(o.Object, "spec", "fleetUID")
		if before != uid {
			m.violate(ruleOwnership, "reservation %s was rebound from fleet UID %s to %s", u.GetName(), before, uid)
		}
	}
}

// scanSecrets fails on any Secret value in text. Caller holds mu.
func (m *monitor) scanSecrets(text, where string) {
	for v, ns := range m.secrets {
		if strings.Contains(text, v) {
			m.violate(ruleSecrets, "the value of Secret chaos-env in %s appears in %s", ns, where)
		}
	}
}

// scanLogLine is the operator log's scanner: secrets, and the replacements the operator
// announces (its own journal of why it gives a disk up): the "replacement" line it writes
// before a replacement's first write, and the mutation lines of its hold and Pod delete.
func (m *monitor) scanLogLine(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[ruleSecrets]++
	m.scanSecrets(line, "the operator's log: "+line)
	if strings.Contains(line, `"msg":"replacement"`) {
		var r struct {
			Fleet  string `json:"fleet"`
			Member string `json:"member"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Member != "" {
			ns, _, _ := strings.Cut(r.Fleet, "/")
			m.announced = append(m.announced, announcement{ns: ns, member: r.Member, at: time.Now()})
		}
		return
	}
	if !strings.Contains(line, `"msg":"mutation"`) {
		return
	}
	var mu struct {
		Fleet  string `json:"fleet"`
		Object string `json:"object"`
		Why    string `json:"why"`
	}
	if json.Unmarshal([]byte(line), &mu) != nil || !strings.HasPrefix(mu.Object, "Pod/") {
		return
	}
	ns, _, _ := strings.Cut(mu.Fleet, "/")
	member := strings.TrimPrefix(mu.Object, "Pod/")
	if strings.Contains(mu.Why, "Replacing member "+member) || strings.Contains(mu.Why, "records claim data-"+member) {
		m.announced = append(m.announced, announcement{ns: ns, member: member, at: time.Now()})
	}
}

// announcement is a replacement the operator logged before deleting the member's Pod.
type announcement struct {
	ns, member string
	at         time.Time
}

// onWrite judges one write of the operator as the proxy passes it on.
func (m *monitor) onWrite(w writeRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checks[ruleOwnership]++
	if w.Resource == "celldstoragereservations" && w.Method == "DELETE" {
		m.violate(ruleOwnership, "the operator deleted reservation %s", w.Name)
		return
	}
	f := m.fleets[w.Namespace]
	if f == nil {
		m.judgeForeignWrite(w)
		return
	}
	base := strings.SplitN(w.Resource, "/", 2)[0]
	switch base {
	case "celldfleets", "events":
	default:
		if w.Kind != "" && w.Kind != "Status" && !f.uids[w.Labels[v1.LabelFleetUID]] {
			m.violate(ruleOwnership, "the operator sent %s %s: the object answered (%s) has no label %s of a fleet of %s (labels %v)",
				w.Method, w.Path, w.Kind, v1.LabelFleetUID, w.Namespace, w.Labels)
			return
		}
	}
	if lifecycleWrite(w) {
		m.checks[rulePaused]++
		if f.paused && !f.deleting && time.Since(f.pausedAt) >= pauseSeen {
			m.violate(rulePaused, "the operator sent %s %s while fleet %s/%s had been paused for %s",
				w.Method, w.Path, f.ns, f.name, time.Since(f.pausedAt).Round(time.Millisecond))
			return
		}
	}
	if base == "persistentvolumeclaims" && w.Method == "DELETE" {
		m.judgeClaimDelete(f, w)
	}
	if base == "pods" && w.Method == "DELETE" && w.Intent != "" {
		m.judgeReplacementStart(f, w)
	}
	if (base == "statefulsets" || base == "deployments") && w.Name == f.name && w.Replicas != nil && w.Method != "DELETE" {
		m.judgeFullStart(f, w)
	}
}

// judgeForeignWrite: outside the campaign's namespaces the operator writes only its lease,
// its events, the reservations and access reviews. Caller holds mu.
func (m *monitor) judgeForeignWrite(w writeRecord) {
	base := strings.SplitN(w.Resource, "/", 2)[0]
	switch {
	case w.Namespace == "" && (base == "celldstoragereservations" || base == "selfsubjectaccessreviews" || base == "selfsubjectrulesreviews" || base == "tokenreviews" || base == "subjectaccessreviews"):
	case w.Namespace == operatorNamespace && (base == "leases" || base == "events" || base == "configmaps"):
	default:
		m.violate(ruleOwnership, "the operator sent %s %s, outside every fleet", w.Method, w.Path)
	}
}

// lifecycleWrite: a write a paused fleet must never receive from the operator.
func lifecycleWrite(w writeRecord) bool {
	switch w.Resource {
	case "statefulsets", "deployments":
		return w.Method == "PUT" || w.Method == "PATCH" || w.Method == "POST" || w.Method == "DELETE"
	case "pods", "persistentvolumeclaims":
		return w.Method == "DELETE"
	}
	return false
}

// judgeClaimDelete: outside deletion a claim goes only in a replacement, with its event, and
// fresh disks for members that were not lost are at least the absorb window apart. Caller
// holds mu.
func (m *monitor) judgeClaimDelete(f *fleetView, w writeRecord) {
	m.checks[ruleClaims]++
	owner := w.Labels[v1.LabelFleetUID]
	if f.deleting || (owner != "" && owner != f.uid) {
		return // fleet deletion removes every claim of the fleet, and of its earlier ones
	}
	member := strings.TrimPrefix(w.Name, "data-")
	m.pending = append(m.pending, pendingJustification{ns: w.Namespace, member: member, claim: w.Name, at: w.At})
	if f.lostClaim[w.Name] || m.lostByFault(f, w.Name) {
		return
	}
	if !f.lastFresh.IsZero() && w.At.Sub(f.lastFresh) < operatorTimers.absorbWindow {
		m.violate(ruleClaims, "the operator gave up claim %s/%s %s after another fresh disk of the fleet, inside the absorb window of %s",
			w.Namespace, w.Name, w.At.Sub(f.lastFresh).Round(time.Millisecond), operatorTimers.absorbWindow)
	}
	f.lastFresh = w.At
}

// lostByFault: a lose-volume of this claim was injected. Caller holds mu.
func (m *monitor) lostByFault(f *fleetView, claim string) bool {
	for _, e := range m.faults {
		if e.fleet == f.uid && e.key == "claim:"+claim {
			return true
		}
	}
	return false
}

// judgePending fails a claim delete whose replacement event did not come in time. Caller
// holds mu.
func (m *monitor) judgePending() {
	keep := m.pending[:0]
	for _, p := range m.pending {
		justified := false
		for _, e := range m.events {
			if e.Namespace == p.ns && eventTime(e).After(p.at.Add(-justifyWithin)) && (e.Reason == v1.EventMemberDiskLost || e.Reason == v1.EventMemberReplaced) && strings.Contains(e.Note, p.member) {
				justified = true
				break
			}
		}
		logged := false
		for _, a := range m.announced {
			if a.ns == p.ns && a.member == p.member && !a.at.Before(p.at.Add(-justifyWithin)) && !a.at.After(p.at.Add(effectLatency)) {
				logged = true
			}
		}
		switch {
		case justified:
		case time.Since(p.at) > justifyWithin && logged:
			// The operator logged the replacement before it deleted the Pod, but no event
			// followed: the pass that deleted the claim died before it told its actions.
			m.eventless++
		case time.Since(p.at) > justifyWithin:
			m.violate(ruleClaims, "the operator deleted claim %s/%s at %s without a MemberDiskLost or MemberReplaced event naming %s within %s, and without logging the replacement before it",
				p.ns, p.claim, p.at.Format("15:04:05.000"), p.member, justifyWithin)
		default:
			keep = append(keep, p)
		}
	}
	m.pending = keep
}

// eventTime is when an event was last observed: a repeated event is patched, not created.
func eventTime(e *eventsv1.Event) time.Time {
	t := e.CreationTimestamp.Time
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}
