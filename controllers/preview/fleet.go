package preview

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The reference's small defaults of a preview fleet (reference-operator.md §1.18): one member
// that idles cheaply, sized for a developer's traffic, not for production.
var (
	defaultCPURequest    = resource.MustParse("25m")
	defaultMemoryRequest = resource.MustParse("64Mi")
	defaultMemoryLimit   = resource.MustParse("256Mi")
	defaultScratchReq    = resource.MustParse("64Mi")
	defaultScratchLimit  = resource.MustParse("512Mi")
	// maxLocalCache bounds celld's preserved cache: at most this, and a quarter of scratch.
	maxLocalCache int64 = 128 << 20
)

const (
	defaultResidentCells int32 = 8
	defaultIdleEvict     int32 = 30
)

// FleetName is the generated fleet of preview p: "p-" and its UID without dashes (34
// characters). It is also the fleet's storage prefix and the first label of its hostname, so
// a preview recreated under the same name (a new UID) gets a new fleet, prefix and URL, and
// never adopts the old ones.
func FleetName(p *v1.CelldPreview) string {
	return "p-" + strings.ReplaceAll(string(p.UID), "-", "")
}

// StorageURL is where a preview's application is deployed to: its prefix of the preview
// bucket.
func StorageURL(parent *v1.CelldFleet, fleet string) string {
	return "s3://" + parent.Spec.Previews.Storage.Bucket + "/" + fleet
}

// URL is a routed preview's address, SCHEME://FLEET.BASEDOMAIN, or "" when the parent does not
// route previews.
func URL(parent *v1.CelldFleet, fleet string) string {
	r := parent.Spec.Previews.Routing
	if r == nil {
		return ""
	}
	scheme := r.Scheme
	if scheme == "" {
		scheme = "https"
	}
	return scheme + "://" + fleet + "." + r.BaseDomain
}

// Fleet is the CelldFleet generated for preview p of parent (which has spec.previews): a
// Bucket fleet in the Ordered layout with one member, Relaxed placement in the pool's zone,
// its own prefix of the preview bucket bound to the parent (name and UID), the pool's endpoint
// and scratch, the small defaults of a preview (overridden by spec.previews.execution and
// scratch), when the parent routes previews, a route for FLEET.baseDomain through the pool's
// Gateway or Ingress, and p's seed as the parent authorizes it. It is controlled by p and
// labelled with p's UID. The result is a pure function of p's identity and the parent's spec,
// so the reconciler compares the live fleet with it and restores hand edits.
func Fleet(p *v1.CelldPreview, parent *v1.CelldFleet) *v1.CelldFleet {
	pv := parent.Spec.Previews
	name := FleetName(p)
	region := pv.Storage.Region
	if region == "" {
		region = parent.Spec.Storage.Region
	}
	zone := pv.Zone
	if zone == "" && len(parent.Spec.Placement.Zones) > 0 {
		zone = parent.Spec.Placement.Zones[0]
	}
	f := &v1.CelldFleet{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace,
			Name:      name,
			Labels:    map[string]string{v1.LabelPreviewUID: string(p.UID)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.GroupVersion.String(), Kind: "CelldPreview", Name: p.Name, UID: p.UID, Controller: new(true),
			}},
		},
		Spec: v1.CelldFleetSpec{
			Profile:            v1.ProfileBucket,
			BucketWorkload:     v1.BucketWorkloadOrdered,
			Replicas:           new(int32(1)),
			RuntimeImage:       firstOf(pv.RuntimeImage, parent.Spec.RuntimeImage),
			ServiceAccountName: firstOf(pv.ServiceAccountName, parent.Spec.ServiceAccountName),
			Storage: v1.StorageSpec{
				Bucket:          pv.Storage.Bucket,
				Region:          region,
				Prefix:          name,
				PreviewFleetRef: &v1.FleetReference{Name: parent.Name, UID: string(parent.UID)},
				Endpoint:        pv.Storage.Endpoint.DeepCopy(),
				Scratch:         scratch(pv.Scratch),
				Seed:            seedRequest(p, parent),
			},
			Placement: v1.PlacementSpec{Zones: []string{zone}, AZCount: 1, Mode: v1.PlacementRelaxed},
			Execution: execution(pv.Execution),
			Routing:   routing(pv.Routing, name),
		},
	}
	f.Spec.Env = env(f.Spec.Storage.Scratch)
	return f
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func scratch(s *v1.ScratchSpec) *v1.ScratchSpec {
	out := &v1.ScratchSpec{Request: new(defaultScratchReq.DeepCopy()), Limit: new(defaultScratchLimit.DeepCopy())}
	if s != nil && s.Limit != nil {
		out.Limit = new(s.Limit.DeepCopy())
		if s.Request == nil && out.Request.Cmp(*out.Limit) > 0 {
			out.Request = new(s.Limit.DeepCopy()) // a request never exceeds its limit
		}
	}
	if s != nil && s.Request != nil {
		out.Request = new(s.Request.DeepCopy())
	}
	return out
}

func execution(e *v1.PreviewExecution) *v1.ExecutionSpec {
	out := &v1.ExecutionSpec{
		CPURequest:       new(defaultCPURequest.DeepCopy()),
		MemoryRequest:    new(defaultMemoryRequest.DeepCopy()),
		MemoryLimit:      new(defaultMemoryLimit.DeepCopy()),
		MaxResidentCells: new(defaultResidentCells),
		IdleEvictSeconds: new(defaultIdleEvict),
	}
	if e == nil {
		return out
	}
	if e.CPURequest != nil {
		out.CPURequest = new(e.CPURequest.DeepCopy())
	}
	if e.MemoryRequest != nil {
		out.MemoryRequest = new(e.MemoryRequest.DeepCopy())
	}
	if e.MemoryLimit != nil {
		out.MemoryLimit = new(e.MemoryLimit.DeepCopy())
	}
	return out
}

// env is the preview's runtime limits (§1.18): one stateless isolate, eight requests in flight
// (four per cell), 1 MiB bodies, and a preserved cache of at most 128 MiB and a quarter of
// scratch.
func env(s *v1.ScratchSpec) []v1.EnvVar {
	cache := maxLocalCache
	if q := s.Limit.Value() / 4; q < cache {
		cache = q
	}
	lit := func(name, value string) v1.EnvVar { return v1.EnvVar{Name: name, Value: new(value)} }
	return []v1.EnvVar{
		lit("CELLD_MAX_STATELESS_ISOLATES", "1"),
		lit("CELLD_MAX_REQUESTS", "8"),
		lit("CELLD_MAX_CELL_REQUESTS", "4"),
		lit("CELLD_MAX_REQUEST_BODY_BYTES", "1048576"),
		lit("CELLD_LOCAL_CACHE_MAX_BYTES", strconv.FormatInt(cache, 10)),
	}
}

func routing(r *v1.PreviewRouting, fleet string) *v1.RoutingSpec {
	if r == nil {
		return nil
	}
	return &v1.RoutingSpec{
		Hostnames: []string{fleet + "." + r.BaseDomain},
		Source:    *r.Source.DeepCopy(),
		Gateway:   r.Gateway.DeepCopy(),
		Ingress:   r.Ingress.DeepCopy(),
	}
}
