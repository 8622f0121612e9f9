package reservation

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// A reservation holds a scope: a whole bucket, or one key prefix in it. Bucket names are
// reserved cluster-wide whatever the endpoint that serves them: the reservation name derives
// from the bucket alone, so two endpoints that alias one store can never hand one bucket to
// two owners. Three kinds of reservation exist:
//
//   - a dedicated fleet's bucket (ownerKind "", no prefix);
//   - a preview pool: the parent fleet's spec.previews.storage.bucket, reserved whole to the
//     parent UID (ownerKind FleetPreviews);
//   - a preview fleet's prefix scope inside a pool ("s3-scope-" names), bound to the child
//     fleet's own UID.
//
// The rules: a whole-bucket reservation excludes every other reservation in its bucket,
// except that a pool admits the prefix scopes of its own parent's preview fleets (InPool);
// two prefix scopes may share a bucket only when neither prefix contains the other.

// Scope is the part of a bucket a reservation holds; Prefix "" is the whole bucket.
type Scope struct {
	Bucket, Prefix string
}

// ScopeOf is the scope reservation res holds.
func ScopeOf(res *v1.CelldStorageReservation) Scope {
	return Scope{Bucket: res.Spec.Bucket, Prefix: res.Spec.Prefix}
}

func (s Scope) String() string {
	if s.Prefix == "" {
		return "bucket " + s.Bucket
	}
	return "prefix " + s.Prefix + " of bucket " + s.Bucket
}

// Overlaps reports whether scopes a and b may hold a common key. It is symmetric: a whole
// bucket overlaps every scope in it, and two prefixes overlap when one is the other or lies
// under it, segment by segment (celld keeps its keys under PREFIX/, so "pr-1" and "pr-10"
// never share a key, while "a" and "a/b" would).
func Overlaps(a, b Scope) bool {
	if a.Bucket != b.Bucket {
		return false
	}
	if a.Prefix == "" || b.Prefix == "" {
		return true
	}
	return under(a.Prefix, b.Prefix) || under(b.Prefix, a.Prefix)
}

// under: prefix p is q or lies below it.
func under(p, q string) bool {
	p, q = strings.Trim(p, "/"), strings.Trim(q, "/")
	return p == q || strings.HasPrefix(p, q+"/")
}

// Conflict is the first reservation among others, other than want itself, that holds keys
// want would hold, or nil. A prefix scope does not conflict with the whole-bucket pool it
// runs in: whether that pool admits the fleet is InPool's question, asked before any scope
// is reserved. Call it before creating want, with every reservation of want's bucket: after
// the Create, the reservation is the arbitration and nothing else may be claimed inside it.
func Conflict(want *v1.CelldStorageReservation, others []v1.CelldStorageReservation) *v1.CelldStorageReservation {
	ws := ScopeOf(want)
	for i := range others {
		o := &others[i]
		if o.Name == want.Name || !Overlaps(ws, ScopeOf(o)) {
			continue
		}
		if ws.Prefix != "" && o.Spec.Prefix == "" && o.Spec.OwnerKind == v1.ReservationOwnerFleetPreviews {
			continue
		}
		return o
	}
	return nil
}

// Holder says who holds res, for messages: "fleet NS/NAME (UID u)" or "the previews of
// fleet NS/NAME (UID u)".
func Holder(res *v1.CelldStorageReservation) string {
	s := &res.Spec
	who := fmt.Sprintf("fleet %s/%s (UID %s)", s.FleetNamespace, s.FleetName, s.FleetUID)
	if s.OwnerKind == v1.ReservationOwnerFleetPreviews {
		return "the previews of " + who
	}
	return who
}

// DesiredPool is the reservation of parent's preview bucket: the whole of
// spec.previews.storage.bucket, reserved to the parent UID for its preview fleets. Like a
// fleet's own, it has no owner reference: it outlives the parent, and a parent recreated
// under the same name never gets the bucket back. parent must have spec.previews.
func DesiredPool(parent *v1.CelldFleet) *v1.CelldStorageReservation {
	st := &parent.Spec.Previews.Storage
	return &v1.CelldStorageReservation{
		ObjectMeta: metav1.ObjectMeta{Name: Name(st.Bucket, "")},
		Spec: v1.CelldStorageReservationSpec{
			OwnerKind:       v1.ReservationOwnerFleetPreviews,
			Bucket:          st.Bucket,
			Endpoint:        poolEndpoint(parent),
			InitialReplicas: 1,
			FleetNamespace:  parent.Namespace,
			FleetName:       parent.Name,
			FleetUID:        string(parent.UID),
			SpecHash:        PoolHash(parent),
		},
	}
}

// PoolHash is the hex sha256 of the JSON of the parent's spec.previews.storage (bucket,
// region, endpoint): what the pool's data depends on. spec.previews is immutable once added,
// so the hash never moves.
func PoolHash(parent *v1.CelldFleet) string {
	b, err := json.Marshal(parent.Spec.Previews.Storage)
	if err != nil {
		return "" // plain data: a failure is a programming error, and no hash matches nothing
	}
	return digest(b)
}

func poolEndpoint(parent *v1.CelldFleet) string {
	if e := parent.Spec.Previews.Storage.Endpoint; e != nil {
		return e.URL
	}
	return ""
}

// PoolMatches reports whether res is parent's preview pool, and why not: permanent (no owner
// reference, not being deleted), held for previews, bound to this very parent (UID, namespace,
// name) and to its preview storage.
func PoolMatches(res *v1.CelldStorageReservation, parent *v1.CelldFleet) (bool, string) {
	s := &res.Spec
	switch {
	case len(res.OwnerReferences) > 0:
		return false, "the reservation has owner references, so garbage collection could delete it"
	case res.DeletionTimestamp != nil:
		return false, "the reservation is being deleted"
	case s.OwnerKind != v1.ReservationOwnerFleetPreviews || s.Prefix != "":
		return false, "the bucket is reserved to " + Holder(res)
	case parent.UID == "" || s.FleetUID != string(parent.UID) || s.FleetNamespace != parent.Namespace || s.FleetName != parent.Name:
		return false, "the bucket is reserved to " + Holder(res)
	case s.Bucket != parent.Spec.Previews.Storage.Bucket || s.Endpoint != poolEndpoint(parent):
		return false, "the reservation is for another bucket scope"
	case s.SpecHash != PoolHash(parent):
		return false, "the preview storage differs from the one reserved when the first preview was created"
	}
	return true, ""
}

// InPool reports whether the preview fleet f (storage.prefix and previewFleetRef set) may run
// in its bucket: pool must be the whole-bucket reservation of f's bucket, held for previews by
// the parent f names (UID, namespace, name), permanent, on f's endpoint. Without such a pool
// a prefix is refused: a prefix in a bucket reserved to another fleet, or in an unreserved
// bucket, would share that bucket with whoever holds or later claims it. pool is nil when the
// bucket has no reservation.
func InPool(pool *v1.CelldStorageReservation, f *v1.CelldFleet) (bool, string) {
	ref, st := f.Spec.Storage.PreviewFleetRef, &f.Spec.Storage
	switch {
	case ref == nil || st.Prefix == "":
		return false, "the fleet is not a preview fleet (storage.prefix and previewFleetRef)"
	case pool == nil:
		return false, "bucket " + st.Bucket + " has no preview pool reservation"
	case pool.Name != Name(st.Bucket, "") || pool.Spec.Prefix != "" || pool.Spec.Bucket != st.Bucket:
		return false, "the reservation is for another bucket scope"
	case len(pool.OwnerReferences) > 0:
		return false, "the pool reservation has owner references, so garbage collection could delete it"
	case pool.DeletionTimestamp != nil:
		return false, "the pool reservation is being deleted"
	case pool.Spec.OwnerKind != v1.ReservationOwnerFleetPreviews:
		return false, "bucket " + st.Bucket + " is reserved whole to " + Holder(pool) + ", not to a preview pool"
	case pool.Spec.FleetUID != ref.UID || pool.Spec.FleetName != ref.Name || pool.Spec.FleetNamespace != f.Namespace:
		return false, "bucket " + st.Bucket + " is the preview pool of " + Holder(pool)
	case pool.Spec.Endpoint != endpoint(f):
		return false, "the preview pool of bucket " + st.Bucket + " is served by another endpoint"
	}
	return true, ""
}
