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

// CapacityPolicy is the optional capacity policy. Growth and contraction still follow the
// lifecycle rules: growth in runs, scale-in one member per step after the previous change has
// rolled out.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="spec.capacity.minReplicas must not exceed maxReplicas; fix the bounds"
// +kubebuilder:validation:XValidation:rule="self.cpuLowMillicores < self.cpuHighMillicores",message="spec.capacity.cpuLowMillicores must be below cpuHighMillicores; fix the thresholds"
// +kubebuilder:validation:XValidation:rule="self.memoryLowMiB < self.memoryHighMiB",message="spec.capacity.memoryLowMiB must be below memoryHighMiB; fix the thresholds"
// +kubebuilder:validation:XValidation:rule="self.minWindowSeconds <= self.maxWindowSeconds",message="spec.capacity.minWindowSeconds must not exceed maxWindowSeconds; fix the window"
// +kubebuilder:validation:XValidation:rule="self.sampleIntervalSeconds <= self.maxAgeSeconds",message="spec.capacity.sampleIntervalSeconds must not exceed maxAgeSeconds; fix the sampling"
type CapacityPolicy struct {
	// mode is Shadow (default), ScaleOut, Automatic or External.
	// +kubebuilder:default=Shadow
	// +optional
	Mode CapacityMode `json:"mode,omitempty"`
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinReplicas int32 `json:"minReplicas,omitempty"`
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	ScaleOutStep int32 `json:"scaleOutStep,omitempty"`
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	// +optional
	SampleIntervalSeconds int32 `json:"sampleIntervalSeconds,omitempty"`
	// +kubebuilder:default=45
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=600
	// +optional
	MaxAgeSeconds int32 `json:"maxAgeSeconds,omitempty"`
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	// +optional
	MinWindowSeconds int32 `json:"minWindowSeconds,omitempty"`
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	// +optional
	MaxWindowSeconds int32 `json:"maxWindowSeconds,omitempty"`
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinSamples int32 `json:"minSamples,omitempty"`
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	// +optional
	ScaleOutStabilizationSeconds int32 `json:"scaleOutStabilizationSeconds,omitempty"`
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleInStabilizationSeconds int32 `json:"scaleInStabilizationSeconds,omitempty"`
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleOutCooldownSeconds int32 `json:"scaleOutCooldownSeconds,omitempty"`
	// +kubebuilder:default=900
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ScaleInCooldownSeconds int32 `json:"scaleInCooldownSeconds,omitempty"`
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ProvisioningTimeoutSeconds int32 `json:"provisioningTimeoutSeconds,omitempty"`
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RedistributionObservationSeconds int32 `json:"redistributionObservationSeconds,omitempty"`
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CPUHighMillicores int32 `json:"cpuHighMillicores,omitempty"`
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CPULowMillicores int32 `json:"cpuLowMillicores,omitempty"`
	// +kubebuilder:default=768
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryHighMiB int32 `json:"memoryHighMiB,omitempty"`
	// +kubebuilder:default=384
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryLowMiB int32 `json:"memoryLowMiB,omitempty"`
}

// CapacityStatus is the capacity policy's latest result.
type CapacityStatus struct {
	// +optional
	Mode CapacityMode `json:"mode,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// +optional
	UsefulReplicas int32 `json:"usefulReplicas,omitempty"`
	// +optional
	PendingReplicas int32 `json:"pendingReplicas,omitempty"`
	// +optional
	CoveredReplicas int32 `json:"coveredReplicas,omitempty"`
}
