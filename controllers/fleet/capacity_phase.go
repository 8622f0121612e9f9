package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/reservation"
)

// Capacity is what the capacity policy keeps in memory between passes: each fleet's latest
// observation, delivered by the application observer's collections, and the trend its last
// decision returned. Neither is durable: an operator restart restarts the windows, which only
// delays a step; the cooldowns live in the reservation's history.
type Capacity struct {
	mu     sync.Mutex
	fleets map[types.NamespacedName]*capacityMemory
	// wake asks for a fleet's pass when a collection arrives, so a decision follows each
	// sample instead of the next resync.
	wake chan event.GenericEvent
}

type capacityMemory struct {
	uid   types.UID
	obs   *capacity.Observation
	trend capacity.Trend
}

// NewCapacity returns an empty capacity memory.
func NewCapacity() *Capacity {
	return &Capacity{fleets: map[types.NamespacedName]*capacityMemory{}, wake: make(chan event.GenericEvent, 1024)}
}

// Observed keeps a fleet's newest observation and wakes its pass. It is the observer's sink.
func (c *Capacity) Observed(key types.NamespacedName, uid types.UID, obs *capacity.Observation) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.memory(key, uid).obs = obs
	c.mu.Unlock()
	select {
	case c.wake <- event.GenericEvent{Object: &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	default: // a full queue already holds passes; the decision's requeue covers the rest
	}
}

// memory is the fleet's entry; a new UID under the same name starts over. c.mu is held.
func (c *Capacity) memory(key types.NamespacedName, uid types.UID) *capacityMemory {
	m := c.fleets[key]
	if m == nil || m.uid != uid {
		m = &capacityMemory{uid: uid}
		c.fleets[key] = m
	}
	return m
}

// load returns the fleet's latest observation and trend.
func (c *Capacity) load(key types.NamespacedName, uid types.UID) (*capacity.Observation, capacity.Trend) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.memory(key, uid)
	return m.obs, m.trend
}

// keep stores the trend a decision returned.
func (c *Capacity) keep(key types.NamespacedName, uid types.UID, t capacity.Trend) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.memory(key, uid).trend = t
}

// Forget drops a fleet's memory: the fleet is gone or has no policy.
func (c *Capacity) Forget(key types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.fleets, key)
}

// capacity makes the pass's one capacity decision for a fleet with spec.capacity: from the
// latest collection, the trend of the earlier ones and the reservation's history. The workload
// phase hands its Target to the lifecycle planner, which still grows in runs and removes one
// member per step. A paused fleet makes no new decision; its status keeps the last one.
func (r *Reconciler) capacity(_ context.Context, s *scope) (bool, error) {
	f := s.fleet
	if f.Spec.Capacity == nil || r.Capacity == nil {
		r.Capacity.Forget(s.key)
		return false, nil
	}
	if paused(f) {
		return false, nil
	}
	in := capacity.Input{Policy: *f.Spec.Capacity, Now: s.now, Declared: f.DesiredReplicas(), History: s.history}
	if w := s.workloadFacts(false); w.Exists {
		in.Applied = w.Replicas
		if in.Applied > 0 && f.RunsAsStatefulSet() {
			in.Victim = v1.MemberName(f.Name, in.Applied-1) // a scale-in removes the last ordinal
		}
	}
	in.Observation, in.Trend = r.Capacity.load(s.key, f.UID)
	d := capacity.Decide(in)
	r.Capacity.keep(s.key, f.UID, d.Trend)
	s.capacity = &d
	if d.RequeueAfter > 0 {
		s.again(d.RequeueAfter)
	}
	return false, nil
}

// target is the replica count the workload phase plans toward: the capacity decision's, or
// spec.replicas.
func (s *scope) target() int32 {
	if s.capacity != nil {
		return s.capacity.Target
	}
	return s.fleet.DesiredReplicas()
}

// recordStep records a replica change the workload phase wrote, from and to applied counts, in
// the reservation's capacity history: every step, manual or policy, starts the cooldowns, and a
// policy addition keeps the load it grew from. The write follows the step; a failed write loses
// the record (the cooldown then counts from an earlier step), never records a step not taken.
func (r *Reconciler) recordStep(ctx context.Context, s *scope, from, to int32) {
	d := s.capacity
	if d == nil || from == to {
		return
	}
	if d.Reason == capacity.ReasonScaleOutRecommended || d.Reason == capacity.ReasonScaleInRecommended {
		reason, verb := v1.EventCapacityScaledOut, "Added"
		if to < from {
			reason, verb = v1.EventCapacityScaledIn, "Removed"
		}
		s.events = append(s.events, fleetEvent{kind: corev1.EventTypeNormal, reason: reason,
			message: fmt.Sprintf("%s members on the %s capacity policy: %d to %d applied (%s)", verb, d.Mode, from, to, d.Message)})
		r.metrics.step(s.fleet, to > from)
	}
	h := s.history.Record(d, s.now, from, to)
	before, errBefore := json.Marshal(s.history)
	after, errAfter := json.Marshal(h)
	if errBefore == nil && errAfter == nil && string(before) == string(after) {
		return // what the annotation would hold is what it holds
	}
	if errAfter != nil {
		ctrl.LoggerFrom(ctx).Error(errAfter, "the capacity step is taken but its record cannot be encoded", "from", from, "to", to)
		return
	}
	if err := r.writeHistory(ctx, s, after); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the capacity step is taken but its record is lost; the cooldown counts from the previous step",
			"from", from, "to", to)
		return
	}
	s.history = h
}

// writeHistory writes the encoded history to the reservation's current-operation annotation
// with an Update on a fresh read, never retried: a conflict loses this record.
func (r *Reconciler) writeHistory(ctx context.Context, s *scope, state []byte) error {
	value, err := reservation.CapacityAnnotation(s.fleet.UID, state)
	if err != nil {
		return err
	}
	res := &v1.CelldStorageReservation{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Name: s.reservationName}, res); err != nil {
		return fmt.Errorf("read CelldStorageReservation %s: %w", s.reservationName, err)
	}
	if ok, why := reservation.Matches(res, s.fleet); !ok || len(res.OwnerReferences) > 0 || res.DeletionTimestamp != nil {
		return fmt.Errorf("CelldStorageReservation %s no longer binds the fleet (%s)", res.Name, why)
	}
	if res.Annotations == nil {
		res.Annotations = map[string]string{}
	}
	res.Annotations[v1.AnnotationCurrentOperation] = value
	w := write{verb: "record", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationCurrentOperation,
		why: "a replica step of a fleet with a capacity policy"}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
		return err
	}
	s.historyBytes = len(value)
	return nil
}

// readHistory decodes the capacity history of the reservation, or forgets an unreadable one
// (it only delays the next step). The record is there only for a fleet with spec.capacity:
// writeRecords removed any other before.
func (r *Reconciler) readHistory(ctx context.Context, s *scope, res *v1.CelldStorageReservation) {
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok || s.fleet.Spec.Capacity == nil {
		return
	}
	s.historyBytes = len(value)
	state := reservation.CapacityState(value, s.fleet.UID)
	if state == nil {
		return
	}
	if err := json.Unmarshal(state, &s.history); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the reservation's capacity history is unreadable; the policy starts from none", "reservation", res.Name)
		s.history = capacity.History{}
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
