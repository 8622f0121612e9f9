package preview

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/predicates"
)

// Setup registers the CelldPreview controller with a manager. direct reads the API server.
func Setup(mgr ctrl.Manager, direct client.Client, workers int) error {
	r := &Reconciler{Client: mgr.GetClient(), Direct: direct}
	return ctrl.NewControllerManagedBy(mgr).
		// The preview's own status writes change neither its generation nor its metadata.
		For(&v1.CelldPreview{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicates.LifecycleChanged{}))).
		Named("celldpreview").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, CacheSyncTimeout: 24 * time.Hour}).
		// The generated fleet's status is the preview's, and a hand edit must be restored.
		Owns(&v1.CelldFleet{}).
		// A parent that appears, is deleted or gains spec.previews wakes its waiting previews.
		Watches(&v1.CelldFleet{}, handler.EnqueueRequestsFromMapFunc(r.previewsOf), builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicates.LifecycleChanged{}))).
		Complete(r)
}

// previewsOf maps a fleet to the previews that name it as their parent.
func (r *Reconciler) previewsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &v1.CelldPreviewList{}
	if err := r.Client.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, p := range list.Items {
		if p.Spec.FleetRef.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return out
}
