package fleet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
)

// memories are everything the reconciler remembers of a fleet between passes, each keyed by
// the fleet: this package's Memory (its capacity observations and its last status write), its
// status metrics, the drift verdicts of its workload, the answers to its workload's creation,
// its children's verdicts and answers, and its cached render; the last five are kept by the
// packages that use them (drift, children), which the preview reconciler shares. A memory
// added to the reconciler is added here, so forget drops it with the others.
func (r *Reconciler) memories() []func(types.NamespacedName) {
	m := []func(types.NamespacedName){
		func(k types.NamespacedName) { r.metrics.forget(k.Namespace, k.Name) },
		r.Drift.Forget, r.Memory.Forget, r.created.Forget,
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

// Memory is what the reconciler keeps of each fleet between passes in this package, in one
// entry per fleet: the capacity policy's latest observation, delivered by the application
// observer's collections, and the trend its last decision returned; and the fleet's last
// status write, which paces the next and recognises a write the cache has not delivered yet.
// An entry belongs to one fleet UID: a fleet re-created under the same name starts afresh.
// Nothing in it is durable: an operator restart restarts the capacity windows, which only
// delays a step (the cooldowns live in the reservation's history), and writes the next status
// at once. A nil Memory remembers nothing: capacity decides nothing (spec.replicas is applied
// as declared) and every status change is written at once.
type Memory struct {
	mu     sync.Mutex
	fleets map[types.NamespacedName]*fleetMemory
	// wake asks for a fleet's pass when a collection arrives, so a decision follows each
	// sample instead of the next resync; nil wakes nothing.
	wake chan event.GenericEvent
	// pace is the shortest time between two status writes of one fleet when the second only
	// moves counters (statusPace); 0 writes every change at once.
	pace time.Duration
}

// fleetMemory is one fleet's entry.
type fleetMemory struct {
	uid types.UID
	// obs is the latest capacity observation, trend what the last capacity decision returned.
	obs   *capacity.Observation
	trend capacity.Trend
	// status is the last status write, nil before the first.
	status *written
}

// written is one status write: when, the resourceVersion of the fleet it was computed from,
// and the status it applied.
type written struct {
	at     time.Time
	fromRV string
	status v1.CelldFleetStatus
}

// NewMemory returns the operator's memory: it paces counters-only status writes and wakes a
// fleet's pass on each capacity collection.
func NewMemory() *Memory {
	return &Memory{wake: make(chan event.GenericEvent, 1024), pace: statusPace}
}

// entry is the fleet's entry for uid; a new UID under the same name starts over. m.mu is held.
func (m *Memory) entry(key types.NamespacedName, uid types.UID) *fleetMemory {
	if m.fleets == nil {
		m.fleets = map[types.NamespacedName]*fleetMemory{}
	}
	e := m.fleets[key]
	if e == nil || e.uid != uid {
		e = &fleetMemory{uid: uid}
		m.fleets[key] = e
	}
	return e
}

// lookup is the fleet's entry for uid, nil when there is none. m.mu is held.
func (m *Memory) lookup(key types.NamespacedName, uid types.UID) *fleetMemory {
	if e := m.fleets[key]; e != nil && e.uid == uid {
		return e
	}
	return nil
}

// Forget drops everything remembered of a fleet: it is gone.
func (m *Memory) Forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.fleets, key)
}

// Observed keeps a fleet's newest capacity observation and wakes its pass. It is the
// application observer's sink.
func (m *Memory) Observed(key types.NamespacedName, uid types.UID, obs *capacity.Observation) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.entry(key, uid).obs = obs
	m.mu.Unlock()
	select {
	case m.wake <- event.GenericEvent{Object: &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
	default: // a full queue already holds passes (or nothing listens); the decision's requeue covers the rest
	}
}

// capacity returns the fleet's latest observation and trend.
func (m *Memory) capacity(key types.NamespacedName, uid types.UID) (*capacity.Observation, capacity.Trend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.lookup(key, uid); e != nil {
		return e.obs, e.trend
	}
	return nil, capacity.Trend{}
}

// keepTrend stores the trend a capacity decision returned.
func (m *Memory) keepTrend(key types.NamespacedName, uid types.UID, t capacity.Trend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(key, uid).trend = t
}

// dropCapacity forgets the fleet's capacity observation and trend (it has no policy now), and
// keeps the rest of its entry.
func (m *Memory) dropCapacity(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.fleets[key]; e != nil {
		e.obs, e.trend = nil, capacity.Trend{}
	}
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
	l := layoutOfObject(desired)
	if l == nil || layoutOfObject(stored) != l {
		return nil
	}
	stored = l.stored(stored)
	r.Drift.Written(key, l.update(stored, desired), stored)
	r.created.Remember(key, l.kind(), stored, r.now())
	return stored
}

// statusPace is the shortest time between two status writes of one fleet when the second only
// moves counters (members joining, terminating, ready) and the wording of unchanged
// conditions. A rollout or a growth changes those at every Pod transition: without the pace,
// a five-member Deployment roll wrote status about twenty times in four seconds. Anything a
// reader acts on (a condition's status or reason, the applied or desired count, the
// reservation, the capacity decision) is written at once.
const statusPace = time.Second

// statusWait is how long a counters-only status write of the fleet must still wait at now; 0
// writes now.
func (m *Memory) statusWait(key types.NamespacedName, uid types.UID, now time.Time) time.Duration {
	if m == nil || m.pace == 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.lookup(key, uid)
	if e == nil || e.status == nil {
		return 0
	}
	return max(m.pace-now.Sub(e.status.at), 0)
}

// statusInFlight reports whether want is what the fleet's last status write applied on top of
// the very read the pass now sees (liveRV): the cache has not delivered that write yet, and
// writing want again would change nothing but cost a request and a watch event for every
// watcher. A write is a new resourceVersion, so a read at fromRV cannot include it; a read at
// any other version is judged against live as usual.
func (m *Memory) statusInFlight(key types.NamespacedName, uid types.UID, liveRV string, want v1.CelldFleetStatus) bool {
	if m == nil || liveRV == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.lookup(key, uid)
	return e != nil && e.status != nil && e.status.fromRV == liveRV && equality.Semantic.DeepEqual(ownedStatus(e.status.status), ownedStatus(want))
}

// statusWritten records a status write of the fleet at now: want applied on top of the fleet
// read at fromRV.
func (m *Memory) statusWritten(key types.NamespacedName, uid types.UID, now time.Time, fromRV string, want v1.CelldFleetStatus) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entry(key, uid).status = &written{at: now, fromRV: fromRV, status: *want.DeepCopy()}
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
