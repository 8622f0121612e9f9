// Package fleet is the CelldFleet reconciler: a thin shell over the pure packages. Each pass
// observes what one decision needs into a scope, runs an ordered list of phases (deletion,
// validation, finalizer, guards, reservation, static children, capacity, workload, healing)
// until one stops, takes at most one disruptive action, and projects status from the scope.
// It stores nothing about the lifecycle: every decision is re-derived from the fleet, its
// workload, Pods, claims, reservation and the clock.
//
// The files follow the pass:
//
//   - reconciler.go: the Reconciler and one pass (Reconcile, the phase list, errors to findings);
//   - observe.go: every read (workload, members, guards, reservation, the workload's rendering
//     and drift, the confirmation and deletion re-reads);
//   - plan.go: the scope, and each phase's decision, made by the pure planners of
//     controllers/lifecycle, controllers/reservation and controllers/capacity;
//   - act.go: the executor (do), through which every API write of a pass goes, and the writes;
//   - handoff.go: the replacement handoff (hold, commit, the verified claim delete, release);
//   - layout.go: the one workload abstraction, what differs between a StatefulSet and a
//     Deployment (rendering, the update's immutable fields, facts, replicas, template);
//   - report.go: status projection, events and the status write;
//   - memory.go: what is kept of a fleet between passes (Memory, one entry per fleet UID), and
//     the one forget over it and the shared packages' memories;
//   - metrics.go, setup.go: metrics; construction, options and watches.
package fleet
