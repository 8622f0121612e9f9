package preview

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// seedSource is the source the parent approves under alias, or nil.
func seedSource(parent *v1.CelldFleet, alias string) *v1.SeedSource {
	sd := parent.Spec.Previews.Seeding
	if sd == nil {
		return nil
	}
	for i := range sd.Sources {
		if sd.Sources[i].Name == alias {
			return &sd.Sources[i]
		}
	}
	return nil
}

// seedRequest is the seed of p's generated fleet: p's selection, the executor and the source
// fleet the parent binds p's alias to, and p's identity. It is nil without spec.seed, or when
// the parent does not approve the alias (seedAuthorized refuses such a preview before
// anything is created).
func seedRequest(p *v1.CelldPreview, parent *v1.CelldFleet) *v1.SeedRequest {
	sd := p.Spec.Seed
	if sd == nil {
		return nil
	}
	src := seedSource(parent, sd.Source)
	if src == nil {
		return nil
	}
	alarms := sd.Alarms
	if alarms == "" {
		alarms = "Clear" // the API default, for an object stored without it
	}
	return &v1.SeedRequest{
		Executor:    parent.Spec.Previews.Seeding.Executor,
		Source:      sd.Source,
		SourceFleet: src.FleetRef,
		Alarms:      alarms,
		Objects:     append([]v1.SeedObject(nil), sd.Objects...),
		Preview:     v1.SeedPreviewRef{Name: p.Name, UID: string(p.UID)},
	}
}

// seedAuthorized checks a seeded preview before anything is created for it: the parent
// approves seeding and the alias, and the fleet the alias is bound to exists with the UID the
// grant names (a fleet recreated under that name is another fleet, and the grant does not pass
// to it). The executor checks the source again before it reads anything.
func (r *Reconciler) seedAuthorized(ctx context.Context, s *pass) bool {
	p, parent := s.p, s.parent
	refuse := func(format string, a ...any) bool {
		s.v = verdict{v1.PreviewBlocked, v1.ReasonSeedNotAuthorized, fmt.Sprintf(format, a...)}
		return false
	}
	sd := parent.Spec.Previews.Seeding
	if sd == nil {
		return refuse("CelldPreview %s/%s asks for a seed, and parent CelldFleet %s/%s does not authorize seeds (spec.previews.seeding); nothing was created. Create the preview without spec.seed, or against a parent whose platform administrator set spec.previews.seeding (docs/preview-seeding.md)",
			p.Namespace, p.Name, parent.Namespace, parent.Name)
	}
	src := seedSource(parent, p.Spec.Seed.Source)
	if src == nil {
		names := make([]string, 0, len(sd.Sources))
		for _, x := range sd.Sources {
			names = append(names, x.Name)
		}
		return refuse("CelldPreview %s/%s asks for a seed from source %q, which parent CelldFleet %s/%s does not approve (approved: %s); nothing was created. Create a new preview naming an approved source (spec.seed is fixed)",
			p.Namespace, p.Name, p.Spec.Seed.Source, parent.Namespace, parent.Name, strings.Join(names, ", "))
	}
	ref := src.FleetRef
	f := &v1.CelldFleet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, f)
	switch {
	case client.IgnoreNotFound(err) != nil:
		s.wait = resync
		return refuse("Seed source %q of parent CelldFleet %s/%s is fleet %s/%s, which the operator cannot read (%v); nothing was created. The operator must watch namespace %s",
			src.Name, parent.Namespace, parent.Name, ref.Namespace, ref.Name, err, ref.Namespace)
	case err != nil || string(f.UID) != ref.UID || f.DeletionTimestamp != nil:
		state := "does not exist"
		if err == nil && f.DeletionTimestamp != nil {
			state = "is being deleted"
		} else if err == nil {
			state = "now has UID " + string(f.UID)
		}
		s.wait = resync
		return refuse("Seed source %q of parent CelldFleet %s/%s is bound to fleet %s/%s with UID %s, which %s; a grant never passes to a fleet recreated under the same name, so nothing was created. The platform administrator grants the source again on a new parent (spec.previews is immutable)",
			src.Name, parent.Namespace, parent.Name, ref.Namespace, ref.Name, ref.UID, state)
	}
	return true
}
