// Package seedexecutor is a small seed executor for the local cluster: it proves the whole
// preview-seeding path (docs/preview-seeding.md) without a runtime snapshot service. It follows
// the executor's side of the protocol on CelldStorageReservations (claim with the read's
// resourceVersion, check the target and the source, publish a manifest, honour cancellation)
// but copies nothing: each object's digest is derived from the source fleet UID, class and ID.
//
// Object IDs steer it, so tests can drive every outcome:
//   - "fail-…": the seed fails (as when the source cannot be read);
//   - "hold-…": the seed stays Running until the operator requests cancellation, then is
//     acknowledged Canceled;
//   - "stuck-…": the seed stays Running and never acknowledges anything (an executor that died
//     holding the claim);
//   - anything else is copied at once.
//
// It is not part of the operator and is never shipped.
package seedexecutor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Executor runs the seeds addressed to Name.
type Executor struct {
	Client client.Client
	// Name is the executor name parents authorize (spec.previews.seeding.executor).
	Name string
	// Worker is this process's executorID.
	Worker string
	// Period is how often the reservations are examined.
	Period time.Duration
	// Log receives one line per action; nil discards them.
	Log func(format string, args ...any)
}

// Run examines the reservations every Period until ctx ends.
func (e *Executor) Run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := e.Step(ctx); err != nil {
			e.logf("seed executor %s: %v", e.Name, err)
		}
	}, e.Period)
}

// Step takes the next step of every seed addressed to this executor. A conflict means the
// reservation changed since it was read (the operator cancelled or opened the gate); the next
// step decides again from a fresh read.
func (e *Executor) Step(ctx context.Context) error {
	list := &v1.CelldStorageReservationList{}
	if err := e.Client.List(ctx, list); err != nil {
		return err
	}
	for i := range list.Items {
		res := &list.Items[i]
		if res.Spec.Seed == nil || res.Spec.Seed.Executor != e.Name || res.Annotations[v1.AnnotationSeedGate] != "" {
			continue
		}
		if err := e.advance(ctx, res); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("reservation %s: %w", res.Name, err)
		}
	}
	return nil
}

func (e *Executor) advance(ctx context.Context, res *v1.CelldStorageReservation) error {
	got := res.Status.Seed
	switch {
	case got == nil || got.Phase == "":
		if got != nil && got.CancelRequestedAt != nil {
			return nil // the operator cancels an unclaimed seed itself
		}
		return e.claim(ctx, res)
	case got.Phase != v1.SeedRunning || got.ExecutorID != e.Worker:
		return nil // final, or another worker's
	case marked(res.Spec.Seed, "stuck-"):
		return nil
	case got.CancelRequestedAt != nil:
		return e.finish(ctx, res, v1.SeedCanceled, "cancellation acknowledged; nothing more is written to the prefix", nil)
	case marked(res.Spec.Seed, "hold-"):
		return nil
	case marked(res.Spec.Seed, "fail-"):
		return e.finish(ctx, res, v1.SeedFailed, "an object could not be read from the source", nil)
	}
	return e.finish(ctx, res, v1.SeedSucceeded, fmt.Sprintf("copied %d objects", len(res.Spec.Seed.Objects)), manifest(res.Spec.Seed))
}

// claim checks the target fleet and the source before any I/O, then claims the seed with the
// read's resourceVersion. A target or source that is not what the request names fails the
// seed.
func (e *Executor) claim(ctx context.Context, res *v1.CelldStorageReservation) error {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	res.Status.Seed = &v1.SeedResult{Phase: v1.SeedRunning, ExecutorID: e.Worker, StartedAt: &now, Message: "copying"}
	if err := e.Client.Status().Update(ctx, res); err != nil {
		return err
	}
	e.logf("seed executor %s claimed %s for fleet %s/%s", e.Name, res.Name, res.Spec.FleetNamespace, res.Spec.FleetName)
	if why := e.check(ctx, res); why != "" {
		return e.finish(ctx, res, v1.SeedFailed, why, nil)
	}
	return nil
}

// check is why the seed must not run, or "".
func (e *Executor) check(ctx context.Context, res *v1.CelldStorageReservation) string {
	s := &res.Spec
	target := &v1.CelldFleet{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: s.FleetNamespace, Name: s.FleetName}, target); err != nil {
		return fmt.Sprintf("target fleet %s/%s: %v", s.FleetNamespace, s.FleetName, err)
	}
	if string(target.UID) != s.FleetUID || target.DeletionTimestamp != nil {
		return fmt.Sprintf("target fleet %s/%s is not the reservation's (UID %s) or is being deleted", s.FleetNamespace, s.FleetName, s.FleetUID)
	}
	src := s.Seed.SourceFleet
	source := &v1.CelldFleet{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: src.Name}, source); err != nil || string(source.UID) != src.UID {
		return fmt.Sprintf("source fleet %s/%s (UID %s) is gone or was recreated", src.Namespace, src.Name, src.UID)
	}
	return ""
}

func (e *Executor) finish(ctx context.Context, res *v1.CelldStorageReservation, phase v1.SeedPhase, msg string, objects []v1.SeededObject) error {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	seed := res.Status.Seed.DeepCopy()
	seed.Phase, seed.Message, seed.CompletedAt, seed.Objects = phase, msg, &now, objects
	res.Status.Seed = seed
	if err := e.Client.Status().Update(ctx, res); err != nil {
		return err
	}
	e.logf("seed executor %s: %s %s (%s)", e.Name, res.Name, phase, msg)
	return nil
}

func (e *Executor) logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(format, args...)
	}
}

func marked(req *v1.SeedRequest, prefix string) bool {
	for _, o := range req.Objects {
		if strings.HasPrefix(o.ID, prefix) {
			return true
		}
	}
	return false
}

// manifest lists every requested object once, with a digest standing for its copied state.
func manifest(req *v1.SeedRequest) []v1.SeededObject {
	out := make([]v1.SeededObject, 0, len(req.Objects))
	for _, o := range req.Objects {
		sum := sha256.Sum256([]byte(req.SourceFleet.UID + "\x00" + o.Class + "\x00" + o.ID))
		out = append(out, v1.SeededObject{Class: o.Class, ID: o.ID, Digest: hex.EncodeToString(sum[:])})
	}
	return out
}
