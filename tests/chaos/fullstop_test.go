package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
	"github.com/celld/celld-operator/tests/chaos/schedule"
)

// The full stop (docs/lifecycle.md): pause the fleet, scale its workload to zero by hand once
// the pause is in force, then unpause with a new runtime image in the same change. Members
// leaving on the stop are not down (the workload's count is zero: invariant a judges members
// against it). Invariant g: once the fleet is unpaused, the operator's first write of the
// workload's count brings every member back at the declared count in one step; for a
// PersistentFleet, the first growth run (every member with a kept claim returns on it at
// once; a member without one waits for the scheduler to place those, as any fresh disk must).

// fullStartBound: the operator writes the workload's count within this of the unpause, even
// across a leader handoff (lease 15 s + retry) on a loaded machine.
const fullStartBound = time.Minute

// pauseObservedBound: the fleet reports the pause for its generation within this, even across
// a leader handoff, before the stop scales the workload by hand.
const pauseObservedBound = time.Minute

// claimView is what the monitors know of one claim.
type claimView struct {
	owner       string // its fleet-uid label
	terminating bool
}

// fullStopView is one full stop of a fleet, as the campaign journals it.
type fullStopView struct {
	stoppedAt time.Time // the workload was scaled to zero
	startedAt time.Time // the unpause was sent; zero while stopped
}

// noteFullStop journals that ns's fleet is about to be scaled to zero by hand.
func (m *monitor) noteFullStop(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fleets[ns]; f != nil {
		f.stop = &fullStopView{stoppedAt: time.Now()}
	}
}

// noteFullStart journals that ns's stopped fleet is about to be unpaused.
func (m *monitor) noteFullStart(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fleets[ns]; f != nil && f.stop != nil {
		f.stop.startedAt = time.Now()
	}
}

// returnCount is the count the operator's first write after a full start must carry: the
// declared count, or for a PersistentFleet the first growth run toward it (ordinals from 0 that
// all have a kept claim, or all have none). Caller holds mu.
func (f *fleetView) returnCount() int {
	if !f.persistent() || f.declared <= 1 {
		return f.declared
	}
	kept := func(i int) bool {
		c, ok := f.claims[fmt.Sprintf("data-%s-%d", f.name, i)]
		return ok && c.owner == f.uid && !c.terminating
	}
	end := 1
	for end < f.declared && kept(end) == kept(0) {
		end++
	}
	return end
}

// persistent: the fleet's members have claims (only the PersistentFleet's do).
func (f *fleetView) persistent() bool {
	for _, c := range f.claims {
		if c.owner == f.uid {
			return true
		}
	}
	return false
}

// judgeFullStart is invariant g on one write of the fleet's workload count. Caller holds mu.
func (m *monitor) judgeFullStart(f *fleetView, w writeRecord) {
	// startedAt is set before the unpause is sent, and the operator writes no count while
	// paused (rule c), so every count write after it follows the unpause, whatever the
	// monitor's fleet watch has delivered yet.
	if f.stop == nil || f.stop.startedAt.IsZero() || w.At.Before(f.stop.startedAt) {
		return
	}
	m.checks[ruleFullStop]++
	want := f.returnCount()
	if int(*w.Replicas) != want {
		m.violate(ruleFullStop, "after the full start of %s/%s the operator's first write of the workload's count set %d, not %d (declared %d): %s %s",
			f.ns, f.name, *w.Replicas, want, f.declared, w.Method, w.Path)
		return
	}
	f.stop = nil
}

// judgeFullStartDue fails a full start the operator did not act on within fullStartBound.
// Caller holds mu.
func (m *monitor) judgeFullStartDue(f *fleetView, now time.Time) {
	if f.stop == nil || f.stop.startedAt.IsZero() || f.deleting {
		return
	}
	if now.Sub(f.stop.startedAt) > fullStartBound {
		m.violate(ruleFullStop, "fleet %s/%s was unpaused after a full stop %s ago and the operator has not written its workload's count",
			f.ns, f.name, now.Sub(f.stop.startedAt).Round(time.Second))
	}
}

// fullStop pauses the fleet and, once the fleet reports the pause for its generation, scales
// its workload to zero through the scale subresource, as `kubectl scale` does. The waiting
// runs beside the storm; the full start waits for it.
func (c *campaign) fullStop(ctx context.Context, a schedule.Action, f *campaignFleet) string {
	fl := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.spec.Name}}
	if err := c.cl.Patch(ctx, fl, clientRawMerge(`{"spec":{"maintenance":{"paused":true}}}`)); err != nil {
		return errText(err)
	}
	c.mon.setPaused(f.ns, true)
	done := make(chan struct{})
	c.stops[a.Seq] = done
	go func() {
		defer close(done)
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, pauseObservedBound, true, func(ctx context.Context) (bool, error) {
			got := &v1.CelldFleet{}
			if err := c.cl.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: f.spec.Name}, got); err != nil {
				return false, nil // the API server may be restarting; the bound decides
			}
			return got.Status.ObservedGeneration >= fl.Generation && meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionMaintenancePaused), nil
		})
		if err != nil {
			c.logf("full-stop %s/%s: the pause was not reported within %s (%v); the workload is left running", f.ns, f.spec.Name, pauseObservedBound, err)
			return
		}
		c.mon.noteFullStop(f.ns)
		patch := []byte(`{"spec":{"replicas":0}}`)
		var perr error
		if f.layout == "Bucket/Deployment" {
			_, perr = c.cs.AppsV1().Deployments(f.ns).Patch(ctx, f.spec.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
		} else {
			_, perr = c.cs.AppsV1().StatefulSets(f.ns).Patch(ctx, f.spec.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
		}
		c.logf("full-stop %s/%s: paused, workload scaled to 0 by hand: %s", f.ns, f.spec.Name, errText(perr))
	}()
	return "paused; the workload goes to 0 once the fleet reports the pause"
}

// fullStart unpauses a stopped fleet with a new runtime image in the same change, once the
// stop's scaling is done.
func (c *campaign) fullStart(ctx context.Context, a schedule.Action, f *campaignFleet) string {
	if done := c.stops[a.Closes]; done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return "stopped"
		}
		delete(c.stops, a.Closes)
	}
	image := corpus.Image[:strings.Index(corpus.Image, "@sha256:")] + "@sha256:" + a.Value
	c.mon.noteFullStart(f.ns)
	c.mon.setPaused(f.ns, false)
	fl := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.spec.Name}}
	return errText(c.cl.Patch(ctx, fl, clientRawMerge(fmt.Sprintf(`{"spec":{"maintenance":{"paused":false},"runtimeImage":%q}}`, image))))
}

func TestAFullStartMustReturnEveryMemberAtTheDeclaredCountInOneWrite(t *testing.T) {
	write := func(n int32) writeRecord {
		return writeRecord{Method: "PATCH", Namespace: "ns", Resource: "statefulsets", Name: "pf", Kind: "StatefulSet",
			Labels: map[string]string{v1.LabelFleetUID: "u1"}, Replicas: &n, At: time.Now()}
	}
	started := func(claims ...int) *monitor {
		m := watchedFleet(false, 0)
		f := m.fleets["ns"]
		f.declared = 3
		for _, i := range claims {
			f.claims[fmt.Sprintf("data-pf-%d", i)] = claimView{owner: "u1"}
		}
		m.noteFullStop("ns")
		m.noteFullStart("ns")
		return m
	}
	m := started(0, 1, 2)
	m.onWrite(write(1))
	if !strings.Contains(m.Violation(), ruleFullStop) {
		t.Fatalf("a return one member at a time while every member kept its claim must fail rule g, got %q", m.Violation())
	}
	m = started(0, 1, 2)
	m.onWrite(write(3))
	m.onWrite(write(2)) // a later scale-in is not the return
	if m.Violation() != "" {
		t.Fatalf("a return at the declared count passes, and only the first write is judged: %s", m.Violation())
	}
	m = started(0, 2)
	m.onWrite(write(1))
	if m.Violation() != "" {
		t.Fatalf("a member without its claim waits for the kept run before it: %s", m.Violation())
	}
	m = started(0, 1, 2)
	m.mu.Lock()
	m.fleets["ns"].stop.startedAt = time.Now().Add(-fullStartBound - time.Second)
	m.judgeFullStartDue(m.fleets["ns"], time.Now())
	m.mu.Unlock()
	if !strings.Contains(m.Violation(), "has not written its workload's count") {
		t.Fatalf("a full start the operator ignores must fail rule g, got %q", m.Violation())
	}
	m = watchedFleet(false, 0)
	m.fleets["ns"].declared = 3
	m.onWrite(write(1))
	if m.Violation() != "" {
		t.Fatalf("without a full stop a count write is not judged by rule g: %s", m.Violation())
	}
}
