package preview

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/testsupport/corpus"
)

func parentFixture() *v1.CelldFleet {
	f := corpus.Persistent()
	f.Namespace, f.Name, f.UID = "apps", "development", "0f8c1a52-8a1e-4b7e-9a51-0b1c2d3e4f50"
	f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}}
	return f
}

func previewFixture() *v1.CelldPreview {
	return &v1.CelldPreview{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "pr-42", UID: "d43be4c2-a643-4fe6-bcad-ad249dc55493"},
		Spec: v1.CelldPreviewSpec{FleetRef: v1.PreviewFleetRef{Name: "development"}, TTLSeconds: 86400}}
}

func envOf(f *v1.CelldFleet, name string) string {
	for _, e := range f.Spec.Env {
		if e.Name == name && e.Value != nil {
			return *e.Value
		}
	}
	return ""
}

// TestAPreviewFleetIsSmallOrderedAndConfinedToItsPrefix: the generated fleet has the
// reference's shape and defaults, a prefix and name from the preview's full UID, and is valid.
func TestAPreviewFleetIsSmallOrderedAndConfinedToItsPrefix(t *testing.T) {
	p, parent := previewFixture(), parentFixture()
	f := Fleet(p, parent)
	if f.Name != "p-d43be4c2a6434fe6bcadad249dc55493" || f.Spec.Storage.Prefix != f.Name || strings.Contains(f.Spec.Storage.Prefix, "/") {
		t.Fatalf("the fleet and its one-segment prefix are named from the full UID: %s %s", f.Name, f.Spec.Storage.Prefix)
	}
	s := f.Spec
	checks := []struct {
		what string
		ok   bool
	}{
		{"profile Bucket, layout Ordered, one member", s.Profile == v1.ProfileBucket && s.BucketWorkload == v1.BucketWorkloadOrdered && *s.Replicas == 1},
		{"Relaxed placement in one zone (the parent's first when spec.previews has none)", s.Placement.Mode == v1.PlacementRelaxed && s.Placement.AZCount == 1 && s.Placement.Zones[0] == "us-east-1a"},
		{"the preview bucket, never the parent's", s.Storage.Bucket == "acme-previews"},
		{"bound to the parent by name and UID", s.Storage.PreviewFleetRef != nil && *s.Storage.PreviewFleetRef == v1.FleetReference{Name: "development", UID: string(parent.UID)}},
		{"25m CPU, 64Mi/256Mi memory", s.Execution.CPURequest.String() == "25m" && s.Execution.MemoryRequest.String() == "64Mi" && s.Execution.MemoryLimit.String() == "256Mi"},
		{"8 resident cells, 30 s idle eviction", *s.Execution.MaxResidentCells == 8 && *s.Execution.IdleEvictSeconds == 30},
		{"scratch 64Mi/512Mi", s.Storage.Scratch.Request.String() == "64Mi" && s.Storage.Scratch.Limit.String() == "512Mi"},
		{"the preview env limits", envOf(f, "CELLD_MAX_STATELESS_ISOLATES") == "1" && envOf(f, "CELLD_MAX_REQUESTS") == "8" && envOf(f, "CELLD_MAX_CELL_REQUESTS") == "4" && envOf(f, "CELLD_MAX_REQUEST_BODY_BYTES") == "1048576"},
		{"the cache is a quarter of 512Mi scratch", envOf(f, "CELLD_LOCAL_CACHE_MAX_BYTES") == "134217728"},
		{"no route without preview routing", s.Routing == nil && URL(parent, f.Name) == ""},
		{"labelled and controlled by the preview", f.Labels[v1.LabelPreviewUID] == string(p.UID) && len(f.OwnerReferences) == 1 && f.OwnerReferences[0].UID == p.UID && *f.OwnerReferences[0].Controller},
		{"the parent's image and ServiceAccount by default", s.RuntimeImage == parent.Spec.RuntimeImage && s.ServiceAccountName == parent.Spec.ServiceAccountName},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("the generated fleet must have %s: %+v", c.what, s)
		}
	}
	d := f.DeepCopy()
	d.Default()
	if errs := d.Validate(); len(errs) > 0 {
		t.Errorf("the generated fleet must be valid: %v", errs)
	}
	if again := Fleet(p, parent); again.Name != f.Name {
		t.Error("generation is a pure function of the preview and the parent")
	}
	other := previewFixture()
	other.UID = "11111111-2222-3333-4444-555555555555"
	if Fleet(other, parent).Spec.Storage.Prefix == f.Spec.Storage.Prefix {
		t.Error("a preview recreated under the same name (another UID) must get another prefix")
	}
}

func TestAPreviewFleetTakesThePoolsSettings(t *testing.T) {
	p, parent := previewFixture(), parentFixture()
	small := resource.MustParse("200Mi")
	parent.Spec.Previews = &v1.FleetPreviewsSpec{
		RuntimeImage:       corpus.Image,
		ServiceAccountName: "preview-runtime",
		Storage: v1.PreviewStorage{Bucket: "acme-previews", Region: "us-west-2",
			Endpoint: &v1.StorageEndpoint{URL: "http://store.previews.svc:9000", CredentialsSecretName: "preview-store"}},
		Zone:      "us-west-2b",
		Execution: &v1.PreviewExecution{CPURequest: new(resource.MustParse("50m"))},
		Scratch:   &v1.ScratchSpec{Limit: &small},
		Routing: &v1.PreviewRouting{BaseDomain: "previews.example.com", Scheme: "https",
			Source:  v1.RoutingSource{Namespace: "ingress-nginx", PodLabels: map[string]v1.LabelValue{"app": "ingress"}},
			Ingress: &v1.IngressRouting{ClassName: "nginx", TLSSecretName: "wildcard"}},
	}
	f := Fleet(p, parent)
	s := f.Spec
	switch {
	case s.Storage.Region != "us-west-2" || s.Placement.Zones[0] != "us-west-2b":
		t.Errorf("the pool's region and zone: %s %v", s.Storage.Region, s.Placement.Zones)
	case s.Storage.Endpoint == nil || s.Storage.Endpoint.URL != "http://store.previews.svc:9000" || s.Storage.Endpoint.CredentialsSecretName != "preview-store":
		t.Errorf("the pool's endpoint Secret: %+v", s.Storage.Endpoint)
	case s.ServiceAccountName != "preview-runtime":
		t.Errorf("the pool's ServiceAccount: %s", s.ServiceAccountName)
	case s.Execution.CPURequest.String() != "50m" || s.Execution.MemoryLimit.String() != "256Mi":
		t.Errorf("execution overrides what it sets and keeps the other defaults: %+v", s.Execution)
	case s.Storage.Scratch.Limit.String() != "200Mi" || s.Storage.Scratch.Request.String() != "64Mi":
		t.Errorf("the pool's scratch limit, with the default request: %+v", s.Storage.Scratch)
	case envOf(f, "CELLD_LOCAL_CACHE_MAX_BYTES") != "52428800":
		t.Errorf("the cache is a quarter of 200Mi scratch, got %s", envOf(f, "CELLD_LOCAL_CACHE_MAX_BYTES"))
	case s.Routing == nil || s.Routing.Hostnames[0] != f.Name+".previews.example.com" || s.Routing.Ingress.TLSSecretName != "wildcard" || s.Routing.Source.Namespace != "ingress-nginx":
		t.Errorf("the route of FLEET.baseDomain through the pool's Ingress: %+v", s.Routing)
	case URL(parent, f.Name) != "https://"+f.Name+".previews.example.com" || StorageURL(parent, f.Name) != "s3://acme-previews/"+f.Name:
		t.Errorf("URL %s, storage URL %s", URL(parent, f.Name), StorageURL(parent, f.Name))
	}
	d := f.DeepCopy()
	d.Default()
	if errs := d.Validate(); len(errs) > 0 {
		t.Errorf("the generated fleet must be valid: %v", errs)
	}
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
}

func TestAPreviewIsReadyWhenItsFleetAndRouteAre(t *testing.T) {
	fleet := func(gen, observed int64, conds ...metav1.Condition) *v1.CelldFleet {
		return &v1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "p-1", Generation: gen},
			Status: v1.CelldFleetStatus{ObservedGeneration: observed, Conditions: conds}}
	}
	ready := condition(v1.ConditionReady, metav1.ConditionTrue, v1.ReasonProvisioned)
	for _, c := range []struct {
		name    string
		f       *v1.CelldFleet
		routed  bool
		phase   v1.PreviewPhase
		reason  string
		mention string
	}{
		{"a fleet the operator has not observed", fleet(2, 1, ready), false, v1.PreviewPending, v1.ReasonFleetPending, "generation 2"},
		{"a blocked fleet", fleet(1, 1, condition(v1.ConditionBlocked, metav1.ConditionTrue, v1.ReasonServiceAccountMissing)), false, v1.PreviewBlocked, v1.ReasonFleetBlocked, "ServiceAccountMissing"},
		{"a provisioning fleet", fleet(1, 1, condition(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonProvisioning)), false, v1.PreviewPending, v1.ReasonFleetPending, "Provisioning"},
		{"a ready fleet", fleet(1, 1, ready), false, v1.PreviewReady, v1.ReasonPreviewReady, "apps/p-1 is Ready"},
		{"a ready fleet whose route is not", fleet(1, 1, ready, condition(v1.ConditionRoutingReady, metav1.ConditionUnknown, v1.ReasonAwaitingAddress)), true, v1.PreviewPending, v1.ReasonFleetPending, "AwaitingAddress"},
		{"a ready fleet and route", fleet(1, 1, ready, condition(v1.ConditionRoutingReady, metav1.ConditionTrue, v1.ReasonAddressAssigned)), true, v1.PreviewReady, v1.ReasonPreviewReady, "is Ready"},
	} {
		v := childVerdict(c.f, c.routed)
		if v.phase != c.phase || v.reason != c.reason || !strings.Contains(v.message, c.mention) {
			t.Errorf("%s: want %s/%s mentioning %q, got %s/%s: %s", c.name, c.phase, c.reason, c.mention, v.phase, v.reason, v.message)
		}
	}
}
