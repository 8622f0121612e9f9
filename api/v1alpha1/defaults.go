package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// Defaults of the fleet API. The CRD applies the same values at admission; Default applies
// them again in the reconciler, so an object stored by an older CRD renders the same way.
const (
	DefaultReplicas                = 3
	DefaultSizeGiB                 = 10
	DefaultShutdownSeconds         = 20
	DefaultTerminationGraceSeconds = 30
	DefaultControlPlaneNamespace   = "istio-system"
)

var (
	defaultCPURequest    = resource.MustParse("250m")
	defaultMemoryRequest = resource.MustParse("512Mi")
	defaultMemoryLimit   = resource.MustParse("1Gi")
)

// Default fills every defaulted field that is unset, in place.
func (f *CelldFleet) Default() {
	s := &f.Spec
	if s.BucketWorkload == "" {
		s.BucketWorkload = BucketWorkloadDeployment
	}
	if s.Replicas == nil {
		s.Replicas = new(int32(DefaultReplicas))
	}
	if s.Storage.SizeGiB == 0 {
		s.Storage.SizeGiB = DefaultSizeGiB
	}
	if s.Placement.Mode == "" {
		s.Placement.Mode = PlacementStrict
	}
	if s.Execution == nil {
		s.Execution = &ExecutionSpec{}
	}
	defaultQuantity(&s.Execution.CPURequest, defaultCPURequest)
	defaultQuantity(&s.Execution.MemoryRequest, defaultMemoryRequest)
	defaultQuantity(&s.Execution.MemoryLimit, defaultMemoryLimit)
	if s.Lifecycle == nil {
		s.Lifecycle = &LifecycleSpec{}
	}
	if s.Lifecycle.ShutdownSeconds == 0 {
		s.Lifecycle.ShutdownSeconds = DefaultShutdownSeconds
	}
	if s.Lifecycle.TerminationGraceSeconds == 0 {
		s.Lifecycle.TerminationGraceSeconds = DefaultTerminationGraceSeconds
	}
	if s.Capacity != nil {
		s.Capacity.Default()
	}
	if s.Export != nil && s.Export.Sink == "" {
		s.Export.Sink = ExportSinkBucket
	}
	if s.Mesh != nil && s.Mesh.Istio != nil {
		if s.Mesh.Istio.ControlPlaneNamespace == "" {
			s.Mesh.Istio.ControlPlaneNamespace = DefaultControlPlaneNamespace
		}
		if s.Mesh.Istio.ApplicationAccess == "" {
			s.Mesh.Istio.ApplicationAccess = ApplicationAccessAllowAll
		}
	}
	if s.Previews != nil && s.Previews.Routing != nil && s.Previews.Routing.Scheme == "" {
		s.Previews.Routing.Scheme = "https"
	}
}

// Default fills the capacity policy's defaults.
func (c *CapacityPolicy) Default() {
	if c.Mode == "" {
		c.Mode = CapacityShadow
	}
	for _, d := range []struct {
		field *int32
		value int32
	}{
		{&c.MinReplicas, 3}, {&c.MaxReplicas, 10}, {&c.ScaleOutStep, 1},
		{&c.SampleIntervalSeconds, 15}, {&c.MaxAgeSeconds, 45},
		{&c.MinWindowSeconds, 5}, {&c.MaxWindowSeconds, 60}, {&c.MinSamples, 3},
		{&c.ScaleOutStabilizationSeconds, 30}, {&c.ScaleInStabilizationSeconds, 600},
		{&c.ScaleOutCooldownSeconds, 300}, {&c.ScaleInCooldownSeconds, 900},
		{&c.ProvisioningTimeoutSeconds, 600}, {&c.RedistributionObservationSeconds, 120},
		{&c.CPUHighMillicores, 200}, {&c.MemoryHighMiB, 768},
	} {
		if *d.field == 0 {
			*d.field = d.value
		}
	}
	// The low thresholds may legitimately be 0, so they default only alongside their high
	// threshold, as the CRD does for an absent field.
	if c.CPULowMillicores == 0 && c.CPUHighMillicores == 200 {
		c.CPULowMillicores = 80
	}
	if c.MemoryLowMiB == 0 && c.MemoryHighMiB == 768 {
		c.MemoryLowMiB = 384
	}
}

func defaultQuantity(q **resource.Quantity, v resource.Quantity) {
	if *q == nil {
		c := v.DeepCopy()
		*q = &c
	}
}

// DesiredReplicas is spec.replicas after defaulting.
func (f *CelldFleet) DesiredReplicas() int32 {
	if f.Spec.Replicas == nil {
		return DefaultReplicas
	}
	return *f.Spec.Replicas
}
