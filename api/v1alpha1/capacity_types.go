package v1alpha1

// CapacityMode selects what the capacity policy may do.
// +kubebuilder:validation:Enum=Shadow;ScaleOut;Automatic;External
type CapacityMode string

const (
	// CapacityShadow recommends only.
	CapacityShadow CapacityMode = "Shadow"
	// CapacityScaleOut may add members in bounded steps.
	CapacityScaleOut CapacityMode = "ScaleOut"
	// CapacityAutomatic may add and remove members.
	CapacityAutomatic CapacityMode = "Automatic"
	// CapacityExternal leaves spec.replicas to one /scale writer (an HPA); the policy computes
	// nothing and its other fields are ignored.
	CapacityExternal CapacityMode = "External"
)

// CapacityPolicy is the optional capacity policy (docs/capacity.md). Growth and contraction
// still follow the lifecycle rules: growth in runs, scale-in one member per step after the
// previous change has rolled out. The operator collects each member's /state load view and
// Metrics API sample every sampleIntervalSeconds, decides once per reconcile and reports the
// decision in status.capacity; it never writes spec.replicas.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",fieldPath=".minReplicas",reason="FieldValueInvalid",message="spec.capacity.minReplicas must not exceed maxReplicas; fix the bounds"
// +kubebuilder:validation:XValidation:rule="self.cpuLowMillicores < self.cpuHighMillicores",fieldPath=".cpuLowMillicores",reason="FieldValueInvalid",message="spec.capacity.cpuLowMillicores must be below cpuHighMillicores; fix the thresholds"
// +kubebuilder:validation:XValidation:rule="self.memoryLowMiB < self.memoryHighMiB",fieldPath=".memoryLowMiB",reason="FieldValueInvalid",message="spec.capacity.memoryLowMiB must be below memoryHighMiB; fix the thresholds"
// +kubebuilder:validation:XValidation:rule="self.minWindowSeconds <= self.maxWindowSeconds",fieldPath=".minWindowSeconds",reason="FieldValueInvalid",message="spec.capacity.minWindowSeconds must not exceed maxWindowSeconds; fix the window"
// +kubebuilder:validation:XValidation:rule="self.sampleIntervalSeconds <= self.maxAgeSeconds",fieldPath=".sampleIntervalSeconds",reason="FieldValueInvalid",message="spec.capacity.sampleIntervalSeconds must not exceed maxAgeSeconds; fix the sampling"
type CapacityPolicy struct {
	// mode is what the policy may do: Shadow (default) recommends only, ScaleOut may add
	// members, Automatic may add and remove them, and External leaves spec.replicas to one
	// /scale writer such as a HorizontalPodAutoscaler.
	// +kubebuilder:default=Shadow
	// +optional
	Mode CapacityMode `json:"mode,omitempty"`
	// minReplicas is the fewest members the policy keeps: it never removes below it, and fewer
	// members count as high demand. 1 to 100, at least placement.azCount; a manual count below it
	// is applied as declared.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// maxReplicas is the most members the policy adds up to; a manual count above it is applied as
	// declared. 1 to 100, at least minReplicas.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// scaleOutStep is the most members one addition asks for, cut at maxReplicas, 1 to 10. A
	// removal is always one member.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	ScaleOutStep int32 `json:"scaleOutStep,omitempty"`
	// sampleIntervalSeconds is how long after the last counted collection the next one counts
	// toward a window, 5 to 300; at most maxAgeSeconds.
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	// +optional
	SampleIntervalSeconds int32 `json:"sampleIntervalSeconds,omitempty"`
	// maxAgeSeconds is the age past which a member's /state load view or Metrics API sample no
	// longer counts, and the longest gap between counted samples before a window breaks, 10 to
	// 600.
	// +kubebuilder:default=45
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=600
	// +optional
	MaxAgeSeconds int32 `json:"maxAgeSeconds,omitempty"`
	// minWindowSeconds is the shortest Metrics API averaging window a sample may have, 1 to 60; at
	// most maxWindowSeconds.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	// +optional
	MinWindowSeconds int32 `json:"minWindowSeconds,omitempty"`
	// maxWindowSeconds is the longest Metrics API averaging window a sample may have, 5 to 300.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	// +optional
	MaxWindowSeconds int32 `json:"maxWindowSeconds,omitempty"`
	// minSamples is how many counted samples every window needs (high, low and redistribution), 2
	// to 100.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinSamples int32 `json:"minSamples,omitempty"`
	// scaleOutStabilizationSeconds is how long demand must stay high, from the first counted high
	// sample to the latest, before an addition, 10 to 3600.
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	// +optional
	ScaleOutStabilizationSeconds int32 `json:"scaleOutStabilizationSeconds,omitempty"`
	// scaleInStabilizationSeconds is how long demand must stay low before a removal, 60 to 86400.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleInStabilizationSeconds int32 `json:"scaleInStabilizationSeconds,omitempty"`
	// scaleOutCooldownSeconds is the time after the last step, up or down, manual or policy,
	// before an addition, 30 to 86400.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleOutCooldownSeconds int32 `json:"scaleOutCooldownSeconds,omitempty"`
	// scaleInCooldownSeconds is the time after the last step before a removal, 60 to 86400.
	// +kubebuilder:default=900
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleInCooldownSeconds int32 `json:"scaleInCooldownSeconds,omitempty"`
	// provisioningTimeoutSeconds is how long members may stay not Ready (PendingCapacity) before
	// the decision says IneffectiveCapacity, 60 to 86400. Neither adds nor removes members.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ProvisioningTimeoutSeconds int32 `json:"provisioningTimeoutSeconds,omitempty"`
	// redistributionObservationSeconds is how long the effect of a policy addition is observed,
	// over complete counted samples, before another addition, 30 to 3600.
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RedistributionObservationSeconds int32 `json:"redistributionObservationSeconds,omitempty"`
	// cpuHighMillicores is the per-member CPU usage of the celld container at or above which
	// demand is high, 1 to 1000000.
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CPUHighMillicores int32 `json:"cpuHighMillicores,omitempty"`
	// cpuLowMillicores is the per-member CPU usage below which (with memory below memoryLowMiB and
	// no pressure on any member) demand is low, 0 to 1000000; below cpuHighMillicores.
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CPULowMillicores int32 `json:"cpuLowMillicores,omitempty"`
	// memoryHighMiB is the per-member memory usage of the celld container at or above which demand
	// is high, 1 to 1048576.
	// +kubebuilder:default=768
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryHighMiB int32 `json:"memoryHighMiB,omitempty"`
	// memoryLowMiB is the per-member memory usage below which (with CPU below cpuLowMillicores)
	// demand is low, 0 to 1048576; below memoryHighMiB.
	// +kubebuilder:default=384
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryLowMiB int32 `json:"memoryLowMiB,omitempty"`
}

// CapacityStatus is the capacity policy's latest decision (docs/capacity.md). A paused fleet
// keeps the last one until it resumes.
type CapacityStatus struct {
	// mode is spec.capacity.mode, the mode the decision was made in.
	// +optional
	Mode CapacityMode `json:"mode,omitempty"`
	// reason is the decision's reason, one of those listed in docs/capacity.md (for example
	// WithinThresholds, ScaleOutRecommended, IncompleteMetrics, ManualOverride, ExternalOwner).
	// +optional
	Reason string `json:"reason,omitempty"`
	// message explains the reason in a sentence, naming the numbers and the next step.
	// +optional
	Message string `json:"message,omitempty"`
	// desiredReplicas is the member count the decision asks for; in Shadow mode, and for a
	// removal outside Automatic, a recommendation only.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// usefulReplicas counts the Ready members the decision saw; zero without a trusted
	// observation and in External mode.
	// +optional
	UsefulReplicas int32 `json:"usefulReplicas,omitempty"`
	// pendingReplicas counts the members the workload applies that are not Ready (applied
	// minus useful, never negative); zero without a trusted observation and in External mode.
	// +optional
	PendingReplicas int32 `json:"pendingReplicas,omitempty"`
	// coveredReplicas counts the Ready members with a fresh load and resource sample inside the
	// window bounds; zero without a trusted observation and in External mode.
	// +optional
	CoveredReplicas int32 `json:"coveredReplicas,omitempty"`
}
