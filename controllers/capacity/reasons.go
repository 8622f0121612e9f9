package capacity

// The reasons a capacity decision gives, written to status.capacity.reason. They live here and
// not in api/v1alpha1/names.go: they describe the policy's result, not a lifecycle condition,
// and the repository's reason test covers only the conditions and events of names.go.
// docs/capacity.md lists each with what it asks the user to do; a test keeps the two equal.
const (
	// ReasonScaleOutRecommended: a high window completed past the cooldown; ScaleOut and
	// Automatic add members, Shadow only says so.
	ReasonScaleOutRecommended = "ScaleOutRecommended"
	// ReasonScaleInRecommended: a low window completed past the cooldown; Automatic removes one
	// member, the other modes only say so.
	ReasonScaleInRecommended = "ScaleInRecommended"
	// ReasonStabilizingOut: demand is high but the window is shorter than
	// scaleOutStabilizationSeconds or has fewer than minSamples samples.
	ReasonStabilizingOut = "StabilizingOut"
	// ReasonStabilizingIn: demand is low but the window is shorter than
	// scaleInStabilizationSeconds or has fewer than minSamples samples.
	ReasonStabilizingIn = "StabilizingIn"
	// ReasonWithinThresholds: every member is observed and demand lies between the thresholds.
	ReasonWithinThresholds = "WithinThresholds"
	// ReasonAtMinimum: demand is low and the fleet already has minReplicas members.
	ReasonAtMinimum = "AtMinimum"
	// ReasonAtMaximum: demand is high and the fleet already has maxReplicas members.
	ReasonAtMaximum = "AtMaximum"
	// ReasonPendingCapacity: a member the workload has is not Ready yet; nothing is decided
	// while capacity is still arriving.
	ReasonPendingCapacity = "PendingCapacity"
	// ReasonIneffectiveCapacity: a member stayed not Ready for provisioningTimeoutSeconds.
	ReasonIneffectiveCapacity = "IneffectiveCapacity"
	// ReasonIncompleteMetrics: a member's load or resource sample is missing, stale or measured
	// over a window outside the policy's bounds.
	ReasonIncompleteMetrics = "IncompleteMetrics"
	// ReasonInvalidObservation: the observation contradicts itself or the clock.
	ReasonInvalidObservation = "InvalidObservation"
	// ReasonRepeatedSamples: a member's source timestamps did not advance between counted
	// samples, so the sample is not new evidence.
	ReasonRepeatedSamples = "RepeatedSamples"
	// ReasonWindowInterrupted: a running window was broken by a gap longer than maxAgeSeconds,
	// a change of members, or a contrary observation between counted samples.
	ReasonWindowInterrupted = "WindowInterrupted"
	// ReasonPolicyChanged: spec.capacity changed; the windows restart under the new values.
	ReasonPolicyChanged = "PolicyChanged"
	// ReasonRateLimited: a window completed inside the cooldown of the last step.
	ReasonRateLimited = "RateLimited"
	// ReasonManualOverride: spec.replicas was edited and is not applied yet, or the workload
	// was stopped by hand; the declared count wins.
	ReasonManualOverride = "ManualOverride"
	// ReasonExternalOwner: mode External; one /scale writer owns spec.replicas.
	ReasonExternalOwner = "ExternalOwner"
	// ReasonObservingRedistribution: the policy's last addition is being judged; further
	// additions wait.
	ReasonObservingRedistribution = "ObservingRedistribution"
	// ReasonLoadNotRedistributed: two consecutive additions did not move load; further
	// additions wait until load moves.
	ReasonLoadNotRedistributed = "LoadNotRedistributed"
)

// Reasons is every reason Decide can give, in the order docs/capacity.md lists them. Metrics
// label decisions from this fixed set.
var Reasons = []string{
	ReasonScaleOutRecommended, ReasonScaleInRecommended, ReasonStabilizingOut, ReasonStabilizingIn,
	ReasonWithinThresholds, ReasonAtMinimum, ReasonAtMaximum,
	ReasonPendingCapacity, ReasonIneffectiveCapacity, ReasonIncompleteMetrics,
	ReasonInvalidObservation, ReasonRepeatedSamples, ReasonWindowInterrupted,
	ReasonPolicyChanged, ReasonRateLimited, ReasonManualOverride, ReasonExternalOwner,
	ReasonObservingRedistribution, ReasonLoadNotRedistributed,
}
