package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	acv1 "github.com/celld/celld-operator/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/ssa"
)

// LifecycleConditions are the condition types this reconciler owns; the application observer
// owns ApplicationConverged and both apply status with their own field manager.
var LifecycleConditions = []string{v1.ConditionReady, v1.ConditionProgressing, v1.ConditionBlocked,
	v1.ConditionMaintenancePaused, v1.ConditionDeleting, v1.ConditionRoutingReady, v1.ConditionOperationSizeWarning}

// report projects status from the scope and applies it through /status, only when it changed:
// a settled fleet's reconcile writes nothing.
func (r *Reconciler) report(ctx context.Context, s *scope) error {
	live := s.live
	r.emitActions(s, live) // what the pass did is told even if a status write below fails
	if err := r.dropLegacyConditions(ctx, s, live); err != nil {
		return err
	}
	want := r.project(s, live)
	if r.Memory.statusInFlight(s.key, live.UID, live.ResourceVersion, *want) {
		// The cache has not delivered the last pass's write yet, and this pass would write,
		// count and tell the same again: that write already carries this very status.
		return nil
	}
	r.metrics.observe(live, want)
	r.emit(live, want)
	r.capacityWarnings(s, live, want.Capacity)
	if equality.Semantic.DeepEqual(ownedStatus(live.Status), ownedStatus(*want)) {
		return nil
	}
	counters := countersOnly(live.Status, *want)
	if counters {
		if wait := r.Memory.statusWait(s.key, live.UID, r.now()); wait > 0 {
			s.again(wait) // the next pass writes what this one would have
			r.metrics.paced()
			return nil
		}
	}
	if err := ApplyStatus(ctx, r.Client, live, want); err != nil {
		return client.IgnoreNotFound(err) // a released fleet may be gone
	}
	r.metrics.statusWritten(counters)
	r.Memory.statusWritten(s.key, live.UID, r.now(), live.ResourceVersion, *want)
	return nil
}

// legacyConditionTypes are conditions earlier releases (up to v0.0.5 and the one-disruption
// controller) wrote and this release removes from their fleets.
var legacyConditionTypes = []string{"LifecycleBlocked", "ProductionQualified", "DiskCleanupPending"}

// dropLegacyConditions removes the legacy conditions once, with an optimistic-lock merge patch
// of status: a server-side apply cannot remove what another field manager (an earlier
// release's update) owns. status.lifecycle, which those releases also wrote, is not in this
// release's schema, so the API server drops it with the first status write.
func (r *Reconciler) dropLegacyConditions(ctx context.Context, s *scope, live *v1.CelldFleet) error {
	keep := slices.DeleteFunc(slices.Clone(live.Status.Conditions), func(c metav1.Condition) bool {
		return slices.Contains(legacyConditionTypes, c.Type)
	})
	if len(keep) == len(live.Status.Conditions) {
		return nil
	}
	w := write{verb: "remove conditions", object: "CelldFleet/" + live.Name + " " + strings.Join(legacyConditionTypes, ","),
		why: "an earlier release wrote them; this release does not have them", report: true}
	return client.IgnoreNotFound(r.do(ctx, s, w, sent(func(ctx context.Context) error {
		patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
		live.Status.Conditions = keep
		return r.Client.Status().Patch(ctx, live, patch)
	})))
}

// project computes the lifecycle part of status.
func (r *Reconciler) project(s *scope, live *v1.CelldFleet) *v1.CelldFleetStatus {
	f := s.fleet
	st := live.Status.DeepCopy()
	st.ObservedGeneration = live.Generation
	st.LabelSelector = v1.LabelFleetUID + "=" + string(live.UID)
	st.DesiredReplicas = f.DesiredReplicas()
	st.Reservation = s.reservationName
	st.AppliedReplicas, st.ReadyReplicas = 0, 0
	if w := s.workloadFacts(false); w.Exists {
		st.AppliedReplicas = w.Replicas
		if w.Observed() {
			st.ReadyReplicas = w.ReadyReplicas
		}
	}
	st.Replicas, st.ObservedReplicas, st.JoiningReplicas, st.TerminatingReplicas = 0, 0, 0, 0
	for i := range s.pods {
		p := &s.pods[i]
		st.Replicas++
		switch {
		case p.DeletionTimestamp != nil:
			st.TerminatingReplicas++
		case !podReady(p):
			st.JoiningReplicas++
		}
	}
	st.ObservedReplicas = st.Replicas - st.TerminatingReplicas
	st.ReplicaObservationValid = true
	st.Capacity = capacityStatus(s, live)
	if d := s.capacity; d != nil && (d.Mode == v1.CapacityScaleOut || d.Mode == v1.CapacityAutomatic) {
		// the policy's target is what the fleet heads to (a manual edit wins while it is pending)
		st.DesiredReplicas = d.Target
	}

	set, remove := lifecycle.StatusConditions(lifecycle.StatusInput{Reason: s.outcome.Reason, Message: s.outcome.Message,
		MembersReady: st.ReadyReplicas > 0 && st.ReadyReplicas == st.AppliedReplicas, Generation: live.Generation,
		// The pass's own read of the fleet decides, as it decided the reason: a fresher read
		// could say Deleting while the reason is still the previous pass's.
		Paused: paused(f), Deleting: f.DeletionTimestamp != nil,
		Reservation: s.reservationName, HistoryBytes: s.historyBytes, Routing: s.routing})
	for _, c := range set {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	for _, t := range remove {
		meta.RemoveStatusCondition(&st.Conditions, t)
	}
	blocked := meta.IsStatusConditionTrue(st.Conditions, v1.ConditionBlocked)
	switch {
	case !blocked:
		st.BlockedSince = nil
	case st.BlockedSince == nil || !wasBlocked(live) || blockedReason(live.Status.Conditions) != blockedReason(st.Conditions):
		// a new blocker starts a new period: a fleet resumed from a pause and blocked by
		// something else has not waited for that since the pause began
		st.BlockedSince = &metav1.Time{Time: s.now.Truncate(1e9)}
	}
	return st
}

// blockedReason is the Blocked condition's reason, "" without one.
func blockedReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1.ConditionBlocked); c != nil {
		return c.Reason
	}
	return ""
}

func wasBlocked(f *v1.CelldFleet) bool {
	return meta.IsStatusConditionTrue(f.Status.Conditions, v1.ConditionBlocked)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ownedStatus is the part of status this reconciler writes: everything but the observer's
// condition and status.application.
func ownedStatus(st v1.CelldFleetStatus) v1.CelldFleetStatus {
	out := *st.DeepCopy()
	out.Application = nil
	out.Conditions = nil
	for _, c := range st.Conditions {
		for _, t := range LifecycleConditions {
			if c.Type == t {
				out.Conditions = append(out.Conditions, c)
			}
		}
	}
	return out
}

// ApplyStatus applies the lifecycle part of st (everything but status.application and
// ApplicationConverged) with server-side apply on /status under FieldOwner, so the observer's
// condition and fields, owned by its own field manager, are never clobbered. It is exported for
// the observer's test that runs both writers against each other.
func ApplyStatus(ctx context.Context, c client.Client, live *v1.CelldFleet, st *v1.CelldFleetStatus) error {
	owned := ownedStatus(*st)
	status, err := ssa.Into(&owned, &acv1.CelldFleetStatusApplyConfiguration{})
	if err != nil {
		return err
	}
	return c.Status().Apply(ctx, acv1.CelldFleet(live.Name, live.Namespace).WithStatus(status),
		client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// emitActions records the events of what the pass did (self-healing actions, a superseded
// operation). They are emitted even when the pass ends early: the action happened, and the
// next pass has nothing left to report it by.
func (r *Reconciler) emitActions(s *scope, live *v1.CelldFleet) {
	if r.Recorder == nil {
		return
	}
	for _, e := range s.events {
		r.Recorder.Eventf(live, e.regarding, e.kind, e.reason, "Reconcile", "%s", e.message)
	}
	s.events = nil
}

// emit records a Blocked transition (status or
// reason changed) — events only on transitions.
func (r *Reconciler) emit(live *v1.CelldFleet, st *v1.CelldFleetStatus) {
	if r.Recorder == nil {
		return
	}
	before := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked)
	after := meta.FindStatusCondition(st.Conditions, v1.ConditionBlocked)
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return
	}
	switch {
	case after.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
	case before != nil && before.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(live, nil, corev1.EventTypeNormal, after.Reason, "Reconcile", "%s", fmt.Sprintf("No longer blocked: %s", after.Message))
	}
}

// capacityStatus is status.capacity: the pass's decision, or the last one while the policy
// decides nothing (a paused fleet, a pass that ended before the decision).
func capacityStatus(s *scope, live *v1.CelldFleet) *v1.CapacityStatus {
	f := s.fleet
	switch {
	case f.Spec.Capacity == nil:
		return nil
	case s.capacity != nil:
		st := s.capacity.Status()
		return &st
	case live.Status.Capacity != nil && live.Status.Capacity.Mode == f.Spec.Capacity.Mode:
		return live.Status.Capacity.DeepCopy()
	}
	return &v1.CapacityStatus{Mode: f.Spec.Capacity.Mode}
}

// capacityWarnings warns once when the decision turns to LoadNotRedistributed or
// IneffectiveCapacity.
func (r *Reconciler) capacityWarnings(s *scope, live *v1.CelldFleet, st *v1.CapacityStatus) {
	if r.Recorder == nil || st == nil || st.Reason == "" || (live.Status.Capacity != nil && live.Status.Capacity.Reason == st.Reason) {
		return
	}
	switch st.Reason {
	case capacity.ReasonLoadNotRedistributed:
		r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, v1.EventLoadNotRedistributed, "Reconcile", "%s", st.Message)
	case capacity.ReasonIneffectiveCapacity:
		r.Recorder.Eventf(live, nil, corev1.EventTypeWarning, v1.EventIneffectiveCapacity, "Reconcile", "%s", st.Message)
	}
}
