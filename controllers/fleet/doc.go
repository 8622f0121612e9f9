// Package fleet is the CelldFleet reconciler: a thin shell over the pure packages. Each pass
// observes everything one decision needs into a scope, runs an ordered list of phases
// (deletion, validation, guards, reservation, static children, workload, healing) until one
// stops, takes at most one disruptive action, and projects status from the scope. It stores
// nothing about the lifecycle: every decision is re-derived from the fleet, its workload,
// Pods, claims, reservation and the clock.
package fleet
