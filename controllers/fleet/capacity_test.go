package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/reservation"
)

// These tests drive the capacity wiring against a real API server: observations go in through
// the observer's sink, and what comes out is the Deployment's replica count, the reservation's
// history and status.capacity. The decision itself is table-tested in controllers/capacity.

// capacityClock is a settable clock for the reconciler.
type capacityClock struct{ now time.Time }

func (c *capacityClock) Now() time.Time { return c.now }

// busy is an observation of every member at cpu millicores, all Ready and freshly sampled.
func busy(f *v1.CelldFleet, members int32, cpu int64, at time.Time) *capacity.Observation {
	obs := &capacity.Observation{At: at, Complete: true}
	for i := range members {
		name := fmt.Sprintf("%s-m%d", f.Name, i)
		obs.Samples = append(obs.Samples, capacity.Sample{Name: name, Identity: name + "/c/0", Ready: true,
			RuntimeAt: at.Add(-time.Second), MetricsAt: at.Add(-2 * time.Second), Window: 10 * time.Second,
			CPUMillicores: cpu, MemoryMiB: 100, CPURequestMillicores: 1000, MemoryRequestMiB: 2048})
	}
	return obs
}

func capacityFleet(t *testing.T, admin client.Client, ns, name string, mode v1.CapacityMode) *v1.CelldFleet {
	t.Helper()
	return createFleet(t, admin, ns, name, ns+"-"+name, func(f *v1.CelldFleet) {
		f.Spec.Profile = v1.ProfileBucket
		f.Spec.Storage.StorageClassName = nil
		f.Spec.Capacity = &v1.CapacityPolicy{Mode: mode, MinReplicas: 3, MaxReplicas: 5, ScaleOutStep: 1,
			SampleIntervalSeconds: 5, MaxAgeSeconds: 20, MinSamples: 2, ScaleOutStabilizationSeconds: 10,
			ScaleOutCooldownSeconds: 30, RedistributionObservationSeconds: 30}
	})
}

// capacityCase is a reconciler on a settable clock and a capacity fleet it has created (two
// passes: the workload exists at spec.replicas).
func capacityCase(t *testing.T, name string, mode v1.CapacityMode) (*Reconciler, client.Client, *capacityClock, *v1.CelldFleet) {
	t.Helper()
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	clock := &capacityClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	r.Now, r.Memory = clock.Now, &Memory{}
	ns := setup(t, admin)
	f := capacityFleet(t, admin, ns, name, mode)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	return r, admin, clock, f
}

func deploymentReplicas(t *testing.T, admin client.Client, f *v1.CelldFleet) int32 {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), d); err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

func liveFleet(t *testing.T, admin client.Client, f *v1.CelldFleet) *v1.CelldFleet {
	t.Helper()
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	return live
}

func history(t *testing.T, admin client.Client, f *v1.CelldFleet) (capacity.History, bool) {
	t.Helper()
	live := liveFleet(t, admin, f)
	res := &v1.CelldStorageReservation{}
	if err := admin.Get(context.Background(), types.NamespacedName{Name: live.Status.Reservation}, res); err != nil {
		t.Fatal(err)
	}
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok {
		return capacity.History{}, false
	}
	var h capacity.History
	if err := json.Unmarshal(reservation.CapacityState(value, live.UID), &h); err != nil {
		t.Fatalf("the reservation's record %q is not this fleet's capacity history: %v", value, err)
	}
	return h, true
}

// sustain feeds a high observation every sample interval for the stabilization window, and
// reconciles after each, as the observer's wake-ups do.
func sustain(t *testing.T, r *Reconciler, clock *capacityClock, f *v1.CelldFleet, members int32) {
	t.Helper()
	live := liveFleet(t, r.Client, f)
	for range 4 {
		clock.now = clock.now.Add(5 * time.Second)
		r.Memory.Observed(client.ObjectKeyFromObject(f), live.UID, busy(f, members, 500, clock.now))
		reconcileOnce(t, r, f)
	}
}

func TestScaleOutAddsAMemberAfterTheWindowAndRecordsTheStep(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	clock := &capacityClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	r.Now, r.Memory = clock.Now, &Memory{}
	var reservationWrites atomic.Int64
	ww, err := client.NewWithWatch(testCfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	r.Direct = interceptor.NewClient(ww, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*v1.CelldStorageReservation); ok {
				reservationWrites.Add(1)
			}
			return c.Update(ctx, obj, opts...)
		}})
	ns := setup(t, admin)
	f := capacityFleet(t, admin, ns, "grow", v1.CapacityScaleOut)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	if n := deploymentReplicas(t, admin, f); n != 3 {
		t.Fatalf("the fleet must start at spec.replicas 3, has %d", n)
	}
	if _, ok := history(t, admin, f); ok {
		t.Fatal("creating the fleet is not a step: no history may be recorded")
	}

	start := clock.now
	reservationWrites.Store(0)
	sustain(t, r, clock, f, 3)
	if n := deploymentReplicas(t, admin, f); n != 4 {
		t.Fatalf("after a sustained high window the ScaleOut policy must add one member (scaleOutStep 1): replicas %d, status %+v",
			n, liveFleet(t, admin, f).Status.Capacity)
	}
	h, ok := history(t, admin, f)
	if !ok || !h.LastScaleOut.After(start) || h.LastScaleOut.After(clock.now) || h.Baseline == nil || h.Baseline.From != 3 || h.Baseline.To != 4 {
		t.Fatalf("the step must be recorded on the reservation once taken, with its baseline: %+v (present %t)", h, ok)
	}
	if n := reservationWrites.Load(); n != 1 {
		t.Fatalf("one step taken must cost exactly one reservation write, got %d", n)
	}
	live := liveFleet(t, admin, f)
	if live.Spec.Replicas != nil && *live.Spec.Replicas != 3 {
		t.Fatalf("the operator must never write spec.replicas, it is %d", *live.Spec.Replicas)
	}
	if live.Status.Capacity == nil || live.Status.Capacity.Mode != v1.CapacityScaleOut {
		t.Fatalf("status.capacity must report the policy: %+v", live.Status.Capacity)
	}

	// The cooldown holds the next addition, and survives a restart of the operator's memory.
	r.Memory = &Memory{}
	sustain(t, r, clock, f, 4)
	if n := deploymentReplicas(t, admin, f); n != 4 {
		t.Fatalf("inside scaleOutCooldownSeconds no member may be added: replicas %d", n)
	}
	if c := liveFleet(t, admin, f).Status.Capacity; c == nil || c.Reason != capacity.ReasonObservingRedistribution && c.Reason != capacity.ReasonRateLimited {
		t.Fatalf("the decision must say why it waits (redistribution or cooldown): %+v", c)
	}

	// Past the cooldown, with the newcomer busy too, the second step goes, is recorded once,
	// and the fleet stops at maxReplicas 5.
	reservationWrites.Store(0)
	for range 4 {
		sustain(t, r, clock, f, 4)
	}
	if n := deploymentReplicas(t, admin, f); n != 5 {
		t.Fatalf("after the cooldown a second member must be added: replicas %d, status %+v", n, liveFleet(t, admin, f).Status.Capacity)
	}
	second, _ := history(t, admin, f)
	if !second.LastScaleOut.After(h.LastScaleOut.Add(29*time.Second)) || second.Baseline == nil || second.Baseline.From != 4 {
		t.Fatalf("the second step must be recorded after the first's cooldown: first %s, second %+v", h.LastScaleOut, second)
	}
	if n := reservationWrites.Load(); n != 1 {
		t.Fatalf("the second step must cost exactly one reservation write, got %d", n)
	}
	sustain(t, r, clock, f, 5)
	if n := deploymentReplicas(t, admin, f); n != 5 {
		t.Fatalf("never above maxReplicas 5: replicas %d", n)
	}
	if c := liveFleet(t, admin, f).Status.Capacity; c == nil || c.Reason != capacity.ReasonAtMaximum {
		t.Fatalf("at maxReplicas under load the decision says AtMaximum: %+v", c)
	}
}

func TestShadowRecommendsAndChangesNothing(t *testing.T) {
	r, admin, clock, f := capacityCase(t, "shadow", v1.CapacityShadow)
	sustain(t, r, clock, f, 3)
	if n := deploymentReplicas(t, admin, f); n != 3 {
		t.Fatalf("Shadow must never act, replicas %d", n)
	}
	c := liveFleet(t, admin, f).Status.Capacity
	if c == nil || c.Reason != capacity.ReasonScaleOutRecommended || c.DesiredReplicas != 4 || c.CoveredReplicas != 3 {
		t.Fatalf("Shadow must recommend 4 members with every member covered: %+v", c)
	}
	if live := liveFleet(t, admin, f); live.Status.DesiredReplicas != 3 {
		t.Fatalf("in Shadow status.desiredReplicas stays spec.replicas, got %d", live.Status.DesiredReplicas)
	}
	if _, ok := history(t, admin, f); ok {
		t.Fatal("no step was taken: nothing may be recorded")
	}
}

func TestPausedFleetMakesNoCapacityDecision(t *testing.T) {
	r, admin, clock, f := capacityCase(t, "frozen", v1.CapacityScaleOut)
	live := liveFleet(t, admin, f)
	live.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true}
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	before := liveFleet(t, admin, f).Status.Capacity
	sustain(t, r, clock, f, 3)
	if n := deploymentReplicas(t, admin, f); n != 3 {
		t.Fatalf("a paused fleet must not be scaled by its policy, replicas %d", n)
	}
	if after := liveFleet(t, admin, f).Status.Capacity; before == nil || after == nil || after.Reason != before.Reason {
		t.Fatalf("pause freezes the decision: status.capacity went from %+v to %+v", before, after)
	}
}

func TestRemovingThePolicyRemovesItsRecord(t *testing.T) {
	r, admin, clock, f := capacityCase(t, "drop", v1.CapacityScaleOut)
	sustain(t, r, clock, f, 3)
	if _, ok := history(t, admin, f); !ok {
		t.Fatal("setup: the policy's step must have been recorded")
	}
	live := liveFleet(t, admin, f)
	live.Spec.Capacity = nil
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, f)
	if _, ok := history(t, admin, f); ok {
		t.Fatal("a fleet without spec.capacity must have no current-operation record")
	}
	if c := liveFleet(t, admin, f).Status.Capacity; c != nil {
		t.Fatalf("status.capacity must go with the policy: %+v", c)
	}
	if d := liveFleet(t, admin, f).Status.DesiredReplicas; d != 3 {
		t.Fatalf("without a policy the fleet heads back to spec.replicas 3 (one member per step, once rolled out), desired %d", d)
	}
}
