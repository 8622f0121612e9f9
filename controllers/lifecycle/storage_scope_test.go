package lifecycle

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

// TestStorageScopeChecks: the checks of a fleet's storage scope, each with its
// StorageScopeConflict message naming what holds the scope and the fix: a preview fleet outside
// its parent's pool, an overlapping scope found by the arbitration (it comes first: nothing was
// reserved), and a reservation at the fleet's name that does not bind it.
func TestStorageScopeChecks(t *testing.T) {
	f := corpus.Persistent()
	f.Namespace, f.Name, f.UID = "apps", "orders", "0f8c1a52-0000-4000-8000-000000000001"
	want := reservation.Desired(f)
	other := f.DeepCopy()
	other.Name, other.UID = "billing", "0f8c1a52-0000-4000-8000-000000000002"
	otherRes := reservation.Desired(other)
	prefixed := other.DeepCopy()
	prefixed.Spec.Storage.Prefix = "team-a"
	overlapping := reservation.Desired(prefixed)
	owned := want.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "y"}}
	deleting := want.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}

	for _, c := range []struct {
		name          string
		res, conflict *v1.CelldStorageReservation
		says          []string // empty: held
	}{
		{"the fleet's own reservation", want, nil, nil},
		{"an overlapping scope found by the arbitration", nil, overlapping,
			[]string{"overlaps the", "reserves permanently to fleet apps/billing", "nothing was reserved", "another bucket"}},
		{"the scope of another fleet's UID", otherRes, nil,
			[]string{"Bucket " + f.Spec.Storage.Bucket + " is permanently reserved to another fleet UID", "CelldStorageReservation " + otherRes.Name}},
		{"a reservation with an owner", owned, nil, []string{"has owner references"}},
		{"a reservation being deleted", deleting, nil, []string{"is being deleted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ReservationHeld(f, want, c.res, c.conflict)
			if len(c.says) == 0 {
				if b != nil {
					t.Fatalf("blocked: %s", b.Message)
				}
				return
			}
			if b == nil || b.Reason != v1.ReasonStorageScopeConflict {
				t.Fatalf("ReservationHeld = %+v, want StorageScopeConflict", b)
			}
			for _, w := range c.says {
				if !strings.Contains(b.Message, w) {
					t.Errorf("the message %q does not say %q", b.Message, w)
				}
			}
		})
	}

	parent := f.DeepCopy()
	parent.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "celld-previews", Region: f.Spec.Storage.Region}}
	pool := reservation.DesiredPool(parent)
	child := &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "p-1", UID: "child-uid"},
		Spec: v1.CelldFleetSpec{Profile: v1.ProfileBucket, Storage: v1.StorageSpec{Bucket: "celld-previews", Region: f.Spec.Storage.Region,
			Prefix: "p-1", PreviewFleetRef: &v1.FleetReference{Name: parent.Name, UID: string(parent.UID)}}}}
	if b := PreviewPool(child, pool); b != nil {
		t.Fatalf("a preview fleet in its parent's pool is blocked: %s", b.Message)
	}
	unrefd := child.DeepCopy()
	unrefd.Spec.Storage.PreviewFleetRef = nil
	for _, c := range []struct {
		name  string
		child *v1.CelldFleet
		pool  *v1.CelldStorageReservation
		says  string
	}{
		{"no pool", child, nil, "parent fleet apps/orders (UID " + string(parent.UID) + ")"},
		{"a prefix without a parent", unrefd, pool, "(none: previewFleetRef is not set)"},
		{"a bucket another fleet holds", child, otherRes, "not the preview pool"},
	} {
		b := PreviewPool(c.child, c.pool)
		if b == nil || b.Reason != v1.ReasonStorageScopeConflict || !strings.Contains(b.Message, c.says) || !strings.Contains(b.Message, "create a CelldPreview") {
			t.Errorf("%s: PreviewPool = %+v, want StorageScopeConflict saying %q", c.name, b, c.says)
		}
	}
}
