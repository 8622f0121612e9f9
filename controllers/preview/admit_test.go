package preview

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestAdmitChecksInOrderEachWithItsReason: the checks before a preview's fleet is created,
// row by row, in their precedence (the first failing check is the verdict), with the wait of
// a cause no watch of the preview reports.
func TestAdmitChecksInOrderEachWithItsReason(t *testing.T) {
	const seedUID = "5b0c7a6e-1f0e-4d38-9d7a-4c2b1e0f9a11"
	seeded := func(in *admission) {
		in.p.Spec.Seed = &v1.PreviewSeed{Source: "prod"}
		in.parent.Spec.Previews.Seeding = &v1.PreviewSeeding{Executor: "seeder",
			Sources: []v1.SeedSource{{Name: "prod", FleetRef: v1.SeedFleetRef{Namespace: "prod", Name: "main", UID: seedUID}}}}
		in.seedFleet = &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "main", UID: seedUID}}
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "celld.eric.dev", Resource: "celldfleets"}, "x")
	deleting := metav1.Now()
	cases := []struct {
		name   string
		edit   func(*admission)
		reason string // empty: admitted
		wait   time.Duration
		says   string // a part of the message
	}{
		{"a parent in the preview's namespace with spec.previews admits", func(*admission) {}, "", 0, ""},
		{"a parent in another namespace", func(in *admission) { in.p.Spec.FleetRef.Namespace = "other" },
			v1.ReasonParentInOtherNamespace, 0, "Create the preview in namespace other"},
		{"another namespace wins over a missing parent", func(in *admission) { in.p.Spec.FleetRef.Namespace = "other"; in.parentErr = notFound },
			v1.ReasonParentInOtherNamespace, 0, "names parent fleet other/development"},
		{"a missing parent is looked at again", func(in *admission) { in.parentErr = notFound },
			v1.ReasonParentMissing, resync, "Parent CelldFleet apps/development does not exist"},
		{"a parent being deleted", func(in *admission) { in.parent.DeletionTimestamp = &deleting },
			v1.ReasonParentDeleting, 0, "takes no new previews"},
		{"deletion wins over no spec.previews", func(in *admission) { in.parent.DeletionTimestamp = &deleting; in.parent.Spec.Previews = nil },
			v1.ReasonParentDeleting, 0, "is being deleted"},
		{"a parent without spec.previews", func(in *admission) { in.parent.Spec.Previews = nil },
			v1.ReasonPreviewsNotEnabled, 0, "has no spec.previews"},
		{"a seeded preview of an approved, existing source admits", seeded, "", 0, ""},
		{"a seed the parent does not authorize", func(in *admission) { seeded(in); in.parent.Spec.Previews.Seeding = nil },
			v1.ReasonSeedNotAuthorized, 0, "does not authorize seeds"},
		{"a source the parent does not approve names the approved ones", func(in *admission) { seeded(in); in.p.Spec.Seed.Source = "staging" },
			v1.ReasonSeedNotAuthorized, 0, `source "staging", which parent CelldFleet apps/development does not approve (approved: prod)`},
		{"a source fleet the operator cannot read", func(in *admission) {
			seeded(in)
			in.seedErr = apierrors.NewForbidden(schema.GroupResource{Resource: "celldfleets"}, "main", fmt.Errorf("unknown namespace for the cache"))
		}, v1.ReasonSeedNotAuthorized, resync, "The operator must watch namespace prod"},
		{"a source fleet that is gone", func(in *admission) { seeded(in); in.seedErr = notFound },
			v1.ReasonSeedNotAuthorized, resync, "which does not exist"},
		{"a source fleet recreated under the same name", func(in *admission) { seeded(in); in.seedFleet.UID = "another" },
			v1.ReasonSeedNotAuthorized, resync, "which now has UID another"},
		{"a source fleet being deleted", func(in *admission) { seeded(in); in.seedFleet.DeletionTimestamp = &deleting },
			v1.ReasonSeedNotAuthorized, resync, "which is being deleted"},
		{"the parent's checks come before the seed's", func(in *admission) { seeded(in); in.seedErr = notFound; in.parent.Spec.Previews = nil },
			v1.ReasonPreviewsNotEnabled, 0, "has no spec.previews"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := admission{p: previewFixture(), parent: parentFixture()}
			c.edit(&in)
			v, wait, ok := admit(in)
			if c.reason == "" {
				if !ok {
					t.Fatalf("refused (%s: %s), want admitted", v.reason, v.message)
				}
				return
			}
			if ok || v.reason != c.reason || v.phase != v1.PreviewBlocked || wait != c.wait || !strings.Contains(v.message, c.says) {
				t.Fatalf("admit = %v %s/%s wait %s: %s\nwant Blocked/%s wait %s, a message saying %q", ok, v.phase, v.reason, wait, v.message, c.reason, c.wait, c.says)
			}
		})
	}
}
