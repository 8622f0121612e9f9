package preview

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// stage is where a preview is in its life: running, past its TTL, or being deleted.
type stage int

const (
	running stage = iota
	expired
	deleting
)

// snapshot is everything one pass reads, before anything is decided. The reads a safety
// decision rests on go to the API server: the generated fleet before it is deleted, a fleet the
// cache has not seen after this reconciler recorded its creation, and the parent (and a seed's
// fleet) before a creation. The pool's
// arbitration and the restore's re-read on a conflict are the executor's (act.go).
type snapshot struct {
	p       *v1.CelldPreview
	stage   stage
	now     time.Time
	expires time.Time
	// fleet is the generated fleet's name.
	fleet string
	// child is the fleet at that name, nil when there is none; uncached when only the API
	// server has seen it yet.
	child    *v1.CelldFleet
	uncached bool
	// parent is the fleet spec.fleetRef names, read when it is in the preview's namespace
	// (parentErr: the read's error, or not read).
	parent    *v1.CelldFleet
	parentErr error
	// seedFleet is the fleet a seeded preview's approved source is bound to (seedErr: the
	// read's error), nil when not read.
	seedFleet *v1.CelldFleet
	seedErr   error
}

// errOtherNamespace stands for the parent read that is never made: a preview's parent is in
// its own namespace.
var errOtherNamespace = fmt.Errorf("the parent is in another namespace")

// observe reads what the pass needs about preview p. On an error the snapshot is what was read
// before it.
func (r *Reconciler) observe(ctx context.Context, p *v1.CelldPreview) (*snapshot, error) {
	now := r.now()
	s := &snapshot{p: p, now: now, fleet: FleetName(p),
		expires: p.CreationTimestamp.Add(time.Duration(ttl(p)) * time.Second)}
	switch {
	case p.DeletionTimestamp != nil:
		s.stage = deleting
	case !now.Before(s.expires):
		s.stage = expired
	}

	key := types.NamespacedName{Namespace: p.Namespace, Name: s.fleet}
	var err error
	if s.stage == running {
		s.child, err = readFleet(ctx, r.Client, key)
		if err == nil && s.child == nil && p.Annotations[v1.AnnotationPreviewFleet] != "" {
			// The cache may not have seen the fleet this reconciler just created: ask the API
			// server before calling it missing.
			s.child, err = readFleet(ctx, r.Direct, key)
			s.uncached = s.child != nil
		}
	} else {
		s.child, err = readFleet(ctx, r.Direct, key) // the delete rests on this read
	}
	if err != nil {
		return s, err // the status says what failed; the expiry is known
	}

	// A creation rests on the parent's checks (it exists, is not being deleted, approves the
	// seed's source): when one can follow, the parent and the seed's fleet are read from the
	// API server. The cache can still hold a parent whose deletion was accepted a moment ago,
	// since fleet and preview events arrive on separate watches.
	reader := client.Reader(r.Client)
	if s.stage == running && s.child == nil && p.Annotations[v1.AnnotationPreviewFleet] == "" {
		reader = r.Direct
	}
	ref := p.Spec.FleetRef
	s.parent, s.parentErr = &v1.CelldFleet{}, errOtherNamespace
	if ref.Namespace == "" || ref.Namespace == p.Namespace {
		s.parentErr = reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, s.parent)
	}
	if s.parentErr == nil && p.Spec.Seed != nil && s.parent.Spec.Previews != nil {
		if src := seedSource(s.parent, p.Spec.Seed.Source); src != nil {
			s.seedFleet = &v1.CelldFleet{}
			s.seedErr = reader.Get(ctx, types.NamespacedName{Namespace: src.FleetRef.Namespace, Name: src.FleetRef.Name}, s.seedFleet)
		}
	}
	return s, nil
}

// readFleet reads a fleet, nil when there is none.
func readFleet(ctx context.Context, c client.Client, key types.NamespacedName) (*v1.CelldFleet, error) {
	f := &v1.CelldFleet{}
	err := c.Get(ctx, key, f)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read CelldFleet %s: %w", key, err)
	}
	return f, nil
}

// parentWithPreviews is the parent when it exists and has spec.previews, else nil.
func (s *snapshot) parentWithPreviews() *v1.CelldFleet {
	if s.parentErr != nil || s.parent.Spec.Previews == nil {
		return nil
	}
	return s.parent
}

func ttl(p *v1.CelldPreview) int32 {
	if p.Spec.TTLSeconds == 0 {
		return 86400 // the API default, for an object stored without it
	}
	return p.Spec.TTLSeconds
}
