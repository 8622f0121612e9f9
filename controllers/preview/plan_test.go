package preview

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// TestDecide: the preview reconciler's one decision, branch by branch: which actions, in which
// order, on which fleet, and what the status says when they succeed. The rows that matter most
// for safety: a fleet at the generated name that is not the preview's is never deleted,
// restored or adopted, and a recorded fleet that is gone is never created again.
func TestDecide(t *testing.T) {
	created := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "celld.eric.dev", Resource: "celldfleets"}, "development")
	deleted := metav1.NewTime(created.Add(time.Minute))

	// generated is the preview's fleet as the fleet reconciler leaves it: Ready on its generation.
	generated := func(s *snapshot) *v1.CelldFleet {
		f := Fleet(s.p, s.parent)
		f.UID, f.Generation = "7c1d0f7e-0000-4000-8000-000000000001", 2
		f.Status.ObservedGeneration = 2
		meta.SetStatusCondition(&f.Status.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Provisioned"})
		return f
	}
	withChild := func(edit func(*v1.CelldFleet)) func(*snapshot) {
		return func(s *snapshot) {
			s.child = generated(s)
			if edit != nil {
				edit(s.child)
			}
		}
	}
	handEdited := func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(3)) }
	foreign := func(f *v1.CelldFleet) { f.Labels = map[string]string{"team": "other"} }
	recorded := func(s *snapshot) { s.p.Annotations = map[string]string{v1.AnnotationPreviewFleet: s.fleet} }
	noFinalizer := func(s *snapshot) { s.p.Finalizers = nil }
	at := func(st stage) func(*snapshot) {
		return func(s *snapshot) {
			s.stage = st
			if st == deleting {
				s.p.DeletionTimestamp = &deleted
			}
		}
	}
	all := func(edits ...func(*snapshot)) func(*snapshot) {
		return func(s *snapshot) {
			for _, e := range edits {
				e(s)
			}
		}
	}
	const bucketURL = "s3://acme-previews/p-d43be4c2a6434fe6bcadad249dc55493"

	cases := []struct {
		name    string
		edit    func(*snapshot)
		actions []actionKind
		phase   v1.PreviewPhase // "" writes no status
		reason  string
		says    string
		named   bool
		storage string
		wait    time.Duration
	}{
		{name: "a new preview gets its finalizer, then the pool, dry run, intent and create, in that order",
			edit:    noFinalizer,
			actions: []actionKind{addFinalizer, claimPool, tryFleet, recordIntent, createFleet},
			phase:   v1.PreviewPending, reason: v1.ReasonFleetPending, says: "Created CelldFleet apps/p-", named: true, storage: bucketURL},
		{name: "a preview with its finalizer creates without adding it again",
			edit:    func(*snapshot) {},
			actions: []actionKind{claimPool, tryFleet, recordIntent, createFleet},
			phase:   v1.PreviewPending, reason: v1.ReasonFleetPending, says: "waiting for it to be Ready", named: true, storage: bucketURL},
		{name: "a refused admission creates nothing and is looked at again when no watch tells",
			edit:  func(s *snapshot) { s.parentErr = notFound },
			phase: v1.PreviewBlocked, reason: v1.ReasonParentMissing, says: "does not exist", wait: resync},
		{name: "a refused admission still adds the finalizer",
			edit:    all(noFinalizer, func(s *snapshot) { s.parent.Spec.Previews = nil }),
			actions: []actionKind{addFinalizer},
			phase:   v1.PreviewBlocked, reason: v1.ReasonPreviewsNotEnabled, says: "has no spec.previews"},
		{name: "a generated fleet the API would not accept is refused before the pool is claimed",
			edit:  func(s *snapshot) { s.parent.Spec.Previews.Storage.Bucket = "Not_A_Bucket" },
			phase: v1.PreviewBlocked, reason: v1.ReasonInvalidConfiguration, says: "is invalid"},
		{name: "a foreign fleet at the name is never adopted",
			edit:  withChild(foreign),
			phase: v1.PreviewBlocked, reason: v1.ReasonFleetMissing, says: "is not this preview's"},
		{name: "a foreign fleet wins over a recorded creation",
			edit:  all(recorded, withChild(foreign)),
			phase: v1.PreviewBlocked, reason: v1.ReasonFleetMissing, says: "never adopts a fleet", named: true},
		{name: "a recorded fleet only the API server has seen yet is waited for",
			edit:  all(recorded, withChild(nil), func(s *snapshot) { s.uncached = true }),
			phase: v1.PreviewPending, reason: v1.ReasonFleetPending, says: "Created CelldFleet", named: true, wait: time.Second},
		{name: "a recorded fleet that is gone is never created again",
			edit:  recorded,
			phase: v1.PreviewBlocked, reason: v1.ReasonFleetMissing, says: "never recreated on the same prefix", named: true, storage: bucketURL},
		{name: "the fleet's own state is the verdict",
			edit:  withChild(nil),
			phase: v1.PreviewReady, reason: v1.ReasonPreviewReady, says: "is Ready", named: true, storage: bucketURL},
		{name: "a hand edit is restored on the fleet the pass read",
			edit:    withChild(handEdited),
			actions: []actionKind{restoreFleet},
			phase:   v1.PreviewPending, reason: v1.ReasonFleetPending, says: "being restored", named: true, storage: bucketURL},
		{name: "a fleet being deleted is not restored",
			edit:  withChild(func(f *v1.CelldFleet) { handEdited(f); f.DeletionTimestamp = &deleted }),
			phase: v1.PreviewReady, reason: v1.ReasonPreviewReady, named: true, storage: bucketURL},
		{name: "without its parent a fleet is not restored, and Ready says no new previews come",
			edit:  all(withChild(handEdited), func(s *snapshot) { s.parentErr = notFound }),
			phase: v1.PreviewReady, reason: v1.ReasonPreviewReady, says: "is gone or was replaced", named: true, storage: bucketURL},
		{name: "a parent recreated under the name is not the fleet's parent",
			edit:  all(withChild(handEdited), func(s *snapshot) { s.parent.UID = "another" }),
			phase: v1.PreviewReady, reason: v1.ReasonPreviewReady, says: "is gone or was replaced", named: true, storage: bucketURL},
		{name: "a fleet the operator has not observed is pending",
			edit:  withChild(func(f *v1.CelldFleet) { f.Generation = 3 }),
			phase: v1.PreviewPending, reason: v1.ReasonFleetPending, says: "observe generation 3", named: true, storage: bucketURL},

		{name: "at expiry the fleet is deleted and the preview stays",
			edit:    all(at(expired), withChild(nil)),
			actions: []actionKind{deleteFleet},
			phase:   v1.PreviewExpired, reason: v1.ReasonPreviewExpired, says: "is shutting down through its finalizer", named: true, storage: bucketURL, wait: 5 * time.Second},
		{name: "an expired preview adds no finalizer and waits for a fleet shutting down",
			edit:  all(at(expired), noFinalizer, withChild(func(f *v1.CelldFleet) { f.DeletionTimestamp = &deleted })),
			phase: v1.PreviewExpired, reason: v1.ReasonPreviewExpired, says: "is shutting down", named: true, storage: bucketURL, wait: 5 * time.Second},
		{name: "an expired preview whose fleet is gone",
			edit:  all(at(expired), recorded),
			phase: v1.PreviewExpired, reason: v1.ReasonPreviewExpired, says: "is deleted; its prefix data and reservations are retained", named: true, storage: bucketURL},
		{name: "an expired preview never deletes a foreign fleet",
			edit:  all(at(expired), withChild(foreign)),
			phase: v1.PreviewExpired, reason: v1.ReasonPreviewExpired, says: "is deleted", storage: bucketURL},

		{name: "a deleted preview deletes its fleet first",
			edit:    all(at(deleting), withChild(nil)),
			actions: []actionKind{deleteFleet},
			phase:   v1.PreviewDeleting, reason: v1.ReasonPreviewDeleting, says: "before the preview is released", named: true, wait: 5 * time.Second},
		{name: "a deleted preview waits for its fleet's finalizer",
			edit:  all(at(deleting), withChild(func(f *v1.CelldFleet) { f.DeletionTimestamp = &deleted })),
			phase: v1.PreviewDeleting, reason: v1.ReasonPreviewDeleting, says: "to shut down", named: true, wait: 5 * time.Second},
		{name: "a deleted preview is released once its fleet is gone, with no status",
			edit:    at(deleting),
			actions: []actionKind{release}},
		{name: "a deleted preview is released past a foreign fleet, which is left alone",
			edit:    all(at(deleting), withChild(foreign)),
			actions: []actionKind{release}},
		{name: "a released preview does nothing",
			edit: all(at(deleting), noFinalizer)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := previewFixture()
			p.CreationTimestamp = metav1.NewTime(created)
			p.Finalizers = []string{v1.FinalizerPreviewProtection}
			s := &snapshot{p: p, now: created.Add(time.Hour), expires: created.Add(24 * time.Hour), fleet: FleetName(p), parent: parentFixture()}
			c.edit(s)
			live := s.child.DeepCopy()
			pl := decide(s)

			var kinds []actionKind
			for _, a := range pl.actions {
				kinds = append(kinds, a.kind)
				switch a.kind {
				case deleteFleet:
					if a.fleet != s.child {
						t.Errorf("%s acts on %v, not on the fleet the pass read", a.kind, a.fleet)
					}
				case restoreFleet:
					if want := Fleet(s.p, s.parent); a.fleet == nil || !sameSpec(a.fleet, want) {
						t.Errorf("%s must write the generated spec", a.kind)
					}
				}
			}
			if !slices.Equal(kinds, c.actions) {
				t.Errorf("actions = %v, want %v", kinds, c.actions)
			}
			if pl.v.phase != c.phase || pl.v.reason != c.reason || !strings.Contains(pl.v.message, c.says) {
				t.Errorf("verdict = %s/%s: %s\nwant %s/%s saying %q", pl.v.phase, pl.v.reason, pl.v.message, c.phase, c.reason, c.says)
			}
			if pl.named != c.named || pl.storageURL != c.storage || pl.wait != c.wait {
				t.Errorf("named %v storage %q wait %s, want named %v storage %q wait %s", pl.named, pl.storageURL, pl.wait, c.named, c.storage, c.wait)
			}
			if s.child != nil && !equalFleets(s.child, live) {
				t.Error("decide changed the snapshot's fleet")
			}
		})
	}
}

func equalFleets(a, b *v1.CelldFleet) bool {
	return a.Generation == b.Generation && a.ResourceVersion == b.ResourceVersion && sameSpec(a, b) &&
		a.DeletionTimestamp.Equal(b.DeletionTimestamp)
}

// TestRequeue: a running preview wakes at its expiry, sooner when its plan waits; an expired or
// deleted one only when its plan waits.
func TestRequeue(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		stage   stage
		expires time.Duration
		wait    time.Duration
		want    time.Duration
	}{
		{running, time.Hour, 0, time.Hour},
		{running, time.Hour, resync, resync},
		{running, time.Millisecond, 0, time.Second}, // never a busy loop
		{running, time.Second * 10, resync, 10 * time.Second},
		{expired, -time.Hour, 0, 0},
		{expired, -time.Hour, 5 * time.Second, 5 * time.Second},
		{deleting, time.Hour, 5 * time.Second, 5 * time.Second},
		{deleting, time.Hour, 0, 0},
	}
	for _, c := range cases {
		s := &snapshot{stage: c.stage, now: now, expires: now.Add(c.expires)}
		if got := requeue(s, plan{wait: c.wait}); got != c.want {
			t.Errorf("stage %d, expires in %s, wait %s: requeue %s, want %s", c.stage, c.expires, c.wait, got, c.want)
		}
	}
}
