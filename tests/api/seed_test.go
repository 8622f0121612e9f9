package api

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

const seedDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// seededReservation creates a reservation recording a seed of one object.
func seededReservation(t *testing.T, name string) *v1.CelldStorageReservation {
	t.Helper()
	r := &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.CelldStorageReservationSpec{Bucket: "pool-1", Prefix: "p-" + name, InitialReplicas: 1, FleetNamespace: "ns",
			FleetName: "p-" + name, FleetUID: "uid-" + name, SpecHash: "h",
			Seed: &v1.SeedRequest{Executor: "snapshot", Source: "production", Alarms: "Clear",
				SourceFleet: v1.SeedFleetRef{Namespace: "prod", Name: "shop", UID: "u-1"},
				Objects:     []v1.SeedObject{{Class: "Cart", ID: "c-1"}},
				Preview:     v1.SeedPreviewRef{Name: "pr", UID: "p-uid"}}},
	}
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// writeSeed writes status.seed through the status subresource, as the executor or the
// operator does, with the resourceVersion of r.
func writeSeed(r *v1.CelldStorageReservation, seed *v1.SeedResult) error {
	r.Status.Seed = seed
	return k8s.Status().Update(context.Background(), r)
}

func reread(t *testing.T, r *v1.CelldStorageReservation) *v1.CelldStorageReservation {
	t.Helper()
	live := &v1.CelldStorageReservation{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: r.Name}, live); err != nil {
		t.Fatal(err)
	}
	return live
}

func refused(t *testing.T, what string, err error, message, path string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), message) {
		t.Fatalf("%s must be refused with %q, got %v", what, message, err)
	}
	expectCause(t, what, err, nil, message, path)
}

// TestSeedStatusFollowsTheProtocol: the executor's claim, progress and result, and the
// operator's cancellation, are all the status subresource allows; what would let two workers
// run a seed, a cancelled seed succeed, or a final result change is refused with the field.
func TestSeedStatusFollowsTheProtocol(t *testing.T) {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	done := []v1.SeededObject{{Class: "Cart", ID: "c-1", Digest: seedDigest}}

	t.Run("claim, finish", func(t *testing.T) {
		r := seededReservation(t, "s3-seed-happy")
		refused(t, "success without a claim", writeSeed(r, &v1.SeedResult{Phase: v1.SeedSucceeded, Objects: done}), v1.MsgSeedSucceededNeedsRunning, "status.seed.phase")
		r = reread(t, r)
		refused(t, "a claim without a worker", writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning}), v1.MsgSeedRunningNeedsExecutor, "status.seed.executorID")
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1", StartedAt: &now}); err != nil {
			t.Fatalf("the claim: %v", err)
		}
		stale := r.DeepCopy()
		stale.ResourceVersion = "1"
		if err := writeSeed(stale, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-2", StartedAt: &now}); err == nil || !strings.Contains(err.Error(), "modified") {
			t.Fatalf("a second claim from a stale read must conflict, got %v", err)
		}
		r = reread(t, r)
		refused(t, "another worker taking over", writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-2", StartedAt: &now}), v1.MsgSeedExecutorFixed, "status.seed.executorID")
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedSucceeded, ExecutorID: "w-1", StartedAt: &now, CompletedAt: &now, Objects: done}); err != nil {
			t.Fatalf("success after the claim: %v", err)
		}
		r = reread(t, r)
		refused(t, "rewriting a final result", writeSeed(r, &v1.SeedResult{Phase: v1.SeedFailed, ExecutorID: "w-1"}), v1.MsgSeedFinal, "status.seed")
		r = reread(t, r)
		refused(t, "removing the result", writeSeed(r, nil), v1.MsgSeedRetained, "status.seed")
		r = reread(t, r)
		r.Annotations = map[string]string{v1.AnnotationSeedGate: v1.SeedGateOpen}
		if err := k8s.Update(context.Background(), r); err != nil {
			t.Fatalf("opening the gate over a final result: %v", err)
		}
		if live := reread(t, r); live.Status.Seed == nil || live.Status.Seed.Phase != v1.SeedSucceeded {
			t.Fatalf("the result survives the gate write: %+v", live.Status.Seed)
		}
	})

	t.Run("cancel a running seed", func(t *testing.T) {
		r := seededReservation(t, "s3-seed-cancel")
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1"}); err != nil {
			t.Fatal(err)
		}
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1", CancelRequestedAt: &now}); err != nil {
			t.Fatalf("the operator's cancellation request: %v", err)
		}
		r = reread(t, r)
		refused(t, "withdrawing a cancellation", writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1"}), v1.MsgSeedCancelKept, "status.seed.cancelRequestedAt")
		r = reread(t, r)
		refused(t, "success after cancellation", writeSeed(r, &v1.SeedResult{Phase: v1.SeedSucceeded, ExecutorID: "w-1", CancelRequestedAt: &now, Objects: done}), v1.MsgSeedCancelledNoSuccess, "status.seed.phase")
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedCanceled, ExecutorID: "w-1", CancelRequestedAt: &now, CompletedAt: &now}); err != nil {
			t.Fatalf("the executor's acknowledgement: %v", err)
		}
	})

	t.Run("cancel an unclaimed seed", func(t *testing.T) {
		r := seededReservation(t, "s3-seed-unclaimed")
		refused(t, "Canceled without a request", writeSeed(r, &v1.SeedResult{Phase: v1.SeedCanceled}), v1.MsgSeedCanceledNeedsRequest, "status.seed.cancelRequestedAt")
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{CancelRequestedAt: &now}); err != nil {
			t.Fatal(err)
		}
		r = reread(t, r)
		refused(t, "a claim after the cancellation", writeSeed(r, &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: "w-1", CancelRequestedAt: &now}), v1.MsgSeedNoClaimAfterCancel, "status.seed.phase")
		r = reread(t, r)
		if err := writeSeed(r, &v1.SeedResult{Phase: v1.SeedCanceled, CancelRequestedAt: &now, CompletedAt: &now}); err != nil {
			t.Fatalf("the operator records the unclaimed seed Canceled: %v", err)
		}
		r = reread(t, r)
		refused(t, "removing the phase", writeSeed(r, &v1.SeedResult{CancelRequestedAt: &now}), v1.MsgSeedFinal, "status.seed")
	})
}
