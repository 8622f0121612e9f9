package preview

import (
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// actionKind names what the executor does to the cluster; the executor logs it and wraps its
// errors with it.
type actionKind string

const (
	// addFinalizer puts the preview-protection finalizer on the preview, so it outlives its
	// fleet.
	addFinalizer actionKind = "add the preview-protection finalizer"
	// deleteFleet deletes the generated fleet (bound to its UID); its own finalizer shuts it
	// down, routing first.
	deleteFleet actionKind = "delete the generated fleet"
	// release removes the preview-protection finalizer once the fleet is gone.
	release actionKind = "remove the preview-protection finalizer"
	// claimPool gets or creates the parent's preview pool and verifies it; a pool that is not
	// the parent's refuses the creation (StorageScopeConflict).
	claimPool actionKind = "claim the preview pool"
	// tryFleet asks the API server, by a dry run, whether it accepts the generated fleet; a
	// refusal refuses the creation (InvalidConfiguration).
	tryFleet actionKind = "dry-run the generated fleet"
	// recordIntent records on the preview that its fleet is being created, before the create,
	// so a create whose outcome is lost is FleetMissing and never a second fleet.
	recordIntent actionKind = "record the fleet's creation on the preview"
	// createFleet creates the generated fleet.
	createFleet actionKind = "create the generated fleet"
	// restoreFleet writes the generated spec back onto a fleet edited by hand.
	restoreFleet actionKind = "restore the generated fleet's spec"
)

// action is one step of a plan: what, on which fleet (the live one to delete or restore, the
// generated one to create), and why, for the log.
type action struct {
	kind  actionKind
	fleet *v1.CelldFleet
	why   string
}

// plan is what a pass decides: the actions in order, and what the status says when they all
// succeed. An action of the creation (claimPool, tryFleet) may refuse; the executor's refusal
// then replaces the verdict.
type plan struct {
	actions []action
	// v is the verdict; an empty phase writes no status (a deleted preview being released).
	v verdict
	// wait is how soon to look again when nothing a watch sees will wake the preview.
	wait time.Duration
	// parent is the parent whose spec.previews the fleet is (or is to be) generated from, nil
	// when there is none.
	parent *v1.CelldFleet
	// named: the status names the generated fleet; storageURL and url say where it lives.
	named           bool
	storageURL, url string
}

// decide is the preview reconciler's one decision: a pure function of what the pass read.
func decide(s *snapshot) plan {
	switch s.stage {
	case deleting:
		return decideDeleting(s)
	case expired:
		return decideExpired(s)
	}
	var pl plan
	if !controllerutil.ContainsFinalizer(s.p, v1.FinalizerPreviewProtection) {
		pl.actions = append(pl.actions, action{kind: addFinalizer, why: "a preview outlives its fleet"})
	}
	p, ns := s.p, s.p.Namespace
	recorded := p.Annotations[v1.AnnotationPreviewFleet] != ""
	pl.named = recorded
	switch {
	case s.child != nil && !ours(s.child, p):
		pl.v = verdict{v1.PreviewBlocked, v1.ReasonFleetMissing, fmt.Sprintf("CelldFleet %s/%s exists and is not this preview's (label %s); a preview never adopts a fleet. Delete this preview and create a new one", ns, s.fleet, v1.LabelPreviewUID)}
	case s.child != nil && s.uncached:
		pl.named, pl.wait = true, time.Second
		pl.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Created CelldFleet %s/%s; waiting for it to be Ready", ns, s.fleet)}
	case s.child != nil:
		converge(s, &pl)
	case recorded:
		describe(s, &pl)
		pl.v = verdict{v1.PreviewBlocked, v1.ReasonFleetMissing, fmt.Sprintf("CelldFleet %s/%s of this preview is missing (deleted by hand, or its creation's outcome was lost); it is never recreated on the same prefix, whose data and reservation are retained. Delete this preview and create a new one", ns, s.fleet)}
	default:
		create(s, &pl)
	}
	return pl
}

// decideDeleting: the generated fleet is deleted and, once it is gone, the preview released.
// A fleet at the name that is not the preview's is left alone.
func decideDeleting(s *snapshot) plan {
	var pl plan
	if s.child == nil || !ours(s.child, s.p) {
		if controllerutil.ContainsFinalizer(s.p, v1.FinalizerPreviewProtection) {
			pl.actions = append(pl.actions, action{kind: release, why: "its generated fleet is gone"})
		}
		return pl // no status: the preview goes
	}
	pl.named = true
	if s.child.DeletionTimestamp == nil {
		pl.actions = append(pl.actions, action{kind: deleteFleet, fleet: s.child, why: "the preview is being deleted"})
	}
	pl.v = verdict{v1.PreviewDeleting, v1.ReasonPreviewDeleting, fmt.Sprintf("Waiting for CelldFleet %s/%s to shut down through its finalizer before the preview is released", s.p.Namespace, s.fleet)}
	pl.wait = 5 * time.Second
	return pl
}

// decideExpired: past the TTL the generated fleet is deleted; the preview stays, Expired.
func decideExpired(s *snapshot) plan {
	var pl plan
	describe(s, &pl)
	pl.named = s.p.Annotations[v1.AnnotationPreviewFleet] != ""
	when, ns := s.expires.UTC().Format(time.RFC3339), s.p.Namespace
	if s.child == nil || !ours(s.child, s.p) {
		pl.v = verdict{v1.PreviewExpired, v1.ReasonPreviewExpired, fmt.Sprintf("The preview expired at %s and CelldFleet %s/%s is deleted; its prefix data and reservations are retained. Delete the preview when done, or create a new one", when, ns, s.fleet)}
		return pl
	}
	pl.named = true
	if s.child.DeletionTimestamp == nil {
		pl.actions = append(pl.actions, action{kind: deleteFleet, fleet: s.child, why: "the preview expired"})
	}
	pl.v = verdict{v1.PreviewExpired, v1.ReasonPreviewExpired, fmt.Sprintf("The preview expired at %s; CelldFleet %s/%s is shutting down through its finalizer", when, ns, s.fleet)}
	pl.wait = 5 * time.Second
	return pl
}

// describe says where the preview lives from its parent, when the parent can say.
func describe(s *snapshot, pl *plan) {
	if parent := s.parentWithPreviews(); parent != nil {
		pl.parent = parent
		pl.storageURL, pl.url = StorageURL(parent, s.fleet), URL(parent, s.fleet)
	}
}

// create: the checks before a creation (admit), the generated fleet's own validation, then the
// pool, the API server's dry run, the recorded intent and the create.
func create(s *snapshot, pl *plan) {
	v, wait, ok := admit(admission{p: s.p, parent: s.parent, parentErr: s.parentErr, seedFleet: s.seedFleet, seedErr: s.seedErr})
	if !ok {
		pl.v, pl.wait = v, wait
		return
	}
	parent := s.parent
	pl.parent = parent
	want := Fleet(s.p, parent)
	d := want.DeepCopy()
	d.Default()
	if errs := d.Validate(); len(errs) > 0 {
		pl.v = verdict{v1.PreviewBlocked, v1.ReasonInvalidConfiguration, fmt.Sprintf("The fleet generated from spec.previews of parent CelldFleet %s/%s is invalid: %v; the platform administrator must fix spec.previews (use another parent)", parent.Namespace, parent.Name, errs.ToAggregate())}
		return
	}
	pl.storageURL, pl.url = StorageURL(parent, s.fleet), URL(parent, s.fleet)
	why := "a new preview of parent " + parent.Name
	pl.actions = append(pl.actions,
		action{kind: claimPool, why: why},
		action{kind: tryFleet, fleet: want, why: why},
		action{kind: recordIntent, fleet: want, why: why},
		action{kind: createFleet, fleet: want, why: why})
	pl.named = true
	pl.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Created CelldFleet %s/%s; waiting for it to be Ready", want.Namespace, want.Name)}
}

// converge: while the parent that generated the fleet is there (spec.previews is immutable, so
// the generation is stable), a hand edit of the fleet is restored; the verdict is the fleet's
// own state.
func converge(s *snapshot, pl *plan) {
	child, ns := s.child, s.p.Namespace
	pl.named = true
	parent := s.parentWithPreviews()
	sameParent := parent != nil && child.Spec.Storage.PreviewFleetRef != nil && string(parent.UID) == child.Spec.Storage.PreviewFleetRef.UID
	pl.storageURL = "s3://" + child.Spec.Storage.Bucket + "/" + child.Spec.Storage.Prefix
	if !sameParent {
		pl.v = childVerdict(child, child.Spec.Routing != nil)
		if pl.v.ready() {
			pl.v.message += fmt.Sprintf(". Parent CelldFleet %s/%s is gone or was replaced: no new previews of it can be created, and this one runs until it expires or is deleted", ns, s.p.Spec.FleetRef.Name)
		}
		return
	}
	pl.parent = parent
	if h := child.Spec.Routing; h != nil && len(h.Hostnames) > 0 {
		pl.url = URL(parent, s.fleet)
	}
	if want := Fleet(s.p, parent); !sameSpec(child, want) && child.DeletionTimestamp == nil {
		pl.actions = append(pl.actions, action{kind: restoreFleet, fleet: want, why: "a generated fleet is not edited by hand"})
		// A spec write moves the fleet's generation: it is Pending until it reports on it.
		pl.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("CelldFleet %s/%s was edited by hand and its generated spec is being restored; waiting for it to be Ready on that spec", ns, s.fleet)}
		return
	}
	pl.v = childVerdict(child, child.Spec.Routing != nil)
}

// ours: the fleet is the one generated for p (its label carries p's UID).
func ours(f *v1.CelldFleet, p *v1.CelldPreview) bool {
	return f.Labels[v1.LabelPreviewUID] == string(p.UID)
}
