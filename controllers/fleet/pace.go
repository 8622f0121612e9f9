package fleet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

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
