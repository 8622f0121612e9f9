package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/reservation"
)

// reservation gets or creates the fleet's CelldStorageReservation and verifies that it binds
// the bucket (or, for a preview fleet, its prefix) to this fleet. Create is the arbitration
// point between fleets that ask for one scope: whoever creates the reservation first owns it
// forever, and the arbitration reads the API server, never a cache, so leader election is not
// the safety proof. A reservation the cache already holds is verified from the cache: its spec
// (the holder's UID, the hash, a seed request) is immutable, so a cached copy names its holder
// as surely as the API server does, and every write to it carries the read's resourceVersion. A preview fleet runs only in its parent's preview pool: the whole-bucket
// reservation is read first, every pass, and a prefix anywhere else is refused before
// anything is reserved.
func (r *Reconciler) reservation(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if f.Spec.Storage.Prefix != "" || f.Spec.Storage.PreviewFleetRef != nil {
		if inPool, err := r.inPool(ctx, s); !inPool || err != nil {
			return err != nil, err
		}
	}
	want := reservation.Desired(f)
	res, conflict := r.cachedReservation(ctx, want.Name), (*v1.CelldStorageReservation)(nil)
	var err error
	if res == nil {
		if res, conflict, err = reservation.Claim(ctx, r.Direct, want); err != nil {
			return true, err
		}
	}
	s.reservationName = want.Name // the reservation read or created is at this name
	if b := lifecycle.ReservationHeld(f, want, res, conflict); b != nil {
		s.find.Block(b.Reason, b.Message)
		return false, nil // heal what runs; provision nothing
	}
	res, err = r.recordTuning(ctx, s, res)
	if err != nil {
		return true, err
	}
	if res, err = r.supersede(ctx, s, res); err != nil {
		return true, err
	}
	if stop, err := r.seedGate(ctx, s, res); stop || err != nil {
		return true, err
	}
	return false, r.readHistory(ctx, s, res)
}

// supersede rewrites a current-operation annotation an earlier release left on the reservation
// to this release's capacity record alone, or removes it, and reports an operation it held in
// flight as superseded: the StatefulSet rolls members onto the current template instead. It
// writes with an Update carrying the pass's read (or recordTuning's write) resourceVersion,
// never retried: a conflict ends the pass.
func (r *Reconciler) supersede(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (*v1.CelldStorageReservation, error) {
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok {
		return res, nil
	}
	sup := reservation.Supersede(value, s.fleet.UID)
	if !sup.Changed {
		return res, nil
	}
	res = res.DeepCopy()
	if sup.Remove {
		delete(res.Annotations, v1.AnnotationCurrentOperation)
	} else {
		res.Annotations[v1.AnnotationCurrentOperation] = sup.Value
	}
	w := write{verb: "rewrite", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationCurrentOperation,
		why: "an earlier release kept claim identities, operations and disruption times there; only capacity-policy state remains"}
	if sup.Operation != "" {
		w.event = &fleetEvent{kind: corev1.EventTypeNormal, reason: v1.EventOperationSuperseded,
			message: fmt.Sprintf("Dropped %s recorded by an earlier release; members roll onto the current template instead", sup.Operation)}
	}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
		return nil, err
	}
	return res, nil
}

// recordTuning writes the creation-time execution, lifecycle, env and telemetry on the
// reservation when it has no record that verifies (none, as reservations of earlier releases
// have, or an invalid one) and the fleet still hashes to the frozen spec hash, so those fields
// may change later and the reservation still verifies. reservation.NeedsTuningRecord decides.
func (r *Reconciler) recordTuning(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (*v1.CelldStorageReservation, error) {
	if !reservation.NeedsTuningRecord(res, s.fleet) {
		return res, nil
	}
	record, err := reservation.TuningRecord(s.fleet)
	if err != nil {
		return nil, fmt.Errorf("record the tuning of %s on CelldStorageReservation %s: %w", s.key, res.Name, err)
	}
	res = res.DeepCopy()
	if res.Annotations == nil {
		res.Annotations = map[string]string{}
	}
	res.Annotations[v1.AnnotationReservedTuning] = record
	// An Update carrying the read's resourceVersion: if anyone wrote the reservation since, it
	// fails with a conflict and the next pass decides again from a fresh read. Never retry a
	// reservation write with a refreshed resourceVersion.
	w := write{verb: "record tuning", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationReservedTuning,
		why: "the reservation has no tuning record that verifies, and the fleet still hashes to its frozen spec"}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
		return nil, err
	}
	return res, nil
}

// inPool reads the preview pool a preview fleet's bucket must be (lifecycle.PreviewPool) and
// blocks the fleet when it is not.
func (r *Reconciler) inPool(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	st := &f.Spec.Storage
	pool, err := r.readReservation(ctx, reservation.Name(st.Bucket, ""))
	if err != nil {
		return false, fmt.Errorf("read the preview pool of CelldFleet %s/%s: %w", f.Namespace, f.Name, err)
	}
	if b := lifecycle.PreviewPool(f, pool); b != nil {
		s.reservationName = reservation.Name(st.Bucket, st.Prefix)
		s.find.Block(b.Reason, b.Message)
		return false, nil
	}
	return true, nil
}

// cachedReservation is the reservation at name as the manager's cache holds it, or nil when
// the cache has not seen it (or cannot be read): the caller then asks the API server.
// Reservations are never deleted and their spec never changes, so what the cache holds is
// the reservation's spec; annotations and status may lag, and are written back only with the
// read's resourceVersion.
func (r *Reconciler) cachedReservation(ctx context.Context, name string) *v1.CelldStorageReservation {
	if r.Client == nil {
		return nil
	}
	res := &v1.CelldStorageReservation{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, res); err != nil {
		return nil
	}
	return res
}

// readReservation is the reservation at name from the cache, or from the API server when the
// cache has not seen it; nil when it does not exist.
func (r *Reconciler) readReservation(ctx context.Context, name string) (*v1.CelldStorageReservation, error) {
	if res := r.cachedReservation(ctx, name); res != nil {
		return res, nil
	}
	res := &v1.CelldStorageReservation{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Name: name}, res); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read CelldStorageReservation %s: %w", name, err)
	}
	return res, nil
}
