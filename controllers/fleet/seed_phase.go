package fleet

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/reservation"
)

// seedGate holds a seeded preview fleet before anything of it exists: no Service, policy,
// route or member is created until the executor the request names reports success on the
// fleet's reservation and its manifest matches the request. The operator then opens the gate
// (annotation seed-gate Open) with an Update carrying the pass's read of the reservation, so
// it never opens a gate a cancellation closed meanwhile; from then on the fleet is an
// ordinary fleet. A seed that failed, was cancelled or cannot be verified blocks the fleet for
// good (SeedReservationBlocked): a prefix is never seeded twice. res is the reservation the
// pass verified as the fleet's.
func (r *Reconciler) seedGate(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (bool, error) {
	g := reservation.GateOf(res, s.fleet.Spec.Storage.Seed)
	switch g.State {
	case reservation.SeedStart:
		return false, nil
	case reservation.SeedWait:
		s.find.Seed = &lifecycle.Verdict{Reason: v1.ReasonSeedInitializing, Message: g.Message}
		return true, nil
	case reservation.SeedRefused:
		s.find.Block(v1.ReasonSeedReservationBlocked, g.Message)
		return true, nil
	}
	open := res.DeepCopy()
	if open.Annotations == nil {
		open.Annotations = map[string]string{}
	}
	open.Annotations[v1.AnnotationSeedGate] = v1.SeedGateOpen
	w := write{verb: "open seed gate", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationSeedGate, why: g.Message}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, open) })); err != nil {
		return true, err
	}
	return false, nil
}

// seedCancelAttempts bounds how often the seed's cancellation is decided again on the API
// server's copy of the reservation after a write of it met a conflict. Past it the conflict
// ends the pass, and the next pass decides again.
const seedCancelAttempts = 5

// cancelSeed runs first when a seeded preview fleet whose gate never opened is deleted:
// nothing of it started, and nothing may start once it is gone. A seed no executor claimed is
// recorded Canceled by the operator; a running one gets cancelRequestedAt and deletion waits
// for the executor to acknowledge it (SeedCancellationBlocked); once the seed is final the
// gate is closed, and deletion goes on (it finds nothing to shut down). Every write carries
// the resourceVersion read, so a claim, a progress message or a result the executor wrote
// meanwhile makes it a conflict. The status write copies the seed result it read, so it must
// never land on a newer one; and an executor reports progress while it copies, which would
// make every write from a cached read conflict for as long as the copy runs. So a conflict is
// decided again at once, from the reservation as the API server has it: the step may have
// changed (the executor claimed the seed, or finished it), and the write follows the fresh
// decision. A fleet whose gate is open is shut down as any fleet.
func (r *Reconciler) cancelSeed(ctx context.Context, s *scope) (bool, error) {
	st := &s.fleet.Spec.Storage
	if st.Seed == nil {
		return false, nil
	}
	name := reservation.Name(st.Bucket, st.Prefix)
	// A cached copy is enough for the first decision: every write below carries its
	// resourceVersion, so a stale one conflicts and is decided again from the API server.
	res, err := r.readReservation(ctx, name)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return true, fmt.Errorf("cancel the seed of %s: %w", s.key, err)
		}
		if res == nil {
			return false, nil // never reserved: nothing was requested, nothing started
		}
		if res.Spec.FleetUID != string(s.fleet.UID) {
			return false, nil // another fleet's: this one reserved nothing and started nothing
		}
		stop, werr := r.cancelStep(ctx, s, res)
		if !apierrors.IsConflict(werr) {
			return stop, werr
		}
		if attempt >= seedCancelAttempts {
			return true, fmt.Errorf("CelldStorageReservation %s kept changing through %d decisions: %w", name, attempt, werr)
		}
		log.FromContext(ctx).Info("reservation changed since it was read; deciding the seed's cancellation again on the API server's copy",
			"fleet", s.key.String(), "reservation", name)
		res, err = r.directReservation(ctx, name)
	}
}

// directReservation is the reservation at name as the API server has it; nil when it does not
// exist.
func (r *Reconciler) directReservation(ctx context.Context, name string) (*v1.CelldStorageReservation, error) {
	res := &v1.CelldStorageReservation{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Name: name}, res); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read CelldStorageReservation %s: %w", name, err)
	}
	return res, nil
}

// cancelStep takes the cancellation's one step on res, the reservation of the fleet's seed.
// Its writes carry res's resourceVersion.
func (r *Reconciler) cancelStep(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (bool, error) {
	name := res.Name
	req := res.Spec.Seed
	switch step := reservation.CancelOf(res); step {
	case reservation.CancelUnclaimed, reservation.CancelRequest:
		res = res.DeepCopy()
		res.Status.Seed = reservation.Cancelled(res, step, s.now)
		w := write{verb: "cancel seed", object: "CelldStorageReservation/" + name + " status.seed",
			why: "the fleet is deleted before its seed finished", kv: []any{"phase", res.Status.Seed.Phase}}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Status().Update(ctx, res) })); err != nil {
			return true, err
		}
		s.deleting(v1.ReasonDeleting, fmt.Sprintf("Cancelling the seed of CelldFleet %s on CelldStorageReservation %s", s.key, name))
		s.again(time.Second)
		return true, nil
	case reservation.CancelWait:
		s.deleting(v1.ReasonSeedCancellationBlocked, fmt.Sprintf(
			"CelldFleet %s is deleted while executor %s (worker %s) copies its seed; the fleet is released once the executor acknowledges the cancellation requested at %s on CelldStorageReservation %s (status.seed.phase Canceled or Failed). If the executor is gone for good, stop its workers, then record the seed Failed on that reservation's status subresource (docs/preview-seeding.md)",
			s.key, req.Executor, res.Status.Seed.ExecutorID, res.Status.Seed.CancelRequestedAt.UTC().Format(time.RFC3339), name))
		return true, nil
	case reservation.CancelClose:
		res = res.DeepCopy()
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[v1.AnnotationSeedGate] = v1.SeedGateClosed
		w := write{verb: "close seed gate", object: "CelldStorageReservation/" + name + " " + v1.AnnotationSeedGate,
			why: "the fleet is deleted before it started", kv: []any{"seed", res.Status.Seed.Phase}}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
			return true, err
		}
	}
	return false, nil
}
