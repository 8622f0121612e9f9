package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PreviewSeeding authorizes seeded previews of a parent: the one trusted executor that runs
// their seeds, and the sources developers may copy objects from, each by an alias
// (docs/preview-seeding.md).
type PreviewSeeding struct {
	// executor names the trusted external executor that runs this parent's seeds: it acts on
	// the reservations whose spec.seed.executor is this name. The operator itself copies nothing.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Executor string `json:"executor"`
	// sources are the approved sources, 1 to 16, each an alias for one fleet identity.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +required
	Sources []SeedSource `json:"sources"`
}

// SeedSource is an approved seed source: an alias developers name in spec.seed.source, bound
// to one fleet by namespace, name and UID.
type SeedSource struct {
	// name is the alias a CelldPreview names in spec.seed.source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// fleetRef is the source fleet. Its UID is required: a fleet recreated under the same name
	// is another fleet, and this grant does not pass to it.
	// +required
	FleetRef SeedFleetRef `json:"fleetRef"`
}

// SeedFleetRef names a fleet in any namespace by namespace, name and UID.
type SeedFleetRef struct {
	// namespace is the fleet's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
	// name is the fleet's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// uid is the fleet's metadata.uid.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
}

// SeedRequest is a preview fleet's seed as generated from its CelldPreview and the parent's
// grant: what to copy, from which fleet, by which executor. It is fixed at creation, part of
// the fleet's storage and of its reservation's immutable spec.
type SeedRequest struct {
	// executor is the trusted executor that runs the seed (spec.previews.seeding.executor).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Executor string `json:"executor"`
	// source is the alias the preview named.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Source string `json:"source"`
	// sourceFleet is the fleet the alias was bound to when the preview fleet was generated.
	// +required
	SourceFleet SeedFleetRef `json:"sourceFleet"`
	// alarms is Clear (scheduled alarms of the copied objects are dropped) or Preserve.
	// +kubebuilder:validation:Enum=Clear;Preserve
	// +required
	Alarms string `json:"alarms"`
	// objects are the 1 to 100 objects to copy.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=class
	// +listMapKey=id
	// +required
	Objects []SeedObject `json:"objects"`
	// preview is the CelldPreview that asked for the seed.
	// +required
	Preview SeedPreviewRef `json:"preview"`
}

// SeedPreviewRef names the CelldPreview of a seed, in the fleet's namespace.
type SeedPreviewRef struct {
	// name is the preview's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// uid is the preview's metadata.uid.
	// +kubebuilder:validation:MaxLength=64
	// +required
	UID string `json:"uid"`
}

// SeedPhase is the state of a seed on its reservation. No phase means nobody claimed it yet.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed;Canceled
type SeedPhase string

// Seed phases. Succeeded, Failed and Canceled are terminal: a terminal result never changes.
const (
	// SeedRunning: an executor claimed the seed (executorID) and copies.
	SeedRunning SeedPhase = "Running"
	// SeedSucceeded: every requested object was copied; objects is the manifest.
	SeedSucceeded SeedPhase = "Succeeded"
	// SeedFailed: the executor gave up; message says why.
	SeedFailed SeedPhase = "Failed"
	// SeedCanceled: cancelled before it finished, by the operator before any executor claimed
	// it, or acknowledged by the executor after cancelRequestedAt.
	SeedCanceled SeedPhase = "Canceled"
)

// Terminal reports whether p is a final phase.
func (p SeedPhase) Terminal() bool {
	return p == SeedSucceeded || p == SeedFailed || p == SeedCanceled
}

// SeedResult is the outcome of a preview seed, in the reservation's status subresource. The
// executor writes phase, executorID, message, the times and objects; the operator writes
// cancelRequestedAt, and Canceled for a seed no executor claimed. Every write carries the
// resourceVersion it read, so a claim, a cancellation and the operator's start gate
// (annotation celld.eric.dev/seed-gate) never cross.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || !oldSelf.phase.matches('^(Succeeded|Failed|Canceled)$') || self == oldSelf",reason="FieldValueForbidden",message="status.seed of a CelldStorageReservation is final once its phase is Succeeded, Failed or Canceled; create a new preview to seed again"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || has(self.phase)",fieldPath=".phase",reason="FieldValueForbidden",message="status.seed.phase cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.executorID) || (has(self.executorID) && self.executorID == oldSelf.executorID)",fieldPath=".executorID",reason="FieldValueForbidden",message="status.seed.executorID is fixed once an executor claimed the seed; another worker must not take it over"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancelRequestedAt) || (has(self.cancelRequestedAt) && self.cancelRequestedAt == oldSelf.cancelRequestedAt)",fieldPath=".cancelRequestedAt",reason="FieldValueForbidden",message="status.seed.cancelRequestedAt cannot be withdrawn: a cancelled seed stays cancelled"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'Running' || (has(oldSelf.phase) && oldSelf.phase == 'Running') || !has(oldSelf.cancelRequestedAt)",fieldPath=".phase",reason="FieldValueForbidden",message="a seed whose cancellation was requested cannot be claimed; acknowledge it as Canceled"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'Running' || has(self.executorID)",fieldPath=".executorID",reason="FieldValueRequired",message="status.seed.executorID is required with phase Running: it names the worker that claimed the seed"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'Canceled' || has(self.cancelRequestedAt)",fieldPath=".cancelRequestedAt",reason="FieldValueRequired",message="status.seed.cancelRequestedAt is required with phase Canceled: only a requested cancellation is acknowledged"
// +kubebuilder:validation:XValidation:rule="!has(self.phase) || self.phase != 'Succeeded' || !has(self.cancelRequestedAt)",fieldPath=".phase",reason="FieldValueForbidden",message="status.seed.phase cannot be Succeeded once cancelRequestedAt is set; acknowledge the cancellation as Canceled"
type SeedResult struct {
	// phase is the seed's state: Running, Succeeded, Failed or Canceled; absent until an
	// executor claims it.
	// +optional
	Phase SeedPhase `json:"phase,omitempty"`
	// executorID identifies the executor worker that claimed the seed; required with Running
	// and fixed once set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ExecutorID string `json:"executorID,omitempty"`
	// message explains the phase, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// startedAt is when the executor claimed the seed.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the seed reached its terminal phase.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// cancelRequestedAt is when the operator asked the executor to stop (the preview expired
	// or its fleet is being deleted). Written by the operator; never withdrawn.
	// +optional
	CancelRequestedAt *metav1.Time `json:"cancelRequestedAt,omitempty"`
	// objects is the manifest of a Succeeded seed: each requested object exactly once, with the
	// digest of the copied state.
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=class
	// +listMapKey=id
	// +optional
	Objects []SeededObject `json:"objects,omitempty"`
}

// SeededObject is one copied object in a seed's manifest.
type SeededObject struct {
	// class is the object's class.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Class string `json:"class"`
	// id is the object's canonical runtime ID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	ID string `json:"id"`
	// digest is the hex sha256 of the copied state.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	// +required
	Digest string `json:"digest"`
}
