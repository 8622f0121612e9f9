package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PreviewPhase is the one-word state of a preview.
// +kubebuilder:validation:Enum=Pending;Initializing;Ready;Blocked;Deleting;Expired
type PreviewPhase string

const (
	// PreviewPending: the child fleet is being created or is not Ready yet.
	PreviewPending PreviewPhase = "Pending"
	// PreviewInitializing: the child fleet waits for its seed (spec.seed).
	PreviewInitializing PreviewPhase = "Initializing"
	// PreviewReady: the child fleet is Ready, and so is its route when the parent routes
	// previews.
	PreviewReady PreviewPhase = "Ready"
	// PreviewBlocked: the preview cannot proceed; the Ready condition says why and what to do.
	PreviewBlocked PreviewPhase = "Blocked"
	// PreviewDeleting: the preview is being deleted and waits for its child fleet.
	PreviewDeleting PreviewPhase = "Deleting"
	// PreviewExpired: the TTL has passed; the child fleet is deleted (or being deleted) and
	// the preview stays as a record until it is deleted.
	PreviewExpired PreviewPhase = "Expired"
)

// CelldPreview is a short-lived preview of an application: one small Bucket fleet that the
// operator generates in the preview bucket of a parent fleet (spec.previews), with its own
// storage prefix, URL and TTL. Developers create previews; platform teams configure the
// parent.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cpv,categories=celld
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,description="When the preview expires (RFC 3339); kubectl shows date columns as ages, which a future time cannot be"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.status.fleetName`,priority=1,description="The generated CelldFleet of this preview"
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.fleetRef.name`,priority=1,description="The parent fleet whose spec.previews this preview uses"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the preview is or is not Ready"
type CelldPreview struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the preview's object metadata. Its UID names the generated fleet, prefix and
	// URL, so a preview recreated under the same name gets new ones.
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested preview.
	// +required
	Spec CelldPreviewSpec `json:"spec"`

	// status is a projection of the generated fleet and the parent, rebuilt on every
	// reconcile. Editing it authorizes nothing.
	// +optional
	Status CelldPreviewStatus `json:"status,omitempty"`
}

// CelldPreviewSpec is a requested preview. fleetRef, ttlSeconds and seed are fixed at
// creation; source and revision are informational and may change.
//
// +kubebuilder:validation:XValidation:rule="self.fleetRef == oldSelf.fleetRef",fieldPath=".fleetRef",reason="FieldValueForbidden",message="spec.fleetRef of a CelldPreview is fixed at creation; create a new preview for another parent"
// +kubebuilder:validation:XValidation:rule="self.ttlSeconds == oldSelf.ttlSeconds",fieldPath=".ttlSeconds",reason="FieldValueForbidden",message="spec.ttlSeconds of a CelldPreview is fixed at creation; create a new preview for another lifetime"
// +kubebuilder:validation:XValidation:rule="has(self.seed) == has(oldSelf.seed) && (!has(self.seed) || self.seed == oldSelf.seed)",fieldPath=".seed",reason="FieldValueForbidden",message="spec.seed of a CelldPreview is fixed at creation, including its presence; create a new preview to seed other objects"
type CelldPreviewSpec struct {
	// fleetRef names the parent fleet, whose spec.previews configures this preview. Fixed at
	// creation.
	// +required
	FleetRef PreviewFleetRef `json:"fleetRef"`

	// source is informational CI metadata, for example the branch the preview was built
	// from. The operator does not read it.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Source string `json:"source,omitempty"`

	// revision is informational CI metadata, for example the commit deployed to the preview.
	// It is not an observation of what the preview runs, and changing it restarts nothing.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Revision string `json:"revision,omitempty"`

	// ttlSeconds is the preview's lifetime from its creation, 60 (one minute) to 604800 (seven
	// days), 86400 by default. On expiry the generated fleet is shut down and deleted through
	// its normal finalizer, and the preview stays as Expired. Fixed at creation.
	// +kubebuilder:default=86400
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=604800
	// +optional
	TTLSeconds int32 `json:"ttlSeconds,omitempty"`

	// seed asks a trusted external executor to copy selected objects into the preview before
	// its runtime starts. Fixed at creation.
	// +optional
	Seed *PreviewSeed `json:"seed,omitempty"`
}

// PreviewFleetRef names a preview's parent fleet.
type PreviewFleetRef struct {
	// name is the parent CelldFleet's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
	// namespace is the parent's namespace. It must be the preview's own namespace (or be
	// omitted): a preview runs in its parent's namespace, and a preview naming another one is
	// Blocked.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// PreviewSeed selects the objects a trusted executor copies into a new preview.
type PreviewSeed struct {
	// source is the alias of an administrator-approved source, never a bucket or fleet
	// address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Source string `json:"source"`
	// alarms says whether scheduled alarms of the copied objects are cleared (Clear, the
	// default) or kept (Preserve).
	// +kubebuilder:validation:Enum=Clear;Preserve
	// +kubebuilder:default=Clear
	// +optional
	Alarms string `json:"alarms,omitempty"`
	// objects are the 1 to 100 objects to copy, each a class and an ID.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=class
	// +listMapKey=id
	// +required
	Objects []SeedObject `json:"objects"`
}

// SeedObject is one object to copy.
type SeedObject struct {
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
}

// CelldPreviewStatus is a projection of the generated fleet.
type CelldPreviewStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase is the preview's state in one word: Pending, Initializing, Ready, Blocked,
	// Deleting or Expired.
	// +optional
	Phase PreviewPhase `json:"phase,omitempty"`
	// parentFleetName is the parent fleet.
	// +optional
	ParentFleetName string `json:"parentFleetName,omitempty"`
	// fleetName is the generated CelldFleet, named from the preview's UID.
	// +optional
	FleetName string `json:"fleetName,omitempty"`
	// storageURL is where the preview's application is deployed to (s3://BUCKET/PREFIX),
	// set once the generated fleet exists.
	// +optional
	StorageURL string `json:"storageURL,omitempty"`
	// url is the preview's address, SCHEME://FLEET.BASEDOMAIN, when the parent routes
	// previews.
	// +optional
	URL string `json:"url,omitempty"`
	// expiresAt is when the TTL runs out: creation plus spec.ttlSeconds.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// conditions are Ready (the generated fleet is Ready, and its route when routed) with a
	// reason and a message naming what to do.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CelldPreviewList is a list of CelldPreviews.
//
// +kubebuilder:object:root=true
type CelldPreviewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldPreview `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CelldPreview{}, &CelldPreviewList{})
}
