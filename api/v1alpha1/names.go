package v1alpha1

// Labels, annotations and finalizers the operator reads and writes. They are part of the API:
// users select fleet Pods with them and must never edit the operator-owned ones by hand.
const (
	// LabelFleetUID is on every owned object and Pod: the selector and the proof of ownership.
	LabelFleetUID = "celld.eric.dev/fleet-uid"
	// LabelClientOf on a client Pod admits it to the fleet's port 8080 (same namespace only).
	LabelClientOf = "celld.eric.dev/client-of"
	// LabelFleetName is on meshed members, for users' own AuthorizationPolicies.
	LabelFleetName = "celld.eric.dev/fleet"
	// LabelReplacementFleet indexes a Pod held by a replacement handoff.
	LabelReplacementFleet = "celld.eric.dev/replacement-fleet"

	// AnnotationRestartToken on the Pod template carries spec.maintenance.restartToken.
	AnnotationRestartToken = "celld.eric.dev/restart-token"
	// AnnotationStorageReservation on a claim names the fleet's reservation.
	AnnotationStorageReservation = "celld.eric.dev/storage-reservation"
	// AnnotationCurrentOperation on a reservation holds capacity-policy history only.
	AnnotationCurrentOperation = "celld.eric.dev/current-operation"
	// AnnotationReservedTuning on a reservation records the creation-time execution,
	// lifecycle, env and telemetry, so the reservation hash still verifies after they change.
	AnnotationReservedTuning = "celld.eric.dev/reserved-tuning"
	// AnnotationIstioControlPlane on a fleet remembers that it was once meshed, so replacement
	// Pods keep injection explicitly off after it leaves.
	AnnotationIstioControlPlane = "celld.eric.dev/istio-control-plane"
	// AnnotationRoutingAnnotationKeys on a route lists the annotation keys the operator manages.
	AnnotationRoutingAnnotationKeys = "celld.eric.dev/routing-annotation-keys"
	// AnnotationReplacementClaim on a victim Pod is the replacement intent (JSON).
	AnnotationReplacementClaim = "celld.eric.dev/replacement-claim"
	// AnnotationSpecHash on a workload or child is the hash of what the operator rendered, for
	// people reading the object. Drift is judged by content, never by this annotation.
	AnnotationSpecHash = "celld.eric.dev/spec-hash"

	// LabelPreviewUID on a generated preview fleet is the UID of the CelldPreview it belongs to:
	// a fleet without it (or with another UID) is never taken for a preview's fleet.
	LabelPreviewUID = "celld.eric.dev/preview-uid"
	// AnnotationPreviewFleet on a CelldPreview names the fleet the operator is about to create
	// (or created) for it, written before the create: a missing fleet is then FleetMissing,
	// never silently recreated on the same prefix.
	AnnotationPreviewFleet = "celld.eric.dev/preview-fleet"

	// AnnotationSeedGate on a seeded preview fleet's reservation is the operator's start gate:
	// Open once the seed succeeded and the fleet may start, Closed once the fleet was deleted
	// before it started. Written with the reservation's resourceVersion, so starting and
	// cancelling never both win; never changed once set.
	AnnotationSeedGate = "celld.eric.dev/seed-gate"
	// SeedGateOpen and SeedGateClosed are the values of AnnotationSeedGate.
	SeedGateOpen   = "Open"
	SeedGateClosed = "Closed"

	// FinalizerPreviewProtection holds a CelldPreview until its generated fleet is gone.
	FinalizerPreviewProtection = "celld.eric.dev/preview-protection"
	// FinalizerLifecycleProtection holds a fleet until its workload and claims are gone.
	FinalizerLifecycleProtection = "celld.eric.dev/lifecycle-protection"
	// FinalizerReplacingDisk holds a victim Pod during a replacement handoff.
	FinalizerReplacingDisk = "celld.eric.dev/replacing-disk"

	// SchedulingGateBucketZone holds an Ordered Bucket member until its zone is assigned.
	SchedulingGateBucketZone = "celld.eric.dev/bucket-zone"
)

// Condition types of a CelldFleet.
const (
	ConditionReady                = "Ready"
	ConditionProgressing          = "Progressing"
	ConditionBlocked              = "Blocked"
	ConditionMaintenancePaused    = "MaintenancePaused"
	ConditionDeleting             = "Deleting"
	ConditionRoutingReady         = "RoutingReady"
	ConditionApplicationConverged = "ApplicationConverged"
	// ConditionOperationSizeWarning is True while the reservation's capacity-policy record
	// uses more than half of its bound; absent otherwise.
	ConditionOperationSizeWarning = "OperationSizeWarning"
)

// Lifecycle reasons: one of these explains Ready, Progressing and Blocked together.
const (
	ReasonNamespaceAccessDenied   = "NamespaceAccessDenied"
	ReasonInvalidConfiguration    = "InvalidConfiguration"
	ReasonMaintenancePaused       = "MaintenancePaused"
	ReasonIsolationUnverified     = "IsolationUnverified"
	ReasonServiceAccountMissing   = "ServiceAccountMissing"
	ReasonStorageClassMissing     = "StorageClassMissing"
	ReasonInvalidStorageClass     = "InvalidStorageClass"
	ReasonStorageScopeConflict    = "StorageScopeConflict"
	ReasonInfrastructureBlocked   = "InfrastructureBlocked"
	ReasonStorageIdentityConflict = "StorageIdentityConflict"
	ReasonLifecycleBlocked        = "LifecycleBlocked"
	ReasonProvisioning            = "Provisioning"
	ReasonProvisioned             = "Provisioned"
	ReasonLifecycleProgress       = "LifecycleProgress"
	ReasonMemberUnschedulable     = "MemberUnschedulable"
	ReasonMemberCrashLooping      = "MemberCrashLooping"
	ReasonCapacityUncertain       = "CapacityUncertain"
	ReasonSchedulingBlocked       = "SchedulingBlocked"
	ReasonDeletionBlocked         = "DeletionBlocked"
	ReasonDeleting                = "Deleting"
	// ReasonSeedInitializing: a seeded preview fleet waits for its executor (also the
	// preview's reason while it does). ReasonSeedReservationBlocked: the seed failed, was
	// cancelled or reported a manifest that does not match the request, so the fleet never
	// starts. ReasonSeedCancellationBlocked: a deleted fleet waits for its executor to
	// acknowledge the cancellation of a running seed.
	ReasonSeedInitializing        = "SeedInitializing"
	ReasonSeedReservationBlocked  = "SeedReservationBlocked"
	ReasonSeedCancellationBlocked = "SeedCancellationBlocked"
	ReasonNotPaused               = "NotPaused"
	ReasonNotDeleting             = "NotDeleting"
	// ReasonBoundedOperation is OperationSizeWarning's reason.
	ReasonBoundedOperation = "BoundedOperation"
)

// RoutingReady reasons.
const (
	ReasonRoutingDisabled       = "Disabled"
	ReasonServiceConflict       = "ServiceConflict"
	ReasonRoutingError          = "RoutingError"
	ReasonRemovingRoute         = "RemovingRoute"
	ReasonGatewayAPIUnavailable = "GatewayAPIUnavailable"
	ReasonAddressAssigned       = "AddressAssigned"
	ReasonAwaitingAddress       = "AwaitingAddress"
	ReasonRouteRejected         = "RouteRejected"
	ReasonRouteAccepted         = "RouteAccepted"
	ReasonAwaitingAcceptance    = "AwaitingAcceptance"
)

// ApplicationConverged reasons.
const (
	ReasonConverged             = "Converged"
	ReasonMixedVersions         = "MixedVersions"
	ReasonConverging            = "Converging"
	ReasonStale                 = "StaleOrIncomplete"
	ReasonUnsupported           = "Unsupported"
	ReasonMalformed             = "Malformed"
	ReasonIncompleteCoverage    = "IncompleteCoverage"
	ReasonMembershipChanged     = "MembershipChanged"
	ReasonMembershipUnavailable = "MembershipUnavailable"
	ReasonWorkloadUnavailable   = "WorkloadUnavailable"
	ReasonFleetDeleting         = "FleetDeleting"
)

// CelldPreview Ready reasons (docs/operations.md, Preview reasons).
const (
	ReasonPreviewReady           = "PreviewReady"
	ReasonFleetPending           = "FleetPending"
	ReasonFleetBlocked           = "FleetBlocked"
	ReasonFleetMissing           = "FleetMissing"
	ReasonParentMissing          = "ParentMissing"
	ReasonParentDeleting         = "ParentDeleting"
	ReasonParentInOtherNamespace = "ParentInOtherNamespace"
	ReasonPreviewsNotEnabled     = "PreviewsNotEnabled"
	ReasonPreviewExpired         = "Expired"
	ReasonPreviewDeleting        = "PreviewDeleting"
	// ReasonSeedNotAuthorized: the preview's spec.seed names no source the parent approves.
	ReasonSeedNotAuthorized = "SeedNotAuthorized"
)

// Event reasons.
const (
	EventMemberForceDeleted  = "MemberForceDeleted"
	EventMemberDiskLost      = "MemberDiskLost"
	EventMemberReplaced      = "MemberReplaced"
	EventMemberRecreated     = "MemberRecreated"
	EventOperationSuperseded = "OperationSuperseded"
	// EventReplacementAbandoned: a committed replacement did not delete the member's claim,
	// because the claim itself changed (its spec, its volume, or its fleet label) while the
	// replacement was under way; the claim is kept.
	EventReplacementAbandoned = "MemberReplacementAbandoned"
	// EventCapacityScaledOut and EventCapacityScaledIn: the capacity policy took a step.
	EventCapacityScaledOut = "CapacityScaledOut"
	EventCapacityScaledIn  = "CapacityScaledIn"
	// EventLoadNotRedistributed and EventIneffectiveCapacity warn when the capacity decision
	// turns to the reason of the same name.
	EventLoadNotRedistributed = "LoadNotRedistributed"
	EventIneffectiveCapacity  = "IneffectiveCapacity"
)
