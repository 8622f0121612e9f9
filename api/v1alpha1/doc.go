// Package v1alpha1 holds the celld.eric.dev/v1alpha1 API: CelldFleet, the namespaced request
// for one celld cluster, and CelldStorageReservation, the cluster-scoped, permanent binding of
// a bucket to one fleet UID.
//
// Every admission rule is written twice on purpose: as a CEL rule in the CRD, so a bad object
// is refused with a message that names the field and the fix, and as Validate in Go, so an
// object that bypassed admission (an older CRD, a direct etcd write) still fails closed before
// anything is rendered. A test runs one corpus through both and requires the same verdicts.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +groupName=celld.eric.dev
package v1alpha1
