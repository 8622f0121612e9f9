// Package predicates holds the event filters the operator's controllers share.
package predicates

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// LifecycleChanged passes updates that change an object's finalizers or start its deletion:
// neither always changes the generation, and both change what a reconcile must do. A
// finalizer replaced by another of the same count is a change too.
type LifecycleChanged struct{ predicate.Funcs }

// Update passes an update whose finalizers differ or whose deletion started.
func (LifecycleChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	return !slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers()) ||
		(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
}
