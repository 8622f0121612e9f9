package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
)

// Setup registers the CelldFleet controller with a manager. watches maps the CelldFleet GVK
// to the embedded chart that renders its static children.
func Setup(mgr ctrl.Manager, o Options, watches []children.Watch) error {
	r, err := New(mgr, o, watches)
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// SetupWithManager registers r: it watches CelldFleets and re-examines each one every
// RequeuePeriod, since its children are read directly rather than watched.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.CelldFleet{}).
		Named("celldfleet").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// New builds a Reconciler from a manager: cached reads of CelldFleets, direct reads of
// everything namespaced, the chart renderer of the CelldFleet watch and the event recorder.
func New(mgr ctrl.Manager, o Options, watches []children.Watch) (*Reconciler, error) {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	var renderer *children.Renderer
	for _, w := range watches {
		if w.GroupVersionKind() == v1.GroupVersion.WithKind("CelldFleet") {
			if renderer, err = children.NewRenderer(w); err != nil {
				return nil, err
			}
		}
	}
	if renderer == nil {
		return nil, fmt.Errorf("watches.yaml has no entry for %s CelldFleet", v1.GroupVersion)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return &Reconciler{
		Client:   mgr.GetClient(),
		Direct:   direct,
		Recorder: mgr.GetEventRecorder("celld-operator"),
		Options:  o,
		Children: renderer,
		Applier:  &children.Applier{},
		Drift:    &drift.Detector{},
		APIs:     cachedAPIs(dc, 30*time.Second),
		metrics:  defaultMetrics(),
	}, nil
}

// cachedAPIs asks discovery which optional APIs are served at most once per ttl: a CRD
// installed later is noticed within ttl, and a settled fleet's reconcile costs no discovery
// request.
func cachedAPIs(dc discovery.DiscoveryInterface, ttl time.Duration) func(context.Context) (bool, bool, error) {
	var (
		mu        sync.Mutex
		at        time.Time
		gw, istio bool
	)
	return func(context.Context) (bool, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) < ttl {
			return gw, istio, nil
		}
		g, i, err := children.APIs(dc)
		if err != nil {
			return false, false, err
		}
		gw, istio, at = g, i, time.Now()
		return gw, istio, nil
	}
}
