package api

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func preview(ns, name string) *v1.CelldPreview {
	return &v1.CelldPreview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: "development"}, Source: "feature/login", Revision: "abc123"},
	}
}

// TestAPreviewIsDefaultedAndBoundedAtAdmission: ttlSeconds defaults to a day and must lie
// between a minute and a week; seeds name 1 to 100 distinct objects.
func TestAPreviewIsDefaultedAndBoundedAtAdmission(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	p := preview(ns, "defaults")
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.TTLSeconds != 86400 {
		t.Errorf("ttlSeconds defaults to 86400, got %d", p.Spec.TTLSeconds)
	}
	seed := func(objects ...v1.SeedObject) *v1.PreviewSeed {
		return &v1.PreviewSeed{Source: "production", Objects: objects}
	}
	for _, c := range []struct {
		name   string
		mutate func(*v1.CelldPreview)
		field  string // "" when admitted
	}{
		{"a one-minute TTL", func(p *v1.CelldPreview) { p.Spec.TTLSeconds = 60 }, ""},
		{"a seven-day TTL", func(p *v1.CelldPreview) { p.Spec.TTLSeconds = 604800 }, ""},
		{"a TTL under a minute", func(p *v1.CelldPreview) { p.Spec.TTLSeconds = 59 }, "spec.ttlSeconds"},
		{"a TTL over a week", func(p *v1.CelldPreview) { p.Spec.TTLSeconds = 604801 }, "spec.ttlSeconds"},
		{"a parent name that is not a fleet name", func(p *v1.CelldPreview) { p.Spec.FleetRef.Name = "Dev" }, "spec.fleetRef.name"},
		{"a seed", func(p *v1.CelldPreview) { p.Spec.Seed = seed(v1.SeedObject{Class: "Cart", ID: "cart-1"}) }, ""},
		{"a seed without objects", func(p *v1.CelldPreview) { p.Spec.Seed = seed() }, "spec.seed.objects"},
		{"a seed naming one object twice", func(p *v1.CelldPreview) {
			p.Spec.Seed = seed(v1.SeedObject{Class: "Cart", ID: "cart-1"}, v1.SeedObject{Class: "Cart", ID: "cart-1"})
		}, "spec.seed.objects"},
	} {
		p := preview(ns, "case")
		p.GenerateName, p.Name = "case-", ""
		c.mutate(p)
		err := k8s.Create(ctx, p)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: must be admitted, got %v", c.name, err)
		case c.field != "" && (err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field)):
			t.Errorf("%s: must be refused naming %s, got %v", c.name, c.field, err)
		}
	}
}

// TestAPreviewsParentTTLAndSeedAreFixed: fleetRef, ttlSeconds and seed (even its presence)
// never change after creation, each refused with the message naming the fix; source and
// revision may change.
func TestAPreviewsParentTTLAndSeedAreFixed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	p := preview(ns, "fixed")
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, message, path string
		mutate              func(*v1.CelldPreview)
	}{
		{"another parent", v1.MsgPreviewFleetRefImmutable, "spec.fleetRef", func(p *v1.CelldPreview) { p.Spec.FleetRef.Name = "other" }},
		{"another TTL", v1.MsgPreviewTTLImmutable, "spec.ttlSeconds", func(p *v1.CelldPreview) { p.Spec.TTLSeconds = 120 }},
		{"a seed added later", v1.MsgPreviewSeedImmutable, "spec.seed", func(p *v1.CelldPreview) {
			p.Spec.Seed = &v1.PreviewSeed{Source: "production", Objects: []v1.SeedObject{{Class: "Cart", ID: "cart-1"}}}
		}},
	} {
		changed := p.DeepCopy()
		c.mutate(changed)
		err := k8s.Update(ctx, changed)
		if err == nil || !strings.Contains(err.Error(), c.message) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: must be refused at %s with %q, got %v", c.name, c.path, c.message, err)
		}
	}
	changed := p.DeepCopy()
	changed.Spec.Source, changed.Spec.Revision = "feature/other", "def456"
	if err := k8s.Update(ctx, changed); err != nil {
		t.Errorf("source and revision are informational and may change: %v", err)
	}
}
