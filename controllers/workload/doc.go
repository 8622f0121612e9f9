// Package workload renders the Kubernetes objects that run a fleet's celld members: the Pod
// template, the StatefulSet (PersistentFleet, and Bucket with the Ordered layout) and the
// Deployment (Bucket with the Deployment layout).
//
// Everything here is pure: a builder reads a defaulted, validated CelldFleet and Options and
// returns a new object. There is no client, no clock and no randomness, maps are emitted by
// encoding in sorted order, and the same input always renders byte-identical YAML, so the
// golden files under testdata/ are stable and SpecHash can decide whether a write is needed.
//
// What reaches the Pod template decides what rolls. env, telemetry, export, mesh membership,
// runtimeImage, the restart token, execution and lifecycle are rendered into the template, so
// changing them rolls the fleet one member at a time through the workload controller. routing,
// capacity, maintenance.paused, replicas and the mesh's control-plane namespace and application
// access never reach it: changing them must not restart a member (see rolls_test.go).
//
// Rendered workloads carry the fleet UID label and no owner references: deletion is gated by
// the operator's finalizer, and a foreground delete of the CelldFleet must not cascade to the
// members before that gate runs.
package workload
