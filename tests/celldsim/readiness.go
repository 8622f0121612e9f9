package celldsim

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// defaultFailureThreshold is the kubelet's failureThreshold of a probe that sets none.
const defaultFailureThreshold = 3

// failureThreshold is the readinessProbe.failureThreshold of the pod's celld container: how many
// consecutive failed probes turn a Ready pod not Ready, as the kubelet counts them. The
// simulator probes faster than the pod's periodSeconds (Options.ProbePeriod) but keeps the
// count, so one slow answer does not take a member out of service.
func failureThreshold(p *corev1.Pod) int {
	var probe *corev1.Probe
	for i, c := range p.Spec.Containers {
		if i == 0 || c.Name == ContainerName {
			probe = c.ReadinessProbe
		}
	}
	if probe == nil || probe.FailureThreshold <= 0 {
		return defaultFailureThreshold
	}
	return int(probe.FailureThreshold)
}

// stallGap is how late the simulator's heartbeat may be before the simulator itself counts as
// stalled (its process starved of CPU): well above scheduling noise, well below the probe's
// 1 s timeout.
const (
	heartbeat = 50 * time.Millisecond
	stallGap  = 250 * time.Millisecond
)

// stallWatch notices when the simulator's own process stops running for a while. The probes
// run in this process, not on the member's node: a probe that times out while this process
// was not scheduled says nothing about the member, and a kubelet on the node would have had
// its answer. Such a probe is inconclusive.
type stallWatch struct {
	mu       sync.Mutex
	last     time.Time // the last heartbeat; zero while no heartbeat runs
	stallEnd time.Time // the end of the last stall seen
}

func (w *stallWatch) run(ctx context.Context) {
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	w.beat(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.beat(time.Now())
		}
	}
}

func (w *stallWatch) beat(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.last.IsZero() && now.Sub(w.last) > stallGap {
		w.stallEnd = now
	}
	w.last = now
}

// stalledSince reports whether the simulator stalled between start and now, or is stalled at
// now (its heartbeat is overdue).
func (w *stallWatch) stalledSince(start, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last.IsZero() {
		return false
	}
	return w.stallEnd.After(start) || now.Sub(w.last) > stallGap
}

// probed records the answer of a readiness probe of p that started at start. A success makes
// the member Ready; failureThreshold consecutive failures make it not Ready; a failure while
// the simulator itself stalled counts for nothing; a probe of an incarnation that is gone is
// ignored (the next one starts not Ready).
func (m *member) probed(p *proc, ok bool, start time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case p == nil || m.proc != p:
	case ok:
		m.probeOK, m.probeFails = true, 0
	case m.s.stalls.stalledSince(start, time.Now()):
	default:
		m.probeFails++
		if m.probeFails >= failureThreshold(m.pod) {
			m.probeOK = false
		}
	}
}
