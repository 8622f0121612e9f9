package preview

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// admission is what the checks before a preview's fleet is created read: the preview, its
// parent as the cache read it (parentErr: the read's error; not read when the preview names a
// parent in another namespace), and for a seeded preview whose parent approves its source, the
// fleet that source is bound to (seedFleet, seedErr; nil when not read).
type admission struct {
	p         *v1.CelldPreview
	parent    *v1.CelldFleet
	parentErr error
	seedFleet *v1.CelldFleet
	seedErr   error
}

// admit is the chain of checks before anything is created for a preview, in order, each with
// its reason: the parent is in the preview's namespace (ParentInOtherNamespace), exists
// (ParentMissing), is not being deleted (ParentDeleting) and has spec.previews
// (PreviewsNotEnabled); a seeded preview's parent authorizes seeds and approves its source, and
// the fleet the source is bound to exists with the UID the grant names (SeedNotAuthorized). It
// returns the Blocked verdict of the first check that fails, and how soon to look again when
// the cause is something no watch of the preview reports; ok when every check passes.
func admit(in admission) (v verdict, wait time.Duration, ok bool) {
	p, ref, parent := in.p, in.p.Spec.FleetRef, in.parent
	blocked := func(reason, format string, a ...any) verdict {
		return verdict{v1.PreviewBlocked, reason, fmt.Sprintf(format, a...)}
	}
	switch {
	case ref.Namespace != "" && ref.Namespace != p.Namespace:
		return blocked(v1.ReasonParentInOtherNamespace, "CelldPreview %s/%s names parent fleet %s/%s; a preview runs in its parent's namespace. Create the preview in namespace %s (spec.fleetRef is fixed, so create a new one)",
			p.Namespace, p.Name, ref.Namespace, ref.Name, ref.Namespace), 0, false
	case in.parentErr != nil:
		return blocked(v1.ReasonParentMissing, "Parent CelldFleet %s/%s does not exist (%v); create it with spec.previews, or create a preview of an existing parent (spec.fleetRef is fixed)",
			p.Namespace, ref.Name, client.IgnoreNotFound(in.parentErr)), resync, false
	case parent.DeletionTimestamp != nil:
		return blocked(v1.ReasonParentDeleting, "Parent CelldFleet %s/%s is being deleted, so it takes no new previews (existing previews run until they expire or are deleted); create the preview against another parent",
			p.Namespace, ref.Name), 0, false
	case parent.Spec.Previews == nil:
		return blocked(v1.ReasonPreviewsNotEnabled, "Parent CelldFleet %s/%s has no spec.previews; a platform administrator must add it (docs/previews.md), or create the preview against a fleet that has it",
			p.Namespace, ref.Name), 0, false
	case p.Spec.Seed != nil:
		return admitSeed(in)
	}
	return verdict{}, 0, true
}

// admitSeed: the parent approves seeding and the alias, and the fleet the alias is bound to
// exists with the UID the grant names (a fleet recreated under that name is another fleet, and
// the grant does not pass to it). The executor checks the source again before it reads
// anything.
func admitSeed(in admission) (verdict, time.Duration, bool) {
	p, parent := in.p, in.parent
	refuse := func(wait time.Duration, format string, a ...any) (verdict, time.Duration, bool) {
		return verdict{v1.PreviewBlocked, v1.ReasonSeedNotAuthorized, fmt.Sprintf(format, a...)}, wait, false
	}
	sd := parent.Spec.Previews.Seeding
	if sd == nil {
		return refuse(0, "CelldPreview %s/%s asks for a seed, and parent CelldFleet %s/%s does not authorize seeds (spec.previews.seeding); nothing was created. Create the preview without spec.seed, or against a parent whose platform administrator set spec.previews.seeding (docs/preview-seeding.md)",
			p.Namespace, p.Name, parent.Namespace, parent.Name)
	}
	src := seedSource(parent, p.Spec.Seed.Source)
	if src == nil {
		names := make([]string, 0, len(sd.Sources))
		for _, x := range sd.Sources {
			names = append(names, x.Name)
		}
		return refuse(0, "CelldPreview %s/%s asks for a seed from source %q, which parent CelldFleet %s/%s does not approve (approved: %s); nothing was created. Create a new preview naming an approved source (spec.seed is fixed)",
			p.Namespace, p.Name, p.Spec.Seed.Source, parent.Namespace, parent.Name, strings.Join(names, ", "))
	}
	ref, f, err := src.FleetRef, in.seedFleet, in.seedErr
	if f == nil && err == nil {
		err = errors.New("not read") // the caller reads it whenever the parent approves the source
	}
	switch {
	case client.IgnoreNotFound(err) != nil:
		return refuse(resync, "Seed source %q of parent CelldFleet %s/%s is fleet %s/%s, which the operator cannot read (%v); nothing was created. The operator must watch namespace %s",
			src.Name, parent.Namespace, parent.Name, ref.Namespace, ref.Name, err, ref.Namespace)
	case err != nil || string(f.UID) != ref.UID || f.DeletionTimestamp != nil:
		state := "does not exist"
		if err == nil && f.DeletionTimestamp != nil {
			state = "is being deleted"
		} else if err == nil {
			state = "now has UID " + string(f.UID)
		}
		return refuse(resync, "Seed source %q of parent CelldFleet %s/%s is bound to fleet %s/%s with UID %s, which %s; a grant never passes to a fleet recreated under the same name, so nothing was created. The platform administrator grants the source again on a new parent (spec.previews is immutable)",
			src.Name, parent.Namespace, parent.Name, ref.Namespace, ref.Name, ref.UID, state)
	}
	return verdict{}, 0, true
}
