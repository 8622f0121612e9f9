package celldctl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/reservation"
)

// States of a fleet as the status screen names them, the ones docs/lifecycle.md describes.
const (
	StateProvisioned  = "Provisioned"
	StateProvisioning = "Provisioning"
	StateRolling      = "Rolling"
	StateBlocked      = "Blocked"
	StatePaused       = "Paused"
	StateStopped      = "Stopped"
	StateHealing      = "Healing"
	StateDeleting     = "Deleting"
)

// Status is the status screen's model: a pure function of a Snapshot and the time
// (BuildStatus), rendered by Render or printed as YAML or JSON.
type Status struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// State is one word: Provisioned, Provisioning, Rolling, Blocked, Paused, Stopped, Healing
	// or Deleting.
	State         string   `json:"state"`
	Profile       string   `json:"profile"`
	Layout        string   `json:"layout"`
	Image         string   `json:"image"`
	Zones         []string `json:"zones"`
	PlacementMode string   `json:"placementMode"`
	Replicas      Counts   `json:"replicas"`
	Paused        bool     `json:"paused"`
	Stopped       bool     `json:"stopped"`
	RestartToken  string   `json:"restartToken,omitempty"`
	Ready         *Cond    `json:"ready,omitempty"`
	Blocked       *Cond    `json:"blocked,omitempty"`
	Rollout       *Rollout `json:"rollout,omitempty"`
	Members       []Member `json:"members"`
	// RemovedDisks are the claims of members removed by scale-in, kept until growth reattaches
	// them or the fleet is deleted.
	RemovedDisks []Disk       `json:"removedDisks,omitempty"`
	Application  *Application `json:"application,omitempty"`
	Reservation  *Reservation `json:"reservation,omitempty"`
	Routing      Routing      `json:"routing"`
	Mesh         *Mesh        `json:"mesh,omitempty"`
	Capacity     *Capacity    `json:"capacity,omitempty"`
	Previews     []Preview    `json:"previews,omitempty"`
	Warnings     []Event      `json:"warnings,omitempty"`
	Unreadable   []Problem    `json:"unreadable,omitempty"`
	Now          metav1.Time  `json:"now"`
	Deleting     *metav1.Time `json:"deleting,omitempty"`
}

// Counts are the member counts of the fleet and its workload.
type Counts struct {
	Declared    int32 `json:"declared"`
	Desired     int32 `json:"desired"`
	Applied     int32 `json:"applied"`
	Ready       int32 `json:"ready"`
	Observed    int32 `json:"observed"`
	Joining     int32 `json:"joining"`
	Terminating int32 `json:"terminating"`
}

// Cond is a condition's reason and message, and since when.
type Cond struct {
	Status  string       `json:"status"`
	Reason  string       `json:"reason"`
	Message string       `json:"message,omitempty"`
	Since   *metav1.Time `json:"since,omitempty"`
}

// Rollout is a template change Kubernetes is rolling out.
type Rollout struct {
	Updated int32  `json:"updated"`
	Total   int32  `json:"total"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	// Next is the member Kubernetes replaces next (StatefulSet: the highest ordinal not yet on
	// the new revision), or "" when it picks (Deployment) or none is left.
	Next string `json:"next,omitempty"`
	// Waiting is an updated member that is not Ready yet: the rollout waits for it.
	Waiting string `json:"waiting,omitempty"`
	// Note says why the rollout cannot be described further (template not observed yet).
	Note string `json:"note,omitempty"`
}

// Member is one row of the members table.
type Member struct {
	Ordinal  int32  `json:"ordinal"` // -1 for a Deployment member
	Pod      string `json:"pod"`
	Exists   bool   `json:"exists"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts,omitempty"`
	Node     string `json:"node,omitempty"`
	Zone     string `json:"zone,omitempty"`
	// Revision is current, updated (during a rollout) or old.
	Revision string       `json:"revision,omitempty"`
	Claim    string       `json:"claim,omitempty"`
	ClaimAge *metav1.Time `json:"claimCreated,omitempty"`
	// Disk is kept (its claim is bound), lost, deleting, pending, none (no claim) or emptyDir.
	Disk       string   `json:"disk"`
	AppVersion string   `json:"appVersion,omitempty"`
	Held       bool     `json:"held,omitempty"`
	Healing    *Healing `json:"lastHealing,omitempty"`
}

// Healing is the last self-healing action the operator reported about a member.
type Healing struct {
	Reason string      `json:"reason"`
	At     metav1.Time `json:"at"`
}

// Disk is a claim kept for a removed member.
type Disk struct {
	Claim   string      `json:"claim"`
	Phase   string      `json:"phase"`
	Created metav1.Time `json:"created"`
}

// Application is what the members report having loaded.
type Application struct {
	Converged *Cond    `json:"converged,omitempty"`
	Version   string   `json:"version,omitempty"`
	Versions  []string `json:"versions,omitempty"`
	Observed  int32    `json:"observed"`
	Expected  int32    `json:"expected"`
}

// Reservation is the fleet's storage reservation.
type Reservation struct {
	Name   string `json:"name"`
	Bucket string `json:"bucket,omitempty"`
	Scope  string `json:"scope,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Tuning says whether the reserved-tuning record exists and whether the fleet verifies.
	Tuning string `json:"tuning,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Routing is spec.routing and the RoutingReady condition.
type Routing struct {
	Mode      string   `json:"mode"`
	Hostnames []string `json:"hostnames,omitempty"`
	Ready     *Cond    `json:"ready,omitempty"`
}

// Mesh is spec.mesh and how many members carry a sidecar.
type Mesh struct {
	ControlPlaneNamespace string `json:"controlPlaneNamespace"`
	ApplicationAccess     string `json:"applicationAccess"`
	Sidecars              int32  `json:"sidecars"`
	Members               int32  `json:"members"`
}

// Capacity is the capacity decision and its history.
type Capacity struct {
	Mode          string       `json:"mode"`
	Reason        string       `json:"reason,omitempty"`
	Message       string       `json:"message,omitempty"`
	Desired       int32        `json:"desired"`
	Useful        int32        `json:"useful"`
	Pending       int32        `json:"pending"`
	Covered       int32        `json:"covered"`
	LastScaleOut  *metav1.Time `json:"lastScaleOut,omitempty"`
	LastScaleIn   *metav1.Time `json:"lastScaleIn,omitempty"`
	Declared      int32        `json:"declared,omitempty"`
	FailedBatches int32        `json:"failedBatches,omitempty"`
	Baseline      string       `json:"baseline,omitempty"`
	BaselineAt    *metav1.Time `json:"baselineAt,omitempty"`
	// History is the capacity events, oldest first.
	History []Event `json:"history,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// Preview is one CelldPreview of the fleet.
type Preview struct {
	Name    string       `json:"name"`
	Phase   string       `json:"phase"`
	Reason  string       `json:"reason,omitempty"`
	Fleet   string       `json:"fleet,omitempty"`
	URL     string       `json:"url,omitempty"`
	Expires *metav1.Time `json:"expiresAt,omitempty"`
}

// healingReasons are the events of self-healing actions (docs/operations.md, Events).
var healingReasons = []string{
	v1.EventMemberForceDeleted, v1.EventMemberDiskLost, v1.EventMemberReplaced,
	v1.EventMemberRecreated, v1.EventReplacementAbandoned,
}

var capacityReasons = []string{
	v1.EventCapacityScaledOut, v1.EventCapacityScaledIn, v1.EventLoadNotRedistributed, v1.EventIneffectiveCapacity,
}

// maxWarnings is how many of the last warning events the screen shows.
const maxWarnings = 5

// BuildStatus turns what was read into the status screen's model. It reads nothing and writes
// nothing: the same snapshot and time give the same model.
func BuildStatus(s *Snapshot, now time.Time) *Status {
	f := s.Fleet
	spec := f.Spec.DeepCopy()
	st := &Status{
		Namespace: f.Namespace, Name: f.Name, Generation: f.Generation,
		ObservedGeneration: f.Status.ObservedGeneration,
		Profile:            string(spec.Profile), Image: spec.RuntimeImage,
		Zones: spec.Placement.Zones, PlacementMode: string(spec.Placement.Mode),
		Now:        metav1.NewTime(now),
		Unreadable: slices.Clone(s.Problems),
	}
	if st.PlacementMode == "" {
		st.PlacementMode = string(v1.PlacementStrict)
	}
	st.Layout = layout(f)
	if m := spec.Maintenance; m != nil {
		st.Paused, st.RestartToken = m.Paused, m.RestartToken
	}
	if f.DeletionTimestamp != nil {
		st.Deleting = f.DeletionTimestamp.DeepCopy()
	}
	st.Replicas = Counts{
		Declared: replicasOf(f), Desired: f.Status.DesiredReplicas, Applied: f.Status.AppliedReplicas,
		Ready: f.Status.ReadyReplicas, Observed: f.Status.ObservedReplicas,
		Joining: f.Status.JoiningReplicas, Terminating: f.Status.TerminatingReplicas,
	}
	if w, ok := workloadReplicas(s); ok {
		st.Replicas.Applied = w // the workload itself is fresher than the last status write
		st.Stopped = st.Paused && w == 0
	}
	st.Ready = cond(f.Status.Conditions, v1.ConditionReady)
	if b := cond(f.Status.Conditions, v1.ConditionBlocked); b != nil && b.Status == string(metav1.ConditionTrue) {
		b.Since = f.Status.BlockedSince.DeepCopy()
		st.Blocked = b
	}
	st.Rollout = rollout(s)
	st.Members, st.RemovedDisks = members(s, st.Stopped)
	st.Application = application(f)
	st.Reservation = reservationView(s)
	st.Routing = routing(f)
	st.Mesh = mesh(s)
	st.Capacity = capacityView(s)
	st.Previews = previews(s)
	st.Warnings = warnings(s.Events)
	st.State = state(st)
	return st
}

func layout(f *v1.CelldFleet) string {
	switch {
	case f.Spec.Profile == v1.ProfilePersistentFleet:
		return "StatefulSet with a claim per member"
	case f.Spec.BucketWorkload == v1.BucketWorkloadOrdered:
		return "Ordered: StatefulSet without claims, zone by ordinal"
	default:
		return "Deployment"
	}
}

func workloadReplicas(s *Snapshot) (int32, bool) {
	switch {
	case s.StatefulSet != nil && s.StatefulSet.Spec.Replicas != nil:
		return *s.StatefulSet.Spec.Replicas, true
	case s.Deployment != nil && s.Deployment.Spec.Replicas != nil:
		return *s.Deployment.Spec.Replicas, true
	}
	return 0, false
}

func cond(conds []metav1.Condition, t string) *Cond {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return nil
	}
	return &Cond{Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.DeepCopy()}
}

// state names the fleet's state in one word, in the precedence docs/lifecycle.md gives its
// reasons: deletion, then a pause (stopped when the workload runs no member), a blocker, a
// healing step, the rollout, provisioning.
func state(st *Status) string {
	reason := ""
	if st.Ready != nil {
		reason = st.Ready.Reason
	}
	switch {
	case st.Deleting != nil:
		return StateDeleting
	case st.Stopped:
		return StateStopped
	case st.Paused:
		return StatePaused
	case st.Blocked != nil:
		return StateBlocked
	case reason == v1.ReasonLifecycleProgress || healingUnderWay(st):
		return StateHealing
	case st.Rollout != nil:
		return StateRolling
	case reason == v1.ReasonProvisioned && st.Ready.Status == string(metav1.ConditionTrue):
		return StateProvisioned
	}
	return StateProvisioning
}

// healingUnderWay: a replacement hold is on a member, or the Ready message announces a
// replacement the operator waits to make.
func healingUnderWay(st *Status) bool {
	for _, m := range st.Members {
		if m.Held {
			return true
		}
	}
	return st.Ready != nil && st.Ready.Reason == v1.ReasonProvisioning &&
		(strings.Contains(st.Ready.Message, "replaced on a fresh disk") || strings.Contains(st.Ready.Message, "Waiting to replace"))
}

func rollout(s *Snapshot) *Rollout {
	switch {
	case s.StatefulSet != nil:
		return statefulSetRollout(s)
	case s.Deployment != nil:
		return deploymentRollout(s)
	}
	return nil
}

const revisionLabel = appsv1.ControllerRevisionHashLabelKey

func statefulSetRollout(s *Snapshot) *Rollout {
	sts := s.StatefulSet
	total := int32(0)
	if sts.Spec.Replicas != nil {
		total = *sts.Spec.Replicas
	}
	if sts.Status.ObservedGeneration < sts.Generation {
		return &Rollout{Total: total, Note: "the StatefulSet controller has not observed the new template yet"}
	}
	cur, upd := sts.Status.CurrentRevision, sts.Status.UpdateRevision
	if upd == "" || cur == upd {
		return nil
	}
	r := &Rollout{Total: total, From: cur, To: upd}
	next := int32(-1)
	for _, p := range livePods(s.Pods) {
		n, ok := v1.MemberOrdinal(s.Fleet.Name, p.Name)
		if !ok || n >= total {
			continue
		}
		if p.Labels[revisionLabel] == upd {
			r.Updated++
			if !podReady(&p) && r.Waiting == "" {
				r.Waiting = p.Name
			}
		} else if n > next {
			next = n
		}
	}
	// Members that do not exist yet are created from the update revision.
	if next >= 0 {
		r.Next = v1.MemberName(s.Fleet.Name, next)
	}
	return r
}

func deploymentRollout(s *Snapshot) *Rollout {
	d := s.Deployment
	total := int32(0)
	if d.Spec.Replicas != nil {
		total = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation {
		return &Rollout{Total: total, Note: "the Deployment controller has not observed the new template yet"}
	}
	newest := newestReplicaSet(s.ReplicaSets)
	if newest == nil || d.Status.UpdatedReplicas >= total && d.Status.Replicas == d.Status.UpdatedReplicas {
		return nil
	}
	r := &Rollout{Total: total, To: newest.Labels[appsv1.DefaultDeploymentUniqueLabelKey]}
	for _, p := range livePods(s.Pods) {
		if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == r.To {
			r.Updated++
			if !podReady(&p) && r.Waiting == "" {
				r.Waiting = p.Name
			}
		}
	}
	if r.Updated >= total {
		return nil
	}
	return r
}

func newestReplicaSet(rs []appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var best *appsv1.ReplicaSet
	bestRev := int64(-1)
	for i := range rs {
		rev, _ := strconv.ParseInt(rs[i].Annotations["deployment.kubernetes.io/revision"], 10, 64)
		if rev > bestRev {
			best, bestRev = &rs[i], rev
		}
	}
	return best
}

func livePods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// members lists the StatefulSet's ordinals (a stopped fleet's declared ones, each Stopped on
// its kept disk), or a Deployment's Pods by name.
func members(s *Snapshot, stopped bool) ([]Member, []Disk) {
	f := s.Fleet
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range s.Claims {
		claims[s.Claims[i].Name] = &s.Claims[i]
	}
	byName := map[string]*corev1.Pod{}
	for i := range s.Pods {
		p := &s.Pods[i]
		// A Pod being replaced and its successor can share a name only one after the other, but a
		// terminating Pod lingers: show the live one.
		if old, ok := byName[p.Name]; !ok || old.DeletionTimestamp != nil {
			byName[p.Name] = p
		}
	}
	var out []Member
	if !f.RunsAsStatefulSet() {
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		newest := ""
		if rs := newestReplicaSet(s.ReplicaSets); rs != nil {
			newest = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
		for _, n := range names {
			m := member(s, byName[n], n, -1, nil)
			switch h := byName[n].Labels[appsv1.DefaultDeploymentUniqueLabelKey]; {
			case newest == "":
			case h == newest:
				m.Revision = "current"
			default:
				m.Revision = "old"
			}
			out = append(out, m)
		}
		return out, nil
	}
	n := int32(0)
	if w, ok := workloadReplicas(s); ok {
		n = w
	}
	for name := range byName {
		if o, ok := v1.MemberOrdinal(f.Name, name); ok && o+1 > n {
			n = o + 1
		}
	}
	if stopped {
		n = max(n, replicasOf(f))
	}
	for i := range n {
		name := v1.MemberName(f.Name, i)
		var claim *corev1.PersistentVolumeClaim
		if f.Spec.Profile == v1.ProfilePersistentFleet {
			claim = claims[v1.ClaimName(f.Name, i)]
			if claim == nil {
				claim = &corev1.PersistentVolumeClaim{} // none yet
			}
		}
		m := member(s, byName[name], name, i, claim)
		if !m.Exists && stopped {
			m.Phase = "Stopped"
		}
		if m.Claim == "" && claim != nil {
			m.Claim = v1.ClaimName(f.Name, i)
		}
		out = append(out, m)
	}
	var removed []Disk
	for _, c := range s.Claims {
		if o, ok := v1.ClaimOrdinal(f.Name, c.Name); ok && o >= n {
			removed = append(removed, Disk{Claim: c.Name, Phase: claimPhase(&c), Created: c.CreationTimestamp})
		}
	}
	sort.Slice(removed, func(i, j int) bool {
		a, _ := v1.ClaimOrdinal(f.Name, removed[i].Claim)
		b, _ := v1.ClaimOrdinal(f.Name, removed[j].Claim)
		return a < b
	})
	return out, removed
}

func member(s *Snapshot, p *corev1.Pod, name string, ordinal int32, claim *corev1.PersistentVolumeClaim) Member {
	f := s.Fleet
	m := Member{Ordinal: ordinal, Pod: name, Disk: "emptyDir"}
	if claim != nil {
		m.Disk = "none"
		if claim.Name != "" {
			m.Claim, m.Disk = claim.Name, diskState(claim)
			m.ClaimAge = claim.CreationTimestamp.DeepCopy()
		}
	}
	if p == nil {
		m.Phase = "Missing"
	} else {
		m.Exists, m.Ready = true, podReady(p)
		m.Phase = podPhase(p)
		m.Node = p.Spec.NodeName
		m.Held = slices.Contains(p.Finalizers, v1.FinalizerReplacingDisk)
		for _, c := range p.Status.ContainerStatuses {
			m.Restarts += c.RestartCount
		}
		if s.StatefulSet != nil {
			switch h := p.Labels[revisionLabel]; {
			case h == "":
			case h == s.StatefulSet.Status.UpdateRevision && s.StatefulSet.Status.UpdateRevision != s.StatefulSet.Status.CurrentRevision:
				m.Revision = "updated"
			case h == s.StatefulSet.Status.CurrentRevision:
				m.Revision = "current"
			default:
				m.Revision = "old"
			}
		}
	}
	switch z, ok := s.Zones[m.Node]; {
	case m.Node == "":
	case ok && z != "":
		m.Zone = z
	case f.Spec.BucketWorkload == v1.BucketWorkloadOrdered && ordinal >= 0 && len(f.Spec.Placement.Zones) > 0:
		m.Zone = f.Spec.Placement.Zones[int(ordinal)%len(f.Spec.Placement.Zones)] // by ordinal (docs/lifecycle.md)
	default:
		m.Zone = "?"
	}
	if app := f.Status.Application; app != nil {
		for _, n := range app.Nodes {
			if n.Name == name {
				m.AppVersion = n.Version
				if m.AppVersion == "" {
					m.AppVersion = "(" + n.Reason + ")"
				}
			}
		}
	}
	m.Healing = lastHealing(s.Events, name)
	return m
}

func diskState(c *corev1.PersistentVolumeClaim) string {
	switch {
	case c.DeletionTimestamp != nil:
		return "deleting"
	case c.Status.Phase == corev1.ClaimLost:
		return "lost"
	case c.Status.Phase == corev1.ClaimBound:
		return "kept"
	}
	return "pending"
}

func claimPhase(c *corev1.PersistentVolumeClaim) string {
	if c.DeletionTimestamp != nil {
		return "Terminating"
	}
	return string(c.Status.Phase)
}

// podPhase is the Pod's phase and readiness the way a person reads it: Running/Ready,
// Running/NotReady (CrashLoopBackOff), Pending (Unschedulable), Terminating.
func podPhase(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	waiting := ""
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			waiting = c.State.Waiting.Reason
			break
		}
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		if podReady(p) {
			return "Running/Ready"
		}
		if waiting != "" {
			return "Running/NotReady (" + waiting + ")"
		}
		return "Running/NotReady"
	case corev1.PodPending:
		if len(p.Spec.SchedulingGates) > 0 {
			return "Pending (SchedulingGated)"
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
				return "Pending (" + c.Reason + ")"
			}
		}
		if waiting != "" {
			return "Pending (" + waiting + ")"
		}
		return "Pending"
	case "":
		return "Pending"
	}
	return string(p.Status.Phase)
}

// lastHealing is the latest self-healing event that names the member: as its related object,
// or in its note.
func lastHealing(events []Event, pod string) *Healing {
	word := regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(pod) + `($|[^a-z0-9-])`)
	var out *Healing
	for _, e := range events {
		if !slices.Contains(healingReasons, e.Reason) {
			continue
		}
		if e.Related == "Pod/"+pod || e.Regarding == "Pod/"+pod || word.MatchString(e.Note) {
			if out == nil || !e.Last.Before(&out.At) {
				out = &Healing{Reason: e.Reason, At: e.Last}
			}
		}
	}
	return out
}

func application(f *v1.CelldFleet) *Application {
	app := f.Status.Application
	c := cond(f.Status.Conditions, v1.ConditionApplicationConverged)
	if app == nil && c == nil {
		return nil
	}
	out := &Application{Converged: c}
	if app != nil {
		out.Observed, out.Expected = app.ObservedNodes, app.ExpectedNodes
		if app.ObservedVersion != nil {
			out.Version = app.ObservedVersion.Version
		}
		for _, v := range app.Versions {
			out.Versions = append(out.Versions, fmt.Sprintf("%s (%s) on %d", v.Version, v.Prefix, v.Nodes))
		}
	}
	return out
}

func reservationView(s *Snapshot) *Reservation {
	f := s.Fleet
	name := f.Status.Reservation
	if name == "" {
		if f.Spec.Storage.Bucket == "" {
			return nil
		}
		return &Reservation{Name: reservation.Name(f.Spec.Storage.Bucket, f.Spec.Storage.Prefix), Bucket: f.Spec.Storage.Bucket,
			Note: "not recorded in status yet"}
	}
	r := s.Reservation
	if r == nil {
		return &Reservation{Name: name, Bucket: f.Spec.Storage.Bucket, Note: "could not be read (see below)"}
	}
	out := &Reservation{Name: r.Name, Bucket: r.Spec.Bucket, Holder: reservation.Holder(r)}
	switch {
	case r.Spec.OwnerKind == v1.ReservationOwnerFleetPreviews:
		out.Scope = "preview pool: the whole bucket"
	case r.Spec.Prefix != "":
		out.Scope = "prefix " + r.Spec.Prefix + "/ of the bucket"
	default:
		out.Scope = "the whole bucket"
	}
	ok, why := reservation.Matches(r, f)
	_, recorded := r.Annotations[v1.AnnotationReservedTuning]
	switch {
	case recorded && ok:
		out.Tuning = "recorded; " + why
	case recorded:
		out.Tuning = "recorded; does not verify: " + why
	case ok:
		out.Tuning = "none recorded; " + why
	default:
		out.Tuning = "none recorded; " + why
	}
	if r.Spec.FleetUID != string(f.UID) {
		out.Note = "held by another fleet: " + out.Holder
	}
	return out
}

func routing(f *v1.CelldFleet) Routing {
	out := Routing{Mode: "none", Ready: cond(f.Status.Conditions, v1.ConditionRoutingReady)}
	r := f.Spec.Routing
	if r == nil {
		return out
	}
	out.Hostnames = r.Hostnames
	switch {
	case r.Gateway != nil:
		gw := r.Gateway.Name
		if r.Gateway.Namespace != "" {
			gw = r.Gateway.Namespace + "/" + gw
		}
		out.Mode = "HTTPRoute " + f.Name + "-routing on Gateway " + gw
	case r.Ingress != nil:
		out.Mode = "Ingress " + f.Name + "-routing, class " + r.Ingress.ClassName
	}
	return out
}

func mesh(s *Snapshot) *Mesh {
	m := s.Fleet.Spec.Mesh
	if m == nil || m.Istio == nil {
		return nil
	}
	out := &Mesh{ControlPlaneNamespace: m.Istio.ControlPlaneNamespace, ApplicationAccess: string(m.Istio.ApplicationAccess)}
	if out.ControlPlaneNamespace == "" {
		out.ControlPlaneNamespace = v1.DefaultControlPlaneNamespace
	}
	if out.ApplicationAccess == "" {
		out.ApplicationAccess = string(v1.ApplicationAccessAllowAll)
	}
	for _, p := range livePods(s.Pods) {
		out.Members++
		for _, c := range append(slices.Clone(p.Spec.Containers), p.Spec.InitContainers...) {
			if c.Name == "istio-proxy" {
				out.Sidecars++
				break
			}
		}
	}
	return out
}

func capacityView(s *Snapshot) *Capacity {
	f := s.Fleet
	if f.Spec.Capacity == nil && f.Status.Capacity == nil {
		return nil
	}
	out := &Capacity{}
	if f.Spec.Capacity != nil {
		out.Mode = string(f.Spec.Capacity.Mode)
	}
	if out.Mode == "" {
		out.Mode = string(v1.CapacityShadow)
	}
	if c := f.Status.Capacity; c != nil {
		out.Reason, out.Message = c.Reason, c.Message
		out.Desired, out.Useful, out.Pending, out.Covered = c.DesiredReplicas, c.UsefulReplicas, c.PendingReplicas, c.CoveredReplicas
	}
	switch r := s.Reservation; {
	case r == nil:
		if f.Status.Reservation != "" {
			out.Note = "history unknown: the reservation could not be read"
		}
	default:
		value, ok := r.Annotations[v1.AnnotationCurrentOperation]
		raw := reservation.CapacityState(value, f.UID)
		var h capacity.History
		if ok && raw != nil && json.Unmarshal(raw, &h) == nil {
			if !h.LastScaleOut.IsZero() {
				out.LastScaleOut = new(metav1.NewTime(h.LastScaleOut))
			}
			if !h.LastScaleIn.IsZero() {
				out.LastScaleIn = new(metav1.NewTime(h.LastScaleIn))
			}
			out.Declared, out.FailedBatches = h.Declared, h.FailedBatches
			if b := h.Baseline; b != nil {
				out.Baseline = fmt.Sprintf("addition %d -> %d, judged against %d incumbents", b.From, b.To, len(b.Incumbents))
				out.BaselineAt = new(metav1.NewTime(b.At))
			}
		}
	}
	for _, e := range s.Events {
		if slices.Contains(capacityReasons, e.Reason) {
			out.History = append(out.History, e)
		}
	}
	return out
}

func previews(s *Snapshot) []Preview {
	var out []Preview
	for _, p := range s.Previews {
		v := Preview{Name: p.Name, Phase: string(p.Status.Phase), Fleet: p.Status.FleetName, URL: p.Status.URL,
			Expires: p.Status.ExpiresAt.DeepCopy()}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady); c != nil {
			v.Reason = c.Reason
		}
		if v.Phase == "" {
			v.Phase = "-"
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// warnings are the last Warning events, newest first.
func warnings(events []Event) []Event {
	var out []Event
	for i := len(events) - 1; i >= 0 && len(out) < maxWarnings; i-- {
		if events[i].Type == corev1.EventTypeWarning {
			out = append(out, events[i])
		}
	}
	return out
}

// Normalize replaces every time of the model with one fixed instant, so output taken at
// different moments on different clusters compares: every age then reads 0s.
func (st *Status) Normalize() {
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	set := func(p *metav1.Time) {
		if p != nil {
			*p = t
		}
	}
	st.Now = t
	set(st.Deleting)
	for _, c := range []*Cond{st.Ready, st.Blocked, st.Routing.Ready} {
		if c != nil {
			set(c.Since)
		}
	}
	if st.Application != nil && st.Application.Converged != nil {
		set(st.Application.Converged.Since)
	}
	for i := range st.Members {
		set(st.Members[i].ClaimAge)
		if h := st.Members[i].Healing; h != nil {
			h.At = t
		}
	}
	for i := range st.RemovedDisks {
		st.RemovedDisks[i].Created = t
	}
	if c := st.Capacity; c != nil {
		set(c.LastScaleOut)
		set(c.LastScaleIn)
		set(c.BaselineAt)
		for i := range c.History {
			c.History[i].Last = t
		}
	}
	for i := range st.Previews {
		set(st.Previews[i].Expires)
	}
	for i := range st.Warnings {
		st.Warnings[i].Last = t
	}
}
