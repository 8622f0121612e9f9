package preview

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/mutation"
	"github.com/celld/celld-operator/controllers/reservation"
)

// outcome is what the executor did: the error that ended it, or the refusal of an action of
// the creation, which replaces the plan's verdict (with how soon to look again).
type outcome struct {
	err     error
	refused *verdict
	// wait is how soon a refused creation is examined again; zero waits for a watch.
	wait time.Duration
}

// act runs the plan's actions in order and stops at the first that fails or refuses. Each is
// logged through one helper and its error wrapped with its name.
func (r *Reconciler) act(ctx context.Context, s *snapshot, pl plan) outcome {
	for _, a := range pl.actions {
		out, err := r.run(ctx, s, pl, a)
		if err != nil {
			return outcome{err: fmt.Errorf("%s of CelldPreview %s/%s: %w", a.kind, s.p.Namespace, s.p.Name, err)}
		}
		if out.refused != nil {
			return out
		}
	}
	return outcome{}
}

// run does one action.
func (r *Reconciler) run(ctx context.Context, s *snapshot, pl plan, a action) (outcome, error) {
	p := s.p
	switch a.kind {
	case addFinalizer, release, recordIntent:
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		switch a.kind {
		case addFinalizer:
			controllerutil.AddFinalizer(p, v1.FinalizerPreviewProtection)
		case release:
			controllerutil.RemoveFinalizer(p, v1.FinalizerPreviewProtection)
		default:
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[v1.AnnotationPreviewFleet] = a.fleet.Name
		}
		err := r.Client.Patch(ctx, p, patch)
		if a.kind == release {
			err = client.IgnoreNotFound(err)
		}
		if err != nil {
			return outcome{}, err
		}
	case deleteFleet:
		// Bound to the UID alone: what the delete rests on (the preview's label) was read from
		// the API server in this pass, and the fleet's status moves all the time.
		uid := a.fleet.UID
		if err := r.Direct.Delete(ctx, a.fleet, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return outcome{}, err
		}
	case claimPool:
		if v, wait := r.claimPool(ctx, s, a, pl.parent); v != nil {
			return outcome{refused: v, wait: wait}, nil
		}
		return outcome{}, nil // logged by claimPool when it created the pool
	case tryFleet:
		err := r.Direct.Create(ctx, a.fleet.DeepCopy(), client.DryRunAll)
		if apierrors.IsAlreadyExists(err) {
			return outcome{}, fmt.Errorf("CelldFleet %s/%s appeared before the preview created it: %w", a.fleet.Namespace, a.fleet.Name, err)
		}
		if err != nil {
			return outcome{refused: &verdict{v1.PreviewBlocked, v1.ReasonInvalidConfiguration, fmt.Sprintf("The API server refuses the fleet generated for this preview from parent CelldFleet %s/%s: %v; fix the parent's spec.previews or what refused it", pl.parent.Namespace, pl.parent.Name, err)}}, nil
		}
		return outcome{}, nil // a dry run changes nothing: not logged
	case createFleet:
		if err := r.Direct.Create(ctx, a.fleet.DeepCopy()); err != nil {
			return outcome{}, err
		}
	case restoreFleet:
		written, err := r.restore(ctx, s, a.fleet, pl.parent)
		if err != nil || !written {
			return outcome{}, err // nothing written: the next pass decides on what it finds
		}
	default:
		return outcome{}, fmt.Errorf("unknown action %q", a.kind)
	}
	logAction(ctx, s, a)
	return outcome{}, nil
}

// logAction writes the mutation line of a write the executor made (mutation.Log): its
// action and object, the generated fleet it concerns, why, and the preview.
func logAction(ctx context.Context, s *snapshot, a action, kv ...any) {
	verb, object := a.kind.mutation(s)
	logWrite(ctx, s, a, verb, object, kv...)
}

// logWrite is logAction for a write whose object the executor knows and the snapshot does not
// (the pool reservation claimPool built).
func logWrite(ctx context.Context, s *snapshot, a action, verb, object string, kv ...any) {
	mutation.Log(ctx, verb, s.p.Namespace+"/"+s.fleet, object, a.why, append([]any{"preview", s.p.Name}, kv...)...)
}

// mutation is the mutation line's action and object of a write of this kind.
func (k actionKind) mutation(s *snapshot) (verb, object string) {
	preview, fleet := "CelldPreview/"+s.p.Name, "CelldFleet/"+s.fleet
	switch k {
	case addFinalizer:
		return "add finalizer", preview + " " + v1.FinalizerPreviewProtection
	case release:
		return "remove finalizer", preview + " " + v1.FinalizerPreviewProtection
	case recordIntent:
		return "annotate", preview + " " + v1.AnnotationPreviewFleet + "=" + s.fleet
	case deleteFleet:
		return "delete", fleet
	case createFleet:
		return "create", fleet
	case restoreFleet:
		return "restore", fleet
	}
	return string(k), fleet
}

// claimPool gets or creates the parent's preview pool, the whole preview bucket reserved to
// the parent UID, and verifies it; the first preview of a parent creates it and Create
// arbitrates. It returns the refusal when the pool is not the parent's, nil when it is.
func (r *Reconciler) claimPool(ctx context.Context, s *snapshot, a action, parent *v1.CelldFleet) (*verdict, time.Duration) {
	want := reservation.DesiredPool(parent)
	res, clash, created, err := reservation.Claim(ctx, r.Direct, want)
	if created {
		logWrite(ctx, s, a, "reserve", "CelldStorageReservation/"+want.Name)
	}
	why, wait := "", time.Duration(0)
	switch {
	case err != nil:
		why, wait = err.Error(), resync
	case clash != nil:
		why = fmt.Sprintf("CelldStorageReservation %s reserves the %s to %s", clash.Name, reservation.ScopeOf(clash), reservation.Holder(clash))
	default:
		if ok, w := reservation.PoolMatches(res, parent); !ok {
			why = fmt.Sprintf("CelldStorageReservation %s: %s", res.Name, w)
		}
	}
	if why == "" {
		return nil, 0
	}
	return &verdict{v1.PreviewBlocked, v1.ReasonStorageScopeConflict, fmt.Sprintf("The preview bucket %s of parent CelldFleet %s/%s cannot be its preview pool: %s; nothing was created. Reservations are permanent: the parent's spec.previews needs another bucket, so use another parent",
		want.Spec.Bucket, parent.Namespace, parent.Name, why)}, wait
}

// restoreAttempts bounds how often a generated fleet's restore is tried again after the
// fleet's resourceVersion moved while nothing that matters to the restore changed.
const restoreAttempts = 5

// restore writes the generated spec want onto the fleet the pass read (from the cache), with an
// Update carrying its resourceVersion, so labels, annotations and finalizers others set are
// kept. What the restore rests on is the spec alone (and that the fleet is this preview's, of
// this parent, not being deleted); the fleet's status is written all the time by the fleet
// reconciler and the application observer, and each such write moves the resourceVersion. So a
// conflict is not the end: the fleet is read again from the API server and, while it still is
// this preview's fleet of this parent, not being deleted and still not the generated spec, the
// spec is written again on that read. A fresh read that needs no restore ends it (the next
// pass decides on what it finds); past restoreAttempts, the conflict (the next pass decides
// again). written says a restore was accepted.
func (r *Reconciler) restore(ctx context.Context, s *snapshot, want, parent *v1.CelldFleet) (written bool, err error) {
	child := s.child
	uid := child.UID
	live := child
	for attempt := 1; ; attempt++ {
		restored := live.DeepCopy()
		restored.Spec = want.Spec
		err := r.Direct.Update(ctx, restored)
		switch {
		case err == nil:
			return true, nil
		case !apierrors.IsConflict(err) || attempt >= restoreAttempts:
			return false, err
		}
		live = &v1.CelldFleet{}
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(child), live); apierrors.IsNotFound(err) {
			return false, nil // gone: the next pass finds it missing
		} else if err != nil {
			return false, fmt.Errorf("re-read CelldFleet %s/%s after its restore met a conflict: %w", child.Namespace, child.Name, err)
		}
		if live.UID != uid || !ours(live, s.p) || live.DeletionTimestamp != nil || live.Spec.Storage.PreviewFleetRef == nil ||
			live.Spec.Storage.PreviewFleetRef.UID != string(parent.UID) || sameSpec(live, want) {
			return false, nil // the next pass decides on what it finds
		}
		logf.FromContext(ctx).Info("the generated fleet changed since it was read and its spec still differs from the generated one; restoring it on the fresh read",
			"preview", s.p.Name, "fleet", s.p.Namespace+"/"+s.fleet, "resourceVersion", live.ResourceVersion)
	}
}

// sameSpec: the live fleet's spec is the generated one, both defaulted as stored.
func sameSpec(live, want *v1.CelldFleet) bool {
	a, b := live.DeepCopy(), want.DeepCopy()
	a.Default()
	b.Default()
	return equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
