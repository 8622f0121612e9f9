package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestANewBlockerStartsANewBlockedPeriod: a fleet resumed from a long pause and then blocked by
// something else has not waited for that other thing since the pause began, so
// status.blockedSince (and the CelldFleetBlocked alert built on it) starts again.
func TestANewBlockerStartsANewBlockedPeriod(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	clock := &capacityClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	r.Now = clock.Now
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "blocked", ns+"-blocked", func(f *v1.CelldFleet) {
		f.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true}
	})
	reconcileOnce(t, r, f)
	live := liveFleet(t, admin, f)
	if c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked); c == nil || c.Reason != v1.ReasonMaintenancePaused || live.Status.BlockedSince == nil {
		t.Fatalf("setup: a paused fleet is Blocked by the pause since now: %+v, since %v", c, live.Status.BlockedSince)
	}
	paused := live.Status.BlockedSince.Time

	// an hour later the pause ends, and the runtime ServiceAccount is gone
	clock.now = clock.now.Add(time.Hour)
	if err := admin.Delete(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "celld-runtime"}}); err != nil {
		t.Fatal(err)
	}
	live.Spec.Maintenance = nil
	if err := admin.Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, f)
	live = liveFleet(t, admin, f)
	if c := meta.FindStatusCondition(live.Status.Conditions, v1.ConditionBlocked); c == nil || c.Reason != v1.ReasonServiceAccountMissing {
		t.Fatalf("the resumed fleet must be Blocked by the missing ServiceAccount: %+v", c)
	}
	if live.Status.BlockedSince == nil || !live.Status.BlockedSince.Time.Equal(clock.now) || live.Status.BlockedSince.Time.Equal(paused) {
		t.Fatalf("a new blocker starts a new period at %s; blockedSince is %v (the pause began at %s)", clock.now, live.Status.BlockedSince, paused)
	}

	// the same blocker a pass later keeps its start
	clock.now = clock.now.Add(time.Minute)
	reconcileOnce(t, r, f)
	if since := liveFleet(t, admin, f).Status.BlockedSince; since == nil || !since.Time.Equal(clock.now.Add(-time.Minute)) {
		t.Fatalf("an unchanged blocker keeps its period's start, got %v", since)
	}
}
