package fleet

import (
	"context"
	"fmt"
	"strings"

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
	if res, err = r.writeRecords(ctx, s, res); err != nil {
		return true, err
	}
	if stop, err := r.seedGate(ctx, s, res); stop || err != nil {
		return true, err
	}
	r.readHistory(ctx, s, res)
	return false, nil
}

// writeRecords brings the reservation's records to this release's in one write, as
// reservation.PlanRecords decides: the creation-time tuning record when the reservation has
// none that verifies (so execution, lifecycle, env and telemetry may change later and the
// reservation still verifies), and the current-operation record kept only as this release's
// capacity state (an earlier release's record rewritten or removed, an operation it held in
// flight reported superseded: the StatefulSet rolls members onto the current template
// instead). A settled reservation gets no write. It is an Update carrying the read's
// resourceVersion, never retried: if anyone wrote the reservation since, the conflict ends
// the pass and the next one decides again from a fresh read.
func (r *Reconciler) writeRecords(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (*v1.CelldStorageReservation, error) {
	plan, err := reservation.PlanRecords(res, s.fleet)
	if err != nil || plan.Empty() {
		return res, err
	}
	updated := plan.Apply(res)
	w := write{verb: "update records", object: "CelldStorageReservation/" + res.Name + " " + plan.String(), why: strings.Join(plan.Why, "; ")}
	if plan.Superseded != "" {
		w.event = &fleetEvent{kind: corev1.EventTypeNormal, reason: v1.EventOperationSuperseded,
			message: fmt.Sprintf("Dropped %s recorded by an earlier release; members roll onto the current template instead", plan.Superseded)}
	}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, updated) })); err != nil {
		return nil, err
	}
	return updated, nil
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
