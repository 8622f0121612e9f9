package fleet

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
)

// memories are everything the reconciler remembers of a fleet between passes, each keyed by
// the fleet: its status metrics, the drift verdicts of its workload, its capacity
// observations, its paced status writes, the answers to its workload's creation, its
// children's verdicts and answers, and its cached render. A memory added to the reconciler is
// added here, so forget drops it with the others.
func (r *Reconciler) memories() []func(types.NamespacedName) {
	m := []func(types.NamespacedName){
		func(k types.NamespacedName) { r.metrics.forget(k.Namespace, k.Name) },
		r.Drift.Forget, r.Capacity.Forget, r.pacer.forget, r.created.Forget,
	}
	if r.Applier != nil {
		m = append(m, r.Applier.Forget)
	}
	if r.Children != nil {
		m = append(m, r.Children.ForgetFleet)
	}
	return m
}

// forget drops a fleet from every memory.
func (r *Reconciler) forget(key types.NamespacedName) {
	for _, f := range r.memories() {
		f(key)
	}
}

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

// rememberCreated records the API server's answer to a workload's creation, stored: as the
// rendering, as converge does for an update, so the pass that first reads the new workload
// sends no dry-run to compare it; and as the workload itself until the cache delivers it
// (drift.Answers). It returns the workload as stored, nil without a usable answer (the next
// pass then finds it in the cache, or creates and reads it).
func (r *Reconciler) rememberCreated(key types.NamespacedName, desired, stored client.Object) client.Object {
	if stored.GetUID() == "" {
		return nil
	}
	switch d := desired.(type) {
	case *appsv1.StatefulSet:
		sts, ok := stored.(*appsv1.StatefulSet)
		if !ok {
			return nil
		}
		// The answer is decoded from JSON, in which the API server gives every claim template
		// an apiVersion and kind; the cache's reads carry none, and the two would differ.
		for i := range sts.Spec.VolumeClaimTemplates {
			sts.Spec.VolumeClaimTemplates[i].TypeMeta = metav1.TypeMeta{}
		}
		r.Drift.Written(key, statefulSetUpdate(sts, d), sts)
	case *appsv1.Deployment:
		deploy, ok := stored.(*appsv1.Deployment)
		if !ok {
			return nil
		}
		r.Drift.Written(key, deploymentUpdate(deploy, d), deploy)
	default:
		return nil
	}
	r.created.Remember(key, kindOf(stored), stored, r.now())
	return stored
}

// statusPace is the shortest time between two status writes of one fleet when the second only
// moves counters (members joining, terminating, ready) and the wording of unchanged
// conditions. A rollout or a growth changes those at every Pod transition: without the pace,
// a five-member Deployment roll wrote status about twenty times in four seconds. Anything a
// reader acts on (a condition's status or reason, the applied or desired count, the
// reservation, the capacity decision) is written at once.
const statusPace = time.Second

// statusPacer remembers when each fleet's status was last written, and what was written on
// top of which read. A nil pacer paces nothing.
type statusPacer struct {
	mu   sync.Mutex
	last map[types.NamespacedName]written
}

// written is one status write: when, the resourceVersion of the fleet it was computed from,
// and the status it applied.
type written struct {
	at     time.Time
	fromRV string
	status v1.CelldFleetStatus
}

// wait is how long a counters-only write of key must still wait at now; 0 writes now.
func (p *statusPacer) wait(key types.NamespacedName, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.last[key]
	if !ok {
		return 0
	}
	return max(statusPace-now.Sub(w.at), 0)
}

// inFlight reports whether want is what the last write of key applied on top of the very
// read the pass now sees (liveRV): the cache has not delivered that write yet, and writing
// want again would change nothing but cost a request and a watch event for every watcher. A
// write is a new resourceVersion, so a read at fromRV cannot include it; a read at any other
// version is judged against live as usual.
func (p *statusPacer) inFlight(key types.NamespacedName, liveRV string, want v1.CelldFleetStatus) bool {
	if p == nil || liveRV == "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.last[key]
	return ok && w.fromRV == liveRV && equality.Semantic.DeepEqual(ownedStatus(w.status), ownedStatus(want))
}

// wrote records a status write of key at now: want applied on top of the fleet read at fromRV.
func (p *statusPacer) wrote(key types.NamespacedName, now time.Time, fromRV string, want v1.CelldFleetStatus) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]written{}
	}
	p.last[key] = written{at: now, fromRV: fromRV, status: *want.DeepCopy()}
}

// forget drops a fleet that is gone.
func (p *statusPacer) forget(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// countersOnly reports whether want differs from live only in the member counters and in the
// messages of conditions whose status and reason stay the same.
func countersOnly(live, want v1.CelldFleetStatus) bool {
	a, b := ownedStatus(live), ownedStatus(want)
	for _, st := range []*v1.CelldFleetStatus{&a, &b} {
		st.Replicas, st.ObservedReplicas, st.JoiningReplicas, st.TerminatingReplicas, st.ReadyReplicas = 0, 0, 0, 0, 0
		for i := range st.Conditions {
			st.Conditions[i].Message = ""
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}
