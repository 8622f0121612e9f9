package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CelldStorageReservation permanently binds a bucket (or a bucket prefix) to one fleet UID. It
// is a durable, cluster-wide tombstone: never garbage collected, never transferred to a fleet
// recreated under the same name. Its name is derived from the bucket, so Create is the
// arbitration point between fleets that ask for the same bucket.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=celld
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.fleetNamespace`
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.spec.fleetName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.seed) || (has(self.status) && has(self.status.seed))",fieldPath=".status.seed",reason="FieldValueForbidden",message="status.seed of a CelldStorageReservation is retained: it cannot be removed"
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.seed) || !has(self.status.seed.phase) || self.status.seed.phase != 'Succeeded' || (has(oldSelf.status) && has(oldSelf.status.seed) && has(oldSelf.status.seed.phase) && oldSelf.status.seed.phase in ['Running', 'Succeeded'])",fieldPath=".status.seed.phase",reason="FieldValueForbidden",message="status.seed.phase Succeeded requires a prior Running claim with an executorID"
type CelldStorageReservation struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the reservation's object metadata. Its name is derived from the bucket
	// ("s3-" and a sha256 of it; "s3-scope-" and a sha256 of bucket and prefix for a preview
	// prefix), so creating it arbitrates between fleets asking for the same bucket.
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",reason="FieldValueForbidden",message="spec of a CelldStorageReservation is immutable: a bucket stays bound to the fleet UID that reserved it"
	// +required
	Spec CelldStorageReservationSpec `json:"spec"`

	// status holds the retained preview-seed result.
	// +optional
	Status CelldStorageReservationStatus `json:"status,omitempty"`
}

// ReservationOwnerKind says what holds the reservation.
// +kubebuilder:validation:Enum="";FleetPreviews
type ReservationOwnerKind string

// ReservationOwnerFleetPreviews: the reservation is a preview pool, the whole preview bucket
// of the parent fleet it names, in which each preview fleet reserves its own prefix.
const ReservationOwnerFleetPreviews ReservationOwnerKind = "FleetPreviews"

// CelldStorageReservationSpec records what the bucket is bound to.
type CelldStorageReservationSpec struct {
	// ownerKind is empty for a fleet's own bucket, FleetPreviews for a preview bucket.
	// +optional
	OwnerKind ReservationOwnerKind `json:"ownerKind,omitempty"`
	// bucket is the reserved bucket.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`
	// prefix is the reserved key prefix, for preview fleets.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// endpoint is a custom S3 endpoint, for preview fleets.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// initialReplicas is the fleet's replica count at creation.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +required
	InitialReplicas int32 `json:"initialReplicas"`
	// fleetNamespace is the namespace of the fleet that reserved the bucket.
	// +kubebuilder:validation:MaxLength=63
	// +required
	FleetNamespace string `json:"fleetNamespace"`
	// fleetName is the name of the fleet that reserved the bucket. A fleet recreated under this
	// name has another UID and does not get the bucket back.
	// +kubebuilder:validation:MaxLength=40
	// +required
	FleetName string `json:"fleetName"`
	// fleetUID is the only fleet that may use the bucket.
	// +kubebuilder:validation:MaxLength=64
	// +required
	FleetUID string `json:"fleetUID"`
	// seed is a preview fleet's seed request (its spec.storage.seed), recorded at creation:
	// the executor it names copies the objects into the prefix, and the fleet starts nothing
	// until the result in status.seed succeeded.
	// +optional
	Seed *SeedRequest `json:"seed,omitempty"`
	// specHash is the sha256 of the fleet's creation-time storage-relevant spec.
	// +kubebuilder:validation:MaxLength=64
	// +required
	SpecHash string `json:"specHash"`
}

// CelldStorageReservationStatus holds the retained preview-seed result.
type CelldStorageReservationStatus struct {
	// seed is the progress and result of seeding a preview fleet's prefix (spec.seed), written
	// by the trusted external executor, and by the operator to cancel. It is retained after the
	// fleet is gone.
	// +optional
	Seed *SeedResult `json:"seed,omitempty"`
}

// CelldStorageReservationList is a list of reservations.
//
// +kubebuilder:object:root=true
type CelldStorageReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldStorageReservation `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CelldStorageReservation{}, &CelldStorageReservationList{})
}
