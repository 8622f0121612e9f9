package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// reservation gets or creates the fleet's CelldStorageReservation and verifies that it binds
// the bucket to this fleet. Create is the arbitration point between fleets that ask for one
// bucket: whoever creates the reservation first owns the bucket forever, and reads go to the
// API server, never a cache, so leader election is not the safety proof.
func (r *Reconciler) reservation(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	want := reservation.Desired(f)
	res := &v1.CelldStorageReservation{}
	err := r.Direct.Get(ctx, types.NamespacedName{Name: want.Name}, res)
	if apierrors.IsNotFound(err) {
		err = r.Direct.Create(ctx, want)
		switch {
		case err == nil:
			res = want
		case apierrors.IsAlreadyExists(err):
			res = &v1.CelldStorageReservation{} // re-read into an empty object
			err = r.Direct.Get(ctx, types.NamespacedName{Name: want.Name}, res)
		}
	}
	if err != nil {
		return true, err
	}
	s.reservationName = res.Name
	ok, why := reservation.Matches(res, f)
	if !ok || len(res.OwnerReferences) > 0 || res.DeletionTimestamp != nil {
		if ok {
			why = "the reservation is owned by another object or being deleted"
		}
		s.find.Block(v1.ReasonStorageScopeConflict, fmt.Sprintf(
			"Bucket %s is permanently reserved to another fleet UID or immutable configuration (CelldStorageReservation %s: %s); no resources adopted. Restore the creation-time storage and tuning settings, or create the fleet with another bucket",
			f.Spec.Storage.Bucket, res.Name, why))
		return false, nil // heal what runs; provision nothing
	}
	res, err = r.recordTuning(ctx, s, res)
	if err != nil {
		return true, err
	}
	if res, err = r.supersede(ctx, s, res); err != nil {
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
	if err := r.Direct.Update(ctx, res); err != nil {
		return nil, fmt.Errorf("rewrite the current-operation record of CelldStorageReservation %s: %w", res.Name, err)
	}
	why := "an earlier release kept claim identities, operations and disruption times there; only capacity-policy state remains"
	logMutation(ctx, s, "rewrite", "CelldStorageReservation/"+res.Name+" "+v1.AnnotationCurrentOperation, why)
	if sup.Operation != "" {
		s.events = append(s.events, fleetEvent{kind: corev1.EventTypeNormal, reason: v1.EventOperationSuperseded,
			message: fmt.Sprintf("Dropped %s recorded by an earlier release; members roll onto the current template instead", sup.Operation)})
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
	if err := r.Direct.Update(ctx, res); err != nil {
		return nil, fmt.Errorf("record the tuning of %s on CelldStorageReservation %s: %w", s.key, res.Name, err)
	}
	return res, nil
}
