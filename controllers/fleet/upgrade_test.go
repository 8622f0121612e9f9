package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// eventLog records the reasons of the events a reconcile emits.
type eventLog struct {
	mu      sync.Mutex
	reasons []string
	notes   []string
}

func (e *eventLog) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, note string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reasons = append(e.reasons, reason)
	if len(args) > 0 {
		if s, ok := args[0].(string); ok {
			note = s
		}
	}
	e.notes = append(e.notes, note)
}

// TestAnEarlierReleasesRecordsAreSuperseded: a fleet an earlier release (v0.0.5's strict
// executor) left behind loses its removed conditions, its reservation's operation record
// keeps only capacity state (none here, so it goes), and the in-flight operation is reported
// as superseded, once.
func TestAnEarlierReleasesRecordsAreSuperseded(t *testing.T) {
	ctx := context.Background()
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	events := &eventLog{}
	r.Recorder = events
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "legacy", ns+"-legacy", nil)

	// What v0.0.5 left: its conditions in status and its operation journal on the reservation.
	live := &v1.CelldFleet{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	for _, c := range []string{"LifecycleBlocked", "ProductionQualified", "DiskCleanupPending"} {
		live.Status.Conditions = append(live.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionFalse, Reason: "Earlier", Message: "written by v0.0.5", LastTransitionTime: now})
	}
	if err := admin.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	res := reservation.Desired(live)
	res.Annotations = map[string]string{v1.AnnotationCurrentOperation: `{"operation":{"kind":"RollingRestart","id":"op-7","phase":"Draining"},"claims":{"data-legacy-0":"uid-a"}}`}
	if err := admin.Create(ctx, res); err != nil {
		t.Fatal(err)
	}

	reconcileOnce(t, r, f)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	for _, c := range live.Status.Conditions {
		switch c.Type {
		case "LifecycleBlocked", "ProductionQualified", "DiskCleanupPending":
			t.Errorf("the removed condition %s is still in status", c.Type)
		}
	}
	if b := blocked(t, admin, f); b.Status != metav1.ConditionFalse {
		t.Fatalf("the adopted fleet must not be blocked: %s %s", b.Reason, b.Message)
	}
	got := &v1.CelldStorageReservation{}
	if err := admin.Get(ctx, types.NamespacedName{Name: res.Name}, got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Annotations[v1.AnnotationCurrentOperation]; ok {
		t.Fatalf("a record without capacity state must be removed, still %s", v)
	}
	superseded := 0
	for i, reason := range events.reasons {
		if reason == v1.EventOperationSuperseded {
			superseded++
			if want := "Dropped RollingRestart operation op-7 recorded by an earlier release; members roll onto the current template instead"; events.notes[i] != want {
				t.Errorf("event message %q, want %q", events.notes[i], want)
			}
		}
	}
	if superseded != 1 {
		t.Fatalf("want one OperationSuperseded event, got %d (%v)", superseded, events.reasons)
	}

	reconcileOnce(t, r, f)
	n := 0
	for _, reason := range events.reasons {
		if reason == v1.EventOperationSuperseded {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the operation is superseded once; a second reconcile reported it again (%d)", n)
	}
}
