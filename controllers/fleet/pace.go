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

// statusPacer remembers when each fleet's status was last written. A nil pacer paces nothing.
type statusPacer struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// wait is how long a counters-only write of key must still wait at now; 0 writes now.
func (p *statusPacer) wait(key types.NamespacedName, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.last[key]
	if !ok {
		return 0
	}
	return max(statusPace-now.Sub(at), 0)
}

// wrote records a status write of key at now.
func (p *statusPacer) wrote(key types.NamespacedName, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]time.Time{}
	}
	p.last[key] = now
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
