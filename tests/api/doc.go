// Package api proves the CelldFleet and CelldStorageReservation CRDs against a real
// kube-apiserver and etcd (controller-runtime envtest over the binaries in bin/): every CEL
// rule, every immutable field, the status and scale subresources and the printer columns.
package api
