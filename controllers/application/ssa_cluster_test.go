package application

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/fleet"
)

// applyLifecycle writes a lifecycle status through the fleet reconciler's own ApplyStatus,
// with every lifecycle condition set and a message naming the round.
func applyLifecycle(ctx context.Context, c client.Client, f *v1.CelldFleet, i int) error {
	st := &v1.CelldFleetStatus{ObservedGeneration: f.Generation, ReadyReplicas: int32(i % 100), DesiredReplicas: 3,
		LabelSelector: v1.LabelFleetUID + "=" + string(f.UID), ReplicaObservationValid: true}
	for _, t := range fleet.LifecycleConditions {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: v1.ReasonProvisioned,
			Message: fmt.Sprintf("lifecycle write %d", i), ObservedGeneration: f.Generation, LastTransitionTime: metav1.Now()})
	}
	return fleet.ApplyStatus(ctx, c, f, st)
}

// TestObserverAndReconcilerStatusWritersNeverClobberEachOther applies the reconciler's
// lifecycle status and the observer's status concurrently, many times, on a real API server:
// each writer's last values must survive the other's writes, and each manager must own only
// its own fields.
func TestObserverAndReconcilerStatusWritersNeverClobberEachOther(t *testing.T) {
	const rounds = 60
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetNow(t, c, bucketFleet(t, c, ns, v1.BucketWorkloadOrdered))
	o := observer(c, &fakeReader{})

	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	wg.Go(func() {
		for i := range rounds {
			errs <- applyLifecycle(t.Context(), c, f, i)
		}
	})
	wg.Go(func() {
		for i := range rounds {
			r := Aggregate(facts(int32(i%100), node("f-0")))
			r.Generation = f.Generation
			errs <- o.publish(t.Context(), f, r)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a status apply failed: %v", err)
		}
	}

	live := fleetNow(t, c, f)
	for _, typ := range fleet.LifecycleConditions {
		cond := meta.FindStatusCondition(live.Status.Conditions, typ)
		if cond == nil || cond.Message != fmt.Sprintf("lifecycle write %d", rounds-1) {
			t.Errorf("lifecycle condition %s = %+v, want the reconciler's last write intact", typ, cond)
		}
	}
	if live.Status.ReadyReplicas != (rounds-1)%100 || live.Status.LabelSelector == "" {
		t.Errorf("readyReplicas %d labelSelector %q, want the reconciler's last write", live.Status.ReadyReplicas, live.Status.LabelSelector)
	}
	app := live.Status.Application
	cond := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionApplicationConverged)
	if app == nil || app.ExpectedNodes != (rounds-1)%100 || cond == nil || cond.Message != Message {
		t.Fatalf("application %+v condition %+v, want the observer's last write intact", app, cond)
	}
	if len(live.Status.Conditions) != len(fleet.LifecycleConditions)+1 {
		t.Errorf("%d conditions, want the 6 lifecycle ones and ApplicationConverged", len(live.Status.Conditions))
	}

	owned := map[string]string{}
	for _, mf := range live.ManagedFields {
		if mf.Subresource == "status" && mf.FieldsV1 != nil {
			owned[mf.Manager] = mf.FieldsV1.GetRawString()
		}
	}
	obs, rec := owned[FieldManager], owned[fleet.FieldOwner]
	if !strings.Contains(obs, `"f:application"`) || !strings.Contains(obs, `k:{\"type\":\"ApplicationConverged\"}`) {
		t.Errorf("the observer's manager owns %s, want status.application and ApplicationConverged", obs)
	}
	if strings.Contains(obs, `k:{\"type\":\"Ready\"}`) || strings.Contains(obs, `"f:readyReplicas"`) {
		t.Errorf("the observer's manager owns lifecycle fields: %s", obs)
	}
	if strings.Contains(rec, `"f:application"`) || strings.Contains(rec, "ApplicationConverged") {
		t.Errorf("the reconciler's manager owns observer fields: %s", rec)
	}
}

// TestAnObservationIsNeverWrittenToAFleetRecreatedUnderTheSameName: the apply carries the UID
// it observed.
func TestAnObservationIsNeverWrittenToAFleetRecreatedUnderTheSameName(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	old := fleetNow(t, c, bucketFleet(t, c, ns, v1.BucketWorkloadOrdered))
	if err := c.Delete(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	// no finalizer without a reconciler: the fleet is gone at once; poll with a deadline anyway
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(old), &v1.CelldFleet{})), nil
	})
	if err != nil {
		t.Fatal("the deleted fleet did not go away")
	}
	bucketFleet(t, c, ns, v1.BucketWorkloadOrdered)
	r := Aggregate(facts(1, node("f-0")))
	if err := observer(c, &fakeReader{}).publish(t.Context(), old, r); err != nil {
		t.Fatalf("publishing for a fleet that is gone: %v, want nothing to do", err)
	}
	if fleetNow(t, c, old).Status.Application != nil {
		t.Fatal("the recreated fleet carries the deleted fleet's observation")
	}
}
