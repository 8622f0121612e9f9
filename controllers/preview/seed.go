package preview

import (
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
// the parent does not approve the alias (admitSeed refuses such a preview before
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
