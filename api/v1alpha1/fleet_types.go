package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Profile selects how a fleet keeps acknowledged writes.
// +kubebuilder:validation:Enum=Bucket;PersistentFleet
type Profile string

const (
	// ProfileBucket runs celld with CELLD_DURABILITY=bucket: every acknowledged write is in the
	// bucket and disks are caches.
	ProfileBucket Profile = "Bucket"
	// ProfilePersistentFleet runs celld with CELLD_DURABILITY=fleet on retained disks, one per
	// member, kept for the life of the fleet.
	ProfilePersistentFleet Profile = "PersistentFleet"
)

// BucketWorkload selects the workload layout of a Bucket fleet.
// +kubebuilder:validation:Enum=Deployment;Ordered
type BucketWorkload string

const (
	// BucketWorkloadDeployment runs members as a Deployment; Kubernetes picks the member removed
	// on contraction, which is safe because the bucket holds every acknowledged write.
	BucketWorkloadDeployment BucketWorkload = "Deployment"
	// BucketWorkloadOrdered runs members as a StatefulSet without claims; zones are assigned by
	// ordinal and contraction removes the highest ordinal.
	BucketWorkloadOrdered BucketWorkload = "Ordered"
)

// PlacementMode selects how strictly members are spread over zones and nodes.
// +kubebuilder:validation:Enum=Strict;Relaxed
type PlacementMode string

const (
	// PlacementStrict requires one member per zone in turn (maxSkew 1, DoNotSchedule) and never
	// two members on one node.
	PlacementStrict PlacementMode = "Strict"
	// PlacementRelaxed prefers the spread but schedules anyway.
	PlacementRelaxed PlacementMode = "Relaxed"
)

// CelldFleet is one independent celld cluster: a workload of celld members, its Services,
// NetworkPolicies and PodDisruptionBudget, and a permanent reservation of its bucket.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.labelSelector
// +kubebuilder:resource:scope=Namespaced,shortName=cf,categories=celld
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.runtimeImage`,priority=1,description="The celld image the fleet declares, pinned by digest (spec.runtimeImage)"
// +kubebuilder:printcolumn:name="Zones",type=string,JSONPath=`.spec.placement.zones`,priority=1,description="The zones members may run in (spec.placement.zones)"
// +kubebuilder:printcolumn:name="App-Version",type=string,JSONPath=`.status.application.observedVersion.version`,priority=1,description="The application version every member has loaded; empty unless coverage is complete and the members agree"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",fieldPath=".metadata",reason="FieldValueInvalid",message="metadata.name must be a DNS label of at most 40 characters (lower-case letters, digits and '-'), so that member, Service and claim names derived from it stay valid; choose a shorter name"
type CelldFleet struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the fleet's object metadata. Its name is a DNS label of at most 40
	// characters, from which member, Service and claim names are derived.
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested fleet.
	// +required
	Spec CelldFleetSpec `json:"spec"`

	// status is a projection of the fleet's objects, rebuilt on every reconcile. Editing it
	// authorizes nothing.
	// +optional
	Status CelldFleetStatus `json:"status,omitempty"`
}

// CelldFleetList is a list of CelldFleets.
//
// +kubebuilder:object:root=true
type CelldFleetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldFleet `json:"items"`
}

// CelldFleetSpec is the requested state of a fleet. profile, bucketWorkload,
// serviceAccountName, storage and placement are fixed at creation; previews may be added
// once; every other field may change, and changes that reach the Pod template roll the fleet
// one member at a time.
//
// +kubebuilder:validation:XValidation:rule="self.profile == oldSelf.profile",fieldPath=".profile",reason="FieldValueForbidden",message="spec.profile is fixed at creation; create a new fleet to change the profile"
// +kubebuilder:validation:XValidation:rule="self.bucketWorkload == oldSelf.bucketWorkload",fieldPath=".bucketWorkload",reason="FieldValueForbidden",message="spec.bucketWorkload is fixed at creation; a layout is never converted in place, create a new fleet to change it"
// +kubebuilder:validation:XValidation:rule="self.serviceAccountName == oldSelf.serviceAccountName",fieldPath=".serviceAccountName",reason="FieldValueForbidden",message="spec.serviceAccountName is fixed at creation; create a new fleet to run under another ServiceAccount"
// +kubebuilder:validation:XValidation:rule="self.storage == oldSelf.storage",fieldPath=".storage",reason="FieldValueForbidden",message="spec.storage is fixed at creation; the bucket is permanently reserved to this fleet, create a new fleet for other storage"
// +kubebuilder:validation:XValidation:rule="self.placement == oldSelf.placement",fieldPath=".placement",reason="FieldValueForbidden",message="spec.placement is fixed at creation because disks pin members to zones; create a new fleet for another placement"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.previews) || (has(self.previews) && self.previews == oldSelf.previews)",fieldPath=".previews",reason="FieldValueForbidden",message="spec.previews may be added once and is immutable thereafter; restore the previous value"
// +kubebuilder:validation:XValidation:rule="!has(self.env) || self.env.map(e, has(e.value) ? e.value.size() : 0).sum() <= 4096",fieldPath=".env",reason="FieldValueInvalid",message="spec.env literal values may total at most 4096 characters, so the creation-time tuning recorded on the storage reservation always fits and the fleet's tuning can change later; move long values into a Secret (secretKeyRef)"
// +kubebuilder:validation:XValidation:rule="self.replicas >= self.placement.azCount",fieldPath=".replicas",reason="FieldValueInvalid",message="spec.replicas must be at least spec.placement.azCount so every zone has a member; raise replicas or create the fleet with fewer zones"
// +kubebuilder:validation:XValidation:rule="self.placement.zones.all(z, z.size() == self.storage.region.size() + 1 && z.startsWith(self.storage.region))",fieldPath=".placement.zones",reason="FieldValueInvalid",message="spec.placement.zones must be availability zones of spec.storage.region (the region name plus one letter, e.g. us-east-1a); fix the zone list or the region"
// +kubebuilder:validation:XValidation:rule="self.profile == 'Bucket' || self.bucketWorkload != 'Ordered'",fieldPath=".bucketWorkload",reason="FieldValueInvalid",message="spec.bucketWorkload Ordered requires profile Bucket; remove bucketWorkload for a PersistentFleet"
// +kubebuilder:validation:XValidation:rule="self.profile != 'PersistentFleet' || (has(self.storage.storageClassName) && size(self.storage.storageClassName) > 0)",fieldPath=".storage.storageClassName",reason="FieldValueRequired",message="spec.storage.storageClassName is required for profile PersistentFleet; name a StorageClass with WaitForFirstConsumer binding and reclaim policy Delete"
// +kubebuilder:validation:XValidation:rule="self.profile != 'Bucket' || !has(self.storage.storageClassName)",fieldPath=".storage.storageClassName",reason="FieldValueForbidden",message="spec.storage.storageClassName is not used by profile Bucket, whose disks are temporary; remove it"
// +kubebuilder:validation:XValidation:rule="self.profile == 'Bucket' || !(has(self.storage.prefix) || has(self.storage.previewFleetRef) || has(self.storage.endpoint) || has(self.storage.scratch))",fieldPath=".storage",reason="FieldValueForbidden",message="spec.storage.prefix, previewFleetRef, endpoint and scratch are preview-fleet fields and require profile Bucket; remove them"
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || self.capacity.minReplicas >= self.placement.azCount",fieldPath=".capacity.minReplicas",reason="FieldValueInvalid",message="spec.capacity.minReplicas must be at least spec.placement.azCount so every zone keeps a member; raise minReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.export) || !has(self.export.bucket) || !has(self.export.bucket.name) || self.export.bucket.name != self.storage.bucket",fieldPath=".export.bucket.name",reason="FieldValueInvalid",message="spec.export.bucket.name must be a bucket other than the fleet bucket; omit it to export under export/changes/ in the fleet bucket"
// +kubebuilder:validation:XValidation:rule="!has(self.previews) || self.previews.storage.bucket != self.storage.bucket",fieldPath=".previews.storage.bucket",reason="FieldValueInvalid",message="spec.previews.storage.bucket must differ from the fleet bucket; reserve a separate preview bucket"
type CelldFleetSpec struct {
	// profile selects durability: Bucket (every acknowledged write in the bucket, disks are
	// caches) or PersistentFleet (retained per-member disks). Fixed at creation.
	// +required
	Profile Profile `json:"profile"`

	// bucketWorkload selects the layout of a Bucket fleet: Deployment (default) or Ordered (a
	// StatefulSet without claims, zones assigned by ordinal). Fixed at creation.
	// +kubebuilder:default=Deployment
	// +optional
	BucketWorkload BucketWorkload `json:"bucketWorkload,omitempty"`

	// replicas is the declared number of members, 1 to 100, at least placement.azCount. The
	// /scale subresource writes this field. Growth is applied in runs and scale-in removes one
	// member per step.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// runtimeImage is the celld image, pinned by digest and qualified by registry:
	// REGISTRY[:PORT]/PATH@sha256:<64 hex>. Changing it rolls the fleet one member at a time.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(localhost|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+)(:[0-9]{1,5})?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+@sha256:[a-f0-9]{64}$`
	// +required
	RuntimeImage string `json:"runtimeImage"`

	// serviceAccountName is an existing ServiceAccount in the fleet namespace that the members
	// run as (its IAM role reaches the bucket). Fixed at creation.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ServiceAccountName string `json:"serviceAccountName"`

	// maintenance pauses workload changes or requests a rolling restart.
	// +optional
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// capacity is the optional capacity policy (docs/capacity.md); omission means replicas is
	// managed by hand. Shadow recommends, ScaleOut adds members, Automatic adds and removes
	// them, External leaves spec.replicas to one /scale writer; the decision is reported in
	// status.capacity and the operator never writes spec.replicas.
	// +optional
	Capacity *CapacityPolicy `json:"capacity,omitempty"`

	// storage names the fleet's dedicated bucket, its region and, for PersistentFleet, the
	// StorageClass and size of each member's disk. Fixed at creation.
	// +required
	Storage StorageSpec `json:"storage"`

	// placement is the zone allowlist and how strictly members spread over it. Fixed at
	// creation.
	// +required
	Placement PlacementSpec `json:"placement"`

	// execution sets the members' CPU and memory and celld's cell residency limits.
	// +kubebuilder:default={}
	// +optional
	Execution *ExecutionSpec `json:"execution,omitempty"`

	// lifecycle sets celld's shutdown budget and the Pods' termination grace.
	// +kubebuilder:default={shutdownSeconds: 20, terminationGraceSeconds: 30}
	// +optional
	Lifecycle *LifecycleSpec `json:"lifecycle,omitempty"`

	// env adds up to 32 CELLD_ variables, each a literal value or a same-namespace Secret key.
	// Operator-owned names and reserved prefixes are refused. Changing env rolls the fleet.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// telemetry enables OTLP export to a collector; omission leaves it disabled.
	// +optional
	Telemetry *TelemetrySpec `json:"telemetry,omitempty"`

	// export turns on celld's change export to the bucket or Kafka; omission leaves it off.
	// +optional
	Export *ExportSpec `json:"export,omitempty"`

	// routing optionally creates one Gateway API HTTPRoute or Ingress named FLEET-routing, and
	// a NetworkPolicy that admits only the selected data-plane Pods on 8080.
	// +optional
	Routing *RoutingSpec `json:"routing,omitempty"`

	// mesh places members in a service mesh. Adding or removing it rolls the fleet.
	// +optional
	Mesh *MeshSpec `json:"mesh,omitempty"`

	// previews lets developers create CelldPreviews of this fleet: small preview fleets in a
	// separate preview bucket, reserved to this fleet's UID by the first preview
	// (docs/previews.md). It may be added once and is immutable thereafter; adding it restarts
	// nothing.
	// +optional
	Previews *FleetPreviewsSpec `json:"previews,omitempty"`
}

// MaintenanceSpec pauses workload changes or requests a rolling restart.
type MaintenanceSpec struct {
	// paused stops the operator from writing workload changes and from replacing members. A
	// rollout the workload controller already started continues.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// restartToken requests a same-version rolling restart when it changes. It is written to
	// the Pod template annotation celld.eric.dev/restart-token, so a completed restart is never
	// replayed.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	RestartToken string `json:"restartToken,omitempty"`

	// allowCoordinatedDowntime is deprecated, accepted and ignored: restarts and upgrades are
	// always one-member rolling updates.
	// +optional
	AllowCoordinatedDowntime bool `json:"allowCoordinatedDowntime,omitempty"`
}

// StorageSpec is the fleet's dedicated bucket and, for PersistentFleet, its disks.
// +kubebuilder:validation:XValidation:rule="has(self.prefix) == has(self.previewFleetRef)",reason="FieldValueInvalid",message="spec.storage.prefix and spec.storage.previewFleetRef must be set together (preview fleets only); set both or neither"
// +kubebuilder:validation:XValidation:rule="!has(self.endpoint) || has(self.previewFleetRef)",fieldPath=".endpoint",reason="FieldValueInvalid",message="spec.storage.endpoint is only for preview fleets; set previewFleetRef and prefix, or remove endpoint"
// +kubebuilder:validation:XValidation:rule="!has(self.seed) || has(self.previewFleetRef)",fieldPath=".seed",reason="FieldValueInvalid",message="spec.storage.seed is only for preview fleets, which a CelldPreview generates; ask for a seed in the CelldPreview's spec.seed instead"
type StorageSpec struct {
	// bucket is the fleet's dedicated S3 bucket, 3 to 63 lower-case letters, digits and '-'.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*[a-z0-9]$`
	// +required
	Bucket string `json:"bucket"`

	// region is the bucket's AWS region, for example us-east-1.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +required
	Region string `json:"region"`

	// storageClassName is the StorageClass of each member's disk: required for PersistentFleet,
	// forbidden for Bucket. It must use WaitForFirstConsumer binding and reclaim policy Delete.
	// A StorageClass name: a lower-case DNS subdomain.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// sizeGiB is the disk size: the claim size for PersistentFleet, the emptyDir limit for
	// Bucket. 1 to 16384.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16384
	// +optional
	SizeGiB int32 `json:"sizeGiB,omitempty"`

	// prefix confines a preview fleet to this key prefix of storage.bucket: celld gets
	// s3://BUCKET/PREFIX, and the reservation binds the bucket and prefix together. Set with
	// previewFleetRef, Bucket profile only.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*[a-z0-9]$`
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// previewFleetRef names the parent fleet of a preview fleet; it marks this fleet as a
	// preview fleet and is set together with prefix. The fleet runs only when its bucket is
	// the preview pool reserved to that parent (StorageScopeConflict otherwise).
	// +optional
	PreviewFleetRef *FleetReference `json:"previewFleetRef,omitempty"`

	// endpoint is a custom S3-compatible endpoint for a preview fleet (S3_ENDPOINT and the
	// access key pair from a Secret); it requires previewFleetRef.
	// +optional
	Endpoint *StorageEndpoint `json:"endpoint,omitempty"`

	// scratch sizes the data emptyDir of a preview fleet (Bucket profile) instead of sizeGiB.
	// +optional
	Scratch *ScratchSpec `json:"scratch,omitempty"`

	// seed is a seeded preview fleet's seed request, generated from its CelldPreview: the
	// request is recorded on the fleet's reservation and the fleet starts nothing (no
	// Services, routes or members) until the named executor reports success there. It
	// requires previewFleetRef.
	// +optional
	Seed *SeedRequest `json:"seed,omitempty"`
}

// FleetReference names a fleet by name and UID.
type FleetReference struct {
	// name is the referenced fleet's name, in the same namespace.
	// +kubebuilder:validation:MaxLength=40
	// +required
	Name string `json:"name"`
	// uid is the referenced fleet's metadata.uid, so a fleet recreated under the same name is
	// not taken for it.
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
}

// StorageEndpoint is a custom S3-compatible endpoint whose credentials come from a Secret.
type StorageEndpoint struct {
	// url is the endpoint URL.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/?#@]+(/[^?#]*)?$`
	// +required
	URL string `json:"url"`
	// credentialsSecretName is a same-namespace Secret holding the access key pair.
	// +kubebuilder:validation:MaxLength=253
	// +required
	CredentialsSecretName string `json:"credentialsSecretName"`
	// egress admits the members' traffic to the endpoint.
	// +optional
	Egress *EgressTarget `json:"egress,omitempty"`
}

// ScratchSpec sizes a disk-backed emptyDir.
type ScratchSpec struct {
	// request is each member's ephemeral-storage request for the emptyDir; it follows limit
	// when omitted.
	// +optional
	Request *resource.Quantity `json:"request,omitempty"`
	// limit is the emptyDir's sizeLimit and each member's ephemeral-storage limit; the
	// fleet's storage.sizeGiB when omitted.
	// +optional
	Limit *resource.Quantity `json:"limit,omitempty"`
}

// PlacementSpec is the zone allowlist and the spread over it.
// +kubebuilder:validation:XValidation:rule="self.azCount == size(self.zones)",fieldPath=".azCount",reason="FieldValueInvalid",message="spec.placement.azCount must equal the number of spec.placement.zones; list exactly azCount zones"
type PlacementSpec struct {
	// zones is the set of availability zones members may run in, 1 to 6, each in
	// storage.region (for example us-east-1a).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:MaxLength=33
	// +kubebuilder:validation:items:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`
	// +listType=set
	// +required
	Zones []string `json:"zones"`

	// azCount is the number of zones, 1 to 6; it must equal the length of zones.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=6
	// +required
	AZCount int32 `json:"azCount"`

	// mode is Strict (default: zone spread DoNotSchedule with minDomains, one member per node)
	// or Relaxed (spread and anti-affinity preferred only).
	// +kubebuilder:default=Strict
	// +optional
	Mode PlacementMode `json:"mode,omitempty"`
}

// ExecutionSpec sets member resources and celld residency limits.
// +kubebuilder:validation:XValidation:rule="!has(self.cpuLimit) || !has(self.cpuRequest) || quantity(string(self.cpuLimit)).compareTo(quantity(string(self.cpuRequest))) >= 0",fieldPath=".cpuLimit",reason="FieldValueInvalid",message="spec.execution.cpuLimit must be at least cpuRequest; raise cpuLimit or lower cpuRequest"
// +kubebuilder:validation:XValidation:rule="!has(self.memoryLimit) || !has(self.memoryRequest) || quantity(string(self.memoryLimit)).compareTo(quantity(string(self.memoryRequest))) >= 0",fieldPath=".memoryLimit",reason="FieldValueInvalid",message="spec.execution.memoryLimit must be at least memoryRequest; raise memoryLimit or lower memoryRequest"
type ExecutionSpec struct {
	// cpuRequest is each member's CPU request.
	// +kubebuilder:default="250m"
	// +optional
	CPURequest *resource.Quantity `json:"cpuRequest,omitempty"`
	// cpuLimit is each member's CPU limit; none by default.
	// +optional
	CPULimit *resource.Quantity `json:"cpuLimit,omitempty"`
	// memoryRequest is each member's memory request.
	// +kubebuilder:default="512Mi"
	// +optional
	MemoryRequest *resource.Quantity `json:"memoryRequest,omitempty"`
	// memoryLimit is each member's memory limit. Size it for the export queue when export is on.
	// +kubebuilder:default="1Gi"
	// +optional
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
	// maxResidentCells caps the cells a member keeps resident (CELLD_MAX_RESIDENT_CELLS).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxResidentCells *int32 `json:"maxResidentCells,omitempty"`
	// idleEvictSeconds evicts a cell idle this long (CELLD_IDLE_EVICT_S).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	IdleEvictSeconds *int32 `json:"idleEvictSeconds,omitempty"`
}

// LifecycleSpec sets the shutdown budget and termination grace.
// +kubebuilder:validation:XValidation:rule="self.terminationGraceSeconds >= self.shutdownSeconds + 5",fieldPath=".terminationGraceSeconds",reason="FieldValueInvalid",message="spec.lifecycle.terminationGraceSeconds must be at least shutdownSeconds + 5 so celld can finish its SIGTERM handoff; raise terminationGraceSeconds (it defaults to 30, so set it explicitly when shutdownSeconds exceeds 25)"
type LifecycleSpec struct {
	// shutdownSeconds is celld's SIGTERM handoff budget (CELLD_SHUTDOWN_TOTAL_MS), 1 to 3600.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	ShutdownSeconds int32 `json:"shutdownSeconds,omitempty"`
	// terminationGraceSeconds is the Pods' terminationGracePeriodSeconds, 6 to 3605, at least
	// shutdownSeconds + 5.
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=6
	// +kubebuilder:validation:Maximum=3605
	// +optional
	TerminationGraceSeconds int32 `json:"terminationGraceSeconds,omitempty"`
}

// MeshSpec places members in a service mesh.
type MeshSpec struct {
	// istio places members in an Istio sidecar mesh that may run STRICT mTLS.
	// +optional
	Istio *IstioMeshSpec `json:"istio,omitempty"`
}

// ApplicationAccess selects who may call port 8080 inside the mesh.
// +kubebuilder:validation:Enum=AllowAll;Policies
type ApplicationAccess string

const (
	// ApplicationAccessAllowAll lets any caller reach 8080, as outside the mesh.
	ApplicationAccessAllowAll ApplicationAccess = "AllowAll"
	// ApplicationAccessPolicies leaves 8080 closed until an AuthorizationPolicy of yours allows
	// the caller.
	ApplicationAccessPolicies ApplicationAccess = "Policies"
)

// IstioMeshSpec configures Istio membership. Both fields change only policies and roll nothing.
type IstioMeshSpec struct {
	// controlPlaneNamespace is where istiod runs; members get egress to it on TCP 15012.
	// +kubebuilder:default=istio-system
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ControlPlaneNamespace string `json:"controlPlaneNamespace,omitempty"`
	// applicationAccess is AllowAll (default) or Policies.
	// +kubebuilder:default=AllowAll
	// +optional
	ApplicationAccess ApplicationAccess `json:"applicationAccess,omitempty"`
}

// CelldFleetStatus is a projection of the fleet's objects, rebuilt on every reconcile.
type CelldFleetStatus struct {
	// observedGeneration is the generation the lifecycle conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Progressing, Blocked, MaintenancePaused, Deleting, RoutingReady,
	// ApplicationConverged.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicas counts the fleet's non-terminal Pods, terminating ones included (for /scale).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// labelSelector selects the fleet's Pods (for /scale).
	// +optional
	LabelSelector string `json:"labelSelector,omitempty"`
	// desiredReplicas is the count the fleet is heading to.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// appliedReplicas is the replica count on the workload.
	// +optional
	AppliedReplicas int32 `json:"appliedReplicas,omitempty"`
	// observedReplicas is the number of non-terminal fleet Pods seen.
	// +optional
	ObservedReplicas int32 `json:"observedReplicas,omitempty"`
	// readyReplicas is the workload's ready count, 0 while the workload has not observed its
	// current spec.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// joiningReplicas counts Pods that are neither terminating nor ready.
	// +optional
	JoiningReplicas int32 `json:"joiningReplicas,omitempty"`
	// terminatingReplicas counts Pods being deleted.
	// +optional
	TerminatingReplicas int32 `json:"terminatingReplicas,omitempty"`
	// replicaObservationValid is false when the Pod inventory could not be read completely.
	// +optional
	ReplicaObservationValid bool `json:"replicaObservationValid,omitempty"`
	// blockedSince is when the fleet became Blocked for its current reason; a change of the
	// Blocked reason starts a new period.
	// +optional
	BlockedSince *metav1.Time `json:"blockedSince,omitempty"`
	// capacity is the capacity policy's latest result; absent without spec.capacity.
	// +optional
	Capacity *CapacityStatus `json:"capacity,omitempty"`
	// application describes the application code the members have loaded, as observed on
	// their /state endpoints.
	// +optional
	Application *ApplicationStatus `json:"application,omitempty"`
	// reservation is the name of the fleet's CelldStorageReservation.
	// +optional
	Reservation string `json:"reservation,omitempty"`
}

func init() {
	SchemeBuilder.Register(&CelldFleet{}, &CelldFleetList{})
}
