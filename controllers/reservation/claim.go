package reservation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// listPage bounds one page of the reservation list a first claim reads.
const listPage = 500

// Claim gets the reservation at want's name or, when there is none, creates want: Create is
// the arbitration point between every fleet and pool that asks for one scope. c must read the
// API server, never a cache, so leader election is not the safety proof. It reads one list of
// every reservation: the one at want's name, when it exists, is in it; otherwise Claim refuses
// when a reservation of want's bucket holds keys want would hold (Conflict): a whole bucket
// must not be claimed over a prefix scope an earlier release let a fleet reserve there, nor a
// prefix over a bucket held whole or a prefix around or under it. Callers claim only what the
// manager's cache does not hold, so the list is read about once in the life of a scope.
// Exactly one of the results is set when err is nil: the reservation at want's name (which
// the caller must still verify: it may be someone else's), or the conflicting reservation,
// for which nothing was created. created says this call created got.
func Claim(ctx context.Context, c client.Client, want *v1.CelldStorageReservation) (got, conflict *v1.CelldStorageReservation, created bool, err error) {
	others, held, err := listBucket(ctx, c, want.Spec.Bucket, want.Name)
	if err != nil {
		return nil, nil, false, err
	}
	if held != nil {
		return held, nil, false, nil
	}
	if o := Conflict(want, others); o != nil {
		return nil, o, false, nil
	}
	res := want.DeepCopy()
	err = c.Create(ctx, res)
	switch {
	case err == nil:
		return res, nil, true, nil
	case apierrors.IsAlreadyExists(err):
		res := &v1.CelldStorageReservation{} // re-read into an empty object: someone else won
		if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, res); err != nil {
			return nil, nil, false, fmt.Errorf("read CelldStorageReservation %s after losing its creation: %w", want.Name, err)
		}
		return res, nil, false, nil
	}
	return nil, nil, false, fmt.Errorf("create CelldStorageReservation %s: %w", want.Name, err)
}

// listBucket reads every reservation in pages from c and returns those of bucket, and the one
// named name (nil when there is none). Reservations carry no label to select them by (those
// of earlier releases have none), so the list is filtered here.
func listBucket(ctx context.Context, c client.Reader, bucket, name string) (inBucket []v1.CelldStorageReservation, named *v1.CelldStorageReservation, err error) {
	opts := []client.ListOption{client.Limit(listPage)}
	for {
		page := &v1.CelldStorageReservationList{}
		if err := c.List(ctx, page, opts...); err != nil {
			return nil, nil, fmt.Errorf("list CelldStorageReservations to check bucket %s: %w", bucket, err)
		}
		for i, r := range page.Items {
			if r.Name == name {
				named = &page.Items[i]
			}
			if r.Spec.Bucket == bucket {
				inBucket = append(inBucket, r)
			}
		}
		if page.Continue == "" {
			return inBucket, named, nil
		}
		opts = []client.ListOption{client.Limit(listPage), client.Continue(page.Continue)}
	}
}
