package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestAFinishedHandoffIsToldEvenIfThePassThatCommittedItStopped: the fault campaign (seed 3)
// killed the leader after it deleted a replaced member's claim and before its pass reported:
// the replacement's event was never sent. The hold records the event, and the pass that
// finishes a committed hold sends it.
func TestAFinishedHandoffIsToldEvenIfThePassThatCommittedItStopped(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	recorder := events.NewFakeRecorder(16)
	r.Recorder = recorder
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "resume", ns+"-resume", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	live := &v1.CelldFleet{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(intent{FleetUID: live.UID, ClaimUID: "gone", ClaimName: "data-resume-0", ClaimResourceVersion: "1",
		Committed: true, Event: v1.EventMemberDiskLost, Message: "Replacing member resume-0: its volume no longer exists"})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "resume-0",
		Labels:      map[string]string{v1.LabelFleetUID: string(live.UID), v1.LabelReplacementFleet: string(live.UID)},
		Annotations: map[string]string{v1.AnnotationReplacementClaim: string(in)},
		Finalizers:  []string{v1.FinalizerReplacingDisk}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: "celld"}}}}
	if err := admin.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}

	reconcileOnce(t, r, f)

	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, v1.EventMemberDiskLost) || !strings.Contains(e, "finished by a later pass") {
			t.Fatalf("the finishing pass must tell the recorded replacement, got %q", e)
		}
	default:
		t.Fatal("a committed handoff finished by a later pass sent no event: the replacement would go untold")
	}
	held := &corev1.Pod{}
	if err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), held); err != nil {
		t.Fatal(err)
	}
	if len(held.Finalizers) != 0 {
		t.Fatalf("the finished handoff must release its hold, finalizers %v", held.Finalizers)
	}
}

// The pass that deleted a held Pod can stop before it marks the hold committed (the chaos
// campaign's kill between a replacement's Pod delete and its answer). If that Pod was never
// scheduled (its volume was lost, so no node can take it), the pod garbage collector marks it
// Failed before it deletes it; the hold's finalizer keeps it, and a later pass must still find
// it and release the hold, or the member's name stays taken by a Pod that never goes.
func TestAHoldOnAPodMarkedFailedWhileTerminatingIsReleasedByTheNextPass(t *testing.T) {
	var writes atomic.Int64
	r, admin := newReconciler(t, testOptions(), &writes)
	ns := setup(t, admin)
	f := createFleet(t, admin, ns, "failed", ns+"-failed", nil)
	reconcileOnce(t, r, f)
	reconcileOnce(t, r, f)
	live := &v1.CelldFleet{}
	ctx := context.Background()
	if err := admin.Get(ctx, client.ObjectKeyFromObject(f), live); err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(intent{FleetUID: live.UID, ClaimUID: "kept", ClaimName: "data-failed-1", ClaimResourceVersion: "1",
		Event: v1.EventMemberDiskLost, Message: "Replacing member failed-1: its volume no longer exists"})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "failed-1",
		Labels:      map[string]string{v1.LabelFleetUID: string(live.UID), v1.LabelReplacementFleet: string(live.UID)},
		Annotations: map[string]string{v1.AnnotationReplacementClaim: string(in)},
		Finalizers:  []string{v1.FinalizerReplacingDisk}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld", Image: "celld"}}}}
	if err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, pod); err != nil { // the held Pod's delete, whose answer was lost
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodFailed // as the pod garbage collector marks an unscheduled terminating Pod
	if err := admin.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	reconcileOnce(t, r, f)

	held := &corev1.Pod{}
	err = admin.Get(ctx, client.ObjectKeyFromObject(pod), held)
	if err == nil && controllerutil.ContainsFinalizer(held, v1.FinalizerReplacingDisk) {
		t.Fatalf("a held Pod in phase Failed keeps the replacement finalizer after the next pass: the member's Pod never goes (finalizers %v)", held.Finalizers)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
