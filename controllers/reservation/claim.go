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
// API server, never a cache, so leader election is not the safety proof. Before creating, it
// lists every reservation of want's bucket and refuses when one of them holds keys want would
// hold (Conflict): a whole bucket must not be claimed over a prefix scope an earlier release
// let a fleet reserve there, nor a prefix over a bucket held whole or a prefix around or
// under it. The list is read once in the life of a scope (on the first claim), so a settled
// fleet pays one Get. Exactly one of the results is set when err is nil: the reservation at
// want's name (which the caller must still verify: it may be someone else's), or the
// conflicting reservation, for which nothing was created.
func Claim(ctx context.Context, c client.Client, want *v1.CelldStorageReservation) (got, conflict *v1.CelldStorageReservation, err error) {
	res := &v1.CelldStorageReservation{}
	err = c.Get(ctx, types.NamespacedName{Name: want.Name}, res)
	if err == nil {
		return res, nil, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("read CelldStorageReservation %s: %w", want.Name, err)
	}
	others, err := listBucket(ctx, c, want.Spec.Bucket)
	if err != nil {
		return nil, nil, err
	}
	if o := Conflict(want, others); o != nil {
		return nil, o, nil
	}
	created := want.DeepCopy()
	err = c.Create(ctx, created)
	switch {
	case err == nil:
		return created, nil, nil
	case apierrors.IsAlreadyExists(err):
		res = &v1.CelldStorageReservation{} // re-read into an empty object: someone else won
		if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, res); err != nil {
			return nil, nil, fmt.Errorf("read CelldStorageReservation %s after losing its creation: %w", want.Name, err)
		}
		return res, nil, nil
	}
	return nil, nil, fmt.Errorf("create CelldStorageReservation %s: %w", want.Name, err)
}

// listBucket is every reservation of bucket, read in pages from c. Reservations carry no
// label to select them by (those of earlier releases have none), so the list is filtered
// here.
func listBucket(ctx context.Context, c client.Reader, bucket string) ([]v1.CelldStorageReservation, error) {
	var out []v1.CelldStorageReservation
	opts := []client.ListOption{client.Limit(listPage)}
	for {
		page := &v1.CelldStorageReservationList{}
		if err := c.List(ctx, page, opts...); err != nil {
			return nil, fmt.Errorf("list CelldStorageReservations to check bucket %s: %w", bucket, err)
		}
		for _, r := range page.Items {
			if r.Spec.Bucket == bucket {
				out = append(out, r)
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{client.Limit(listPage), client.Continue(page.Continue)}
	}
}
