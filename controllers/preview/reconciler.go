package preview

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
)

// FieldOwner is the field manager of the preview reconciler's writes.
const FieldOwner = "celld-operator"

// resync re-examines a preview that waits for nothing a watch sees (a parent that has not
// appeared, a pool conflict somebody may resolve).
const resync = 30 * time.Second

// Reconciler drives CelldPreviews. Previews, fleets and parents are read from the manager's
// cache (Client); what safety depends on goes to the API server (Direct): the pool
// arbitration, the check that nothing exists at the generated fleet's name before it is
// created, and the re-read before the fleet is deleted.
type Reconciler struct {
	Client client.Client
	Direct client.Client
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Reconcile drives one CelldPreview one step: its finalizer, its expiry or deletion (the
// generated fleet is deleted through its own finalizer, routing first), and otherwise the
// parent's preview pool and the generated fleet, whose hand edits it restores. Status is a
// projection of what the pass found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1.CelldPreview{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	expires := p.CreationTimestamp.Add(time.Duration(ttl(p)) * time.Second)
	s := &pass{p: p, fleet: FleetName(p), now: now, expires: expires}

	var err error
	switch {
	case p.DeletionTimestamp != nil:
		err = r.deleting(ctx, s)
	case !now.Before(expires):
		err = r.expired(ctx, s)
	default:
		err = r.running(ctx, s)
	}
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: time.Second}, nil // a fresh read decides again
	}
	if err != nil {
		s.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Retrying after an error: %v", err)}
	}
	if p.DeletionTimestamp == nil || s.v.phase != "" {
		if serr := r.report(ctx, s); serr != nil && err == nil && !apierrors.IsNotFound(serr) {
			err = serr
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeue()}, nil
}

// pass is what one reconcile found.
type pass struct {
	p       *v1.CelldPreview
	fleet   string
	now     time.Time
	expires time.Time
	parent  *v1.CelldFleet
	child   *v1.CelldFleet
	v       verdict
	// storageURL and url are known once a parent (or the child) says where the preview lives.
	storageURL, url string
	wait            time.Duration
}

func (s *pass) requeue() time.Duration {
	var after time.Duration
	if s.v.phase != v1.PreviewExpired && s.p.DeletionTimestamp == nil {
		after = max(s.expires.Sub(s.now), time.Second) // wake at expiry
	}
	if s.wait > 0 && (after == 0 || s.wait < after) {
		after = s.wait
	}
	return after
}

func ttl(p *v1.CelldPreview) int32 {
	if p.Spec.TTLSeconds == 0 {
		return 86400 // the API default, for an object stored without it
	}
	return p.Spec.TTLSeconds
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// deleting deletes the generated fleet (its own finalizer shuts it down, routing first) and
// releases the preview once the fleet is gone.
func (r *Reconciler) deleting(ctx context.Context, s *pass) error {
	gone, err := r.removeFleet(ctx, s)
	if err != nil || !gone {
		s.v = verdict{v1.PreviewDeleting, v1.ReasonPreviewDeleting, fmt.Sprintf("Waiting for CelldFleet %s/%s to shut down through its finalizer before the preview is released", s.p.Namespace, s.fleet)}
		s.wait = 5 * time.Second
		return err
	}
	if !controllerutil.ContainsFinalizer(s.p, v1.FinalizerPreviewProtection) {
		return nil
	}
	patch := client.MergeFromWithOptions(s.p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(s.p, v1.FinalizerPreviewProtection)
	if err := r.Client.Patch(ctx, s.p, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from CelldPreview %s/%s: %w", v1.FinalizerPreviewProtection, s.p.Namespace, s.p.Name, err)
	}
	logf.FromContext(ctx).Info("released preview", "preview", s.p.Name, "why", "its generated fleet is gone")
	return nil
}

// expired deletes the generated fleet once the TTL has passed; the preview stays as Expired.
func (r *Reconciler) expired(ctx context.Context, s *pass) error {
	r.describe(ctx, s)
	gone, err := r.removeFleet(ctx, s)
	when := s.expires.UTC().Format(time.RFC3339)
	switch {
	case err != nil:
	case gone:
		s.v = verdict{v1.PreviewExpired, v1.ReasonPreviewExpired, fmt.Sprintf("The preview expired at %s and CelldFleet %s/%s is deleted; its prefix data and reservations are retained. Delete the preview when done, or create a new one", when, s.p.Namespace, s.fleet)}
	default:
		s.v = verdict{v1.PreviewExpired, v1.ReasonPreviewExpired, fmt.Sprintf("The preview expired at %s; CelldFleet %s/%s is shutting down through its finalizer", when, s.p.Namespace, s.fleet)}
		s.wait = 5 * time.Second
	}
	return err
}

// removeFleet deletes the generated fleet if it exists and belongs to this preview, and
// reports whether it is gone. A fleet at the name that is not the preview's is left alone.
func (r *Reconciler) removeFleet(ctx context.Context, s *pass) (bool, error) {
	child := &v1.CelldFleet{}
	err := r.Direct.Get(ctx, types.NamespacedName{Namespace: s.p.Namespace, Name: s.fleet}, child)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read CelldFleet %s/%s: %w", s.p.Namespace, s.fleet, err)
	}
	if !ours(child, s.p) {
		return true, nil
	}
	s.child = child
	if child.DeletionTimestamp != nil {
		return false, nil
	}
	uid := child.UID
	if err := r.Direct.Delete(ctx, child, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete CelldFleet %s/%s: %w", s.p.Namespace, s.fleet, err)
	}
	logf.FromContext(ctx).Info("deleted preview fleet", "preview", s.p.Name, "fleet", s.fleet, "why", "the preview expired or is being deleted")
	return false, nil
}

// ours: the fleet is the one generated for p (its label carries p's UID).
func ours(f *v1.CelldFleet, p *v1.CelldPreview) bool {
	return f.Labels[v1.LabelPreviewUID] == string(p.UID)
}

// describe fills in where the preview lives from its parent, when the parent can say.
func (r *Reconciler) describe(ctx context.Context, s *pass) {
	parent := &v1.CelldFleet{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.p.Namespace, Name: s.p.Spec.FleetRef.Name}, parent); err == nil && parent.Spec.Previews != nil {
		s.parent = parent
		s.storageURL, s.url = StorageURL(parent, s.fleet), URL(parent, s.fleet)
	}
}

// running: the finalizer, the parent's checks, the pool and the generated fleet.
func (r *Reconciler) running(ctx context.Context, s *pass) error {
	if err := r.finalizer(ctx, s); err != nil {
		return err
	}
	child := &v1.CelldFleet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.p.Namespace, Name: s.fleet}, child)
	switch {
	case err == nil && !ours(child, s.p):
		s.v = verdict{v1.PreviewBlocked, v1.ReasonFleetMissing, fmt.Sprintf("CelldFleet %s/%s exists and is not this preview's (label %s); a preview never adopts a fleet. Delete this preview and create a new one", s.p.Namespace, s.fleet, v1.LabelPreviewUID)}
		return nil
	case err == nil:
		s.child = child
		return r.converge(ctx, s)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read CelldFleet %s/%s: %w", s.p.Namespace, s.fleet, err)
	}
	if s.p.Annotations[v1.AnnotationPreviewFleet] != "" {
		// The cache may not have seen the fleet this reconciler just created: ask the API
		// server before calling it missing.
		if err := r.Direct.Get(ctx, types.NamespacedName{Namespace: s.p.Namespace, Name: s.fleet}, child); err == nil {
			s.wait = time.Second
			s.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Created CelldFleet %s/%s; waiting for it to be Ready", s.p.Namespace, s.fleet)}
			return nil
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read CelldFleet %s/%s: %w", s.p.Namespace, s.fleet, err)
		}
		r.describe(ctx, s)
		s.v = verdict{v1.PreviewBlocked, v1.ReasonFleetMissing, fmt.Sprintf("CelldFleet %s/%s of this preview is missing (deleted by hand, or its creation's outcome was lost); it is never recreated on the same prefix, whose data and reservation are retained. Delete this preview and create a new one", s.p.Namespace, s.fleet)}
		return nil
	}
	if !r.parentAdmits(ctx, s) {
		return nil
	}
	if !r.pool(ctx, s) {
		return nil
	}
	return r.create(ctx, s)
}

// finalizer adds the preview-protection finalizer, so the preview outlives its fleet.
func (r *Reconciler) finalizer(ctx context.Context, s *pass) error {
	if controllerutil.ContainsFinalizer(s.p, v1.FinalizerPreviewProtection) {
		return nil
	}
	patch := client.MergeFromWithOptions(s.p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(s.p, v1.FinalizerPreviewProtection)
	if err := r.Client.Patch(ctx, s.p, patch); err != nil {
		return fmt.Errorf("add finalizer %s to CelldPreview %s/%s: %w", v1.FinalizerPreviewProtection, s.p.Namespace, s.p.Name, err)
	}
	return nil
}

// parentAdmits reads what the checks before a creation need (the parent, and for a seeded
// preview the fleet its source is bound to) and asks admit, the pure chain of those checks.
func (r *Reconciler) parentAdmits(ctx context.Context, s *pass) bool {
	in := admission{p: s.p, parent: &v1.CelldFleet{}}
	p, ref := s.p, s.p.Spec.FleetRef
	if ref.Namespace == "" || ref.Namespace == p.Namespace {
		in.parentErr = r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, in.parent)
	}
	if in.parentErr == nil && p.Spec.Seed != nil && in.parent.Spec.Previews != nil && in.parent.Spec.Previews.Seeding != nil {
		if src := seedSource(in.parent, p.Spec.Seed.Source); src != nil {
			in.seedFleet = &v1.CelldFleet{}
			in.seedErr = r.Client.Get(ctx, types.NamespacedName{Namespace: src.FleetRef.Namespace, Name: src.FleetRef.Name}, in.seedFleet)
		}
	}
	v, wait, ok := admit(in)
	if !ok {
		s.v, s.wait = v, wait
		return false
	}
	s.parent = in.parent
	s.storageURL, s.url = StorageURL(in.parent, s.fleet), URL(in.parent, s.fleet)
	return true
}

// pool gets or creates the parent's preview pool, the whole preview bucket reserved to the
// parent UID, and verifies it. The first preview of a parent creates it; Create arbitrates.
func (r *Reconciler) pool(ctx context.Context, s *pass) bool {
	want := reservation.DesiredPool(s.parent)
	res, clash, err := reservation.Claim(ctx, r.Direct, want)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
		s.wait = resync
	case clash != nil:
		why = fmt.Sprintf("CelldStorageReservation %s reserves the %s to %s", clash.Name, reservation.ScopeOf(clash), reservation.Holder(clash))
	default:
		if ok, w := reservation.PoolMatches(res, s.parent); !ok {
			why = fmt.Sprintf("CelldStorageReservation %s: %s", res.Name, w)
		}
	}
	if why == "" {
		return true
	}
	s.v = verdict{v1.PreviewBlocked, v1.ReasonStorageScopeConflict, fmt.Sprintf("The preview bucket %s of parent CelldFleet %s/%s cannot be its preview pool: %s; nothing was created. Reservations are permanent: the parent's spec.previews needs another bucket, so use another parent",
		want.Spec.Bucket, s.parent.Namespace, s.parent.Name, why)}
	return false
}

// create records the intent on the preview, then creates the generated fleet. A fleet the
// API server would refuse is found by a dry run first, so the intent is written only for a
// create that can succeed; a create whose outcome is then lost is FleetMissing, never a
// second fleet on the same prefix.
func (r *Reconciler) create(ctx context.Context, s *pass) error {
	want := Fleet(s.p, s.parent)
	d := want.DeepCopy()
	d.Default()
	if errs := d.Validate(); len(errs) > 0 {
		s.v = verdict{v1.PreviewBlocked, v1.ReasonInvalidConfiguration, fmt.Sprintf("The fleet generated from spec.previews of parent CelldFleet %s/%s is invalid: %v; the platform administrator must fix spec.previews (use another parent)", s.parent.Namespace, s.parent.Name, errs.ToAggregate())}
		return nil
	}
	if err := r.Direct.Create(ctx, want.DeepCopy(), client.DryRunAll); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CelldFleet %s/%s appeared before the preview created it: %w", want.Namespace, want.Name, err)
		}
		s.v = verdict{v1.PreviewBlocked, v1.ReasonInvalidConfiguration, fmt.Sprintf("The API server refuses the fleet generated for this preview from parent CelldFleet %s/%s: %v; fix the parent's spec.previews or what refused it", s.parent.Namespace, s.parent.Name, err)}
		return nil
	}
	patch := client.MergeFromWithOptions(s.p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.p.Annotations == nil {
		s.p.Annotations = map[string]string{}
	}
	s.p.Annotations[v1.AnnotationPreviewFleet] = want.Name
	if err := r.Client.Patch(ctx, s.p, patch); err != nil {
		return fmt.Errorf("record the creation of CelldFleet %s on CelldPreview %s/%s: %w", want.Name, s.p.Namespace, s.p.Name, err)
	}
	if err := r.Direct.Create(ctx, want); err != nil {
		return fmt.Errorf("create CelldFleet %s/%s: %w", want.Namespace, want.Name, err)
	}
	logf.FromContext(ctx).Info("created preview fleet", "preview", s.p.Name, "fleet", want.Name, "why", "a new preview of parent "+s.parent.Name)
	s.child = want
	s.v = verdict{v1.PreviewPending, v1.ReasonFleetPending, fmt.Sprintf("Created CelldFleet %s/%s; waiting for it to be Ready", want.Namespace, want.Name)}
	return nil
}

// converge restores hand edits of the generated fleet while the parent that generated it is
// there (spec.previews is immutable, so the generation is stable), and projects its status.
func (r *Reconciler) converge(ctx context.Context, s *pass) error {
	child := s.child
	parent := &v1.CelldFleet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.p.Namespace, Name: s.p.Spec.FleetRef.Name}, parent)
	sameParent := err == nil && parent.Spec.Previews != nil && child.Spec.Storage.PreviewFleetRef != nil &&
		string(parent.UID) == child.Spec.Storage.PreviewFleetRef.UID
	if sameParent {
		s.parent = parent
		if want := Fleet(s.p, parent); !sameSpec(child, want) && child.DeletionTimestamp == nil {
			restored, err := r.restore(ctx, s, child, want, parent)
			if err != nil {
				return err
			}
			if restored != nil {
				logf.FromContext(ctx).Info("restored preview fleet", "preview", s.p.Name, "fleet", child.Name, "why", "a generated fleet is not edited by hand")
				s.child = restored
			}
		}
	}
	s.storageURL = "s3://" + child.Spec.Storage.Bucket + "/" + child.Spec.Storage.Prefix
	if h := child.Spec.Routing; h != nil && len(h.Hostnames) > 0 && s.parent != nil {
		s.url = URL(s.parent, s.fleet)
	}
	s.v = childVerdict(s.child, child.Spec.Routing != nil)
	if !sameParent && s.v.ready() {
		s.v.message += fmt.Sprintf(". Parent CelldFleet %s/%s is gone or was replaced: no new previews of it can be created, and this one runs until it expires or is deleted", s.p.Namespace, s.p.Spec.FleetRef.Name)
	}
	return nil
}

// restoreAttempts bounds how often a generated fleet's restore is tried again after the
// fleet's resourceVersion moved while nothing that matters to the restore changed.
const restoreAttempts = 5

// restore writes the generated spec want onto the fleet child, read from the cache, with an
// Update carrying child's resourceVersion, so labels, annotations and finalizers others set are
// kept. What the restore rests on is the spec alone (and that the fleet is this preview's, of
// this parent, not being deleted); the fleet's status is written all the time by the fleet
// reconciler and the application observer, and each such write moves the resourceVersion. So a
// conflict is not the end: the fleet is read again from the API server and, while it still is
// this preview's fleet of this parent, not being deleted and still not the generated spec, the
// spec is written again on that read. It returns the restored fleet, or nil when the fresh read
// needs no restore; past restoreAttempts, the conflict (the next pass decides again).
func (r *Reconciler) restore(ctx context.Context, s *pass, child, want, parent *v1.CelldFleet) (*v1.CelldFleet, error) {
	uid := child.UID
	live := child
	for attempt := 1; ; attempt++ {
		restored := live.DeepCopy()
		restored.Spec = want.Spec
		err := r.Direct.Update(ctx, restored)
		switch {
		case err == nil:
			return restored, nil
		case !apierrors.IsConflict(err) || attempt >= restoreAttempts:
			return nil, fmt.Errorf("restore the generated spec of CelldFleet %s/%s: %w", child.Namespace, child.Name, err)
		}
		live = &v1.CelldFleet{}
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(child), live); apierrors.IsNotFound(err) {
			return nil, nil // gone: the next pass finds it missing
		} else if err != nil {
			return nil, fmt.Errorf("re-read CelldFleet %s/%s after its restore met a conflict: %w", child.Namespace, child.Name, err)
		}
		if live.UID != uid || !ours(live, s.p) || live.DeletionTimestamp != nil || live.Spec.Storage.PreviewFleetRef == nil ||
			live.Spec.Storage.PreviewFleetRef.UID != string(parent.UID) || sameSpec(live, want) {
			return nil, nil // the next pass decides on what it finds
		}
		logf.FromContext(ctx).Info("generated fleet changed since it was read (its spec still differs from the generated one); restoring it on the fresh read",
			"preview", s.p.Name, "fleet", child.Name, "resourceVersion", live.ResourceVersion)
	}
}

// sameSpec: the live fleet's spec is the generated one, both defaulted as stored.
func sameSpec(live, want *v1.CelldFleet) bool {
	a, b := live.DeepCopy(), want.DeepCopy()
	a.Default()
	b.Default()
	return equality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// report projects the pass on the preview's status, written only when it changed.
func (r *Reconciler) report(ctx context.Context, s *pass) error {
	p := s.p
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.Phase = s.v.phase
	st.ParentFleetName = p.Spec.FleetRef.Name
	st.ExpiresAt = &metav1.Time{Time: s.expires}
	if s.child != nil || p.Annotations[v1.AnnotationPreviewFleet] != "" {
		st.FleetName = s.fleet
	}
	if s.storageURL != "" && st.FleetName != "" {
		st.StorageURL = s.storageURL
	}
	if s.url != "" && st.FleetName != "" {
		st.URL = s.url
	}
	status := metav1.ConditionFalse
	if s.v.ready() {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: status,
		Reason: s.v.reason, Message: s.v.message, ObservedGeneration: p.Generation})
	if equality.Semantic.DeepEqual(st, &p.Status) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Status = *st
	if err := r.Client.Status().Patch(ctx, p, patch, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("write the status of CelldPreview %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
