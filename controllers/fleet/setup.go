package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/nscache"
	"github.com/celld/celld-operator/controllers/predicates"
	"github.com/celld/celld-operator/controllers/watches"
)

// Setup registers the CelldFleet controller with a manager. watches maps the CelldFleet GVK
// to the embedded chart that renders its static children.
func Setup(mgr ctrl.Manager, o Options, watches []watches.Watch) (*Reconciler, error) {
	r, err := New(mgr, o, watches)
	if err != nil {
		return nil, err
	}
	return r, r.SetupWithManager(mgr)
}

// SetupWithManager registers r. A fleet is reconciled when its spec, labels, annotations,
// finalizers or deletion change (never for a status write, its own or the observer's), when
// any of its cached children changes (unless watches.yaml turns watchDependentResources off),
// when the StorageClass it names changes, when the reservation of a seeded preview fleet
// changes, and at the resync period.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Caches != nil {
		if err := mgr.Add(r.Caches); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.CelldFleet{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, predicates.LifecycleChanged{}))).
		Named("celldfleet").
		// An operator started without the rights to list and watch CelldFleets or StorageClasses
		// waits (the informers log each Forbidden, and main.go names the missing rule at start)
		// instead of exiting after the default two minutes and crash-looping.
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles, CacheSyncTimeout: 24 * time.Hour}).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.fleetsOfStorageClass)).
		// A seeded preview fleet waits for its executor's write to its reservation's status.
		Watches(&v1.CelldStorageReservation{}, handler.EnqueueRequestsFromMapFunc(r.seededFleet))
	if r.Caches != nil && r.Options.WatchDependentResources {
		// Children are mapped to their fleet through an index of the manager's cache by UID,
		// so an event costs a lookup, not a list of every fleet of its namespace.
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1.CelldFleet{}, fleetUIDIndex, func(o client.Object) []string {
			return []string{string(o.GetUID())}
		}); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(r.Caches.Events(), handler.EnqueueRequestsFromMapFunc(r.fleetsOf)))
	}
	if r.Memory != nil && r.Memory.wake != nil {
		// each capacity collection wakes its fleet, so a decision follows every sample
		b = b.WatchesRawSource(source.Channel(r.Memory.wake, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// seededFleet maps a reservation that records a seed to the fleet holding it: the executor's
// progress, a cancellation's acknowledgement or the gate change what that fleet may do.
// Reservations without a seed wake nothing.
func (r *Reconciler) seededFleet(_ context.Context, obj client.Object) []reconcile.Request {
	res, ok := obj.(*v1.CelldStorageReservation)
	if !ok || res.Spec.Seed == nil {
		return nil
	}
	// Reservations are cluster-scoped, so an operator installed for some namespaces sees
	// every instance's; a fleet outside its namespaces is another instance's to reconcile.
	if len(r.Options.Namespaces) > 0 && !slices.Contains(r.Options.Namespaces, res.Spec.FleetNamespace) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: res.Spec.FleetNamespace, Name: res.Spec.FleetName}}}
}

// fleetUIDIndex indexes the manager's cache of CelldFleets by UID.
const fleetUIDIndex = "celld.eric.dev/uid"

// fleetsOf maps a cached child to its fleet: by the fleet UID label, which every object the
// operator creates carries (and a label-restricted informer reports the old object when a hand
// edit removes it), looked up in the UID index. Two unlabelled kinds are cached too: a claim
// wakes the fleet whose member name it carries (a claim there that is not the fleet's is
// refused), a ServiceAccount the fleets that run as it. Fleets are read from the cache without
// copies (they are only read), and every Pod and claim event of a namespace comes here: with
// 300 fleets in a namespace, listing them all for each event was most of what the operator
// allocated. When an event finds no fleet, the namespace's cache is released if its last fleet
// is gone.
func (r *Reconciler) fleetsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := obj.GetNamespace()
	var out []reconcile.Request
	switch uid := obj.GetLabels()[v1.LabelFleetUID]; {
	case uid != "":
		out = r.fleetsWhere(ctx, ns, nil, client.MatchingFields{fleetUIDIndex: uid})
	case isKind(obj, "PersistentVolumeClaim"):
		key := client.ObjectKey{Namespace: ns, Name: v1.ClaimFleet(obj.GetName())}
		if key.Name != "" && r.Client.Get(ctx, key, &v1.CelldFleet{}, client.UnsafeDisableDeepCopy) == nil {
			out = []reconcile.Request{{NamespacedName: key}}
		}
	case isKind(obj, "ServiceAccount"):
		out = r.fleetsWhere(ctx, ns, func(f *v1.CelldFleet) bool { return runsAs(f, obj.GetName()) })
	}
	if len(out) == 0 {
		r.releaseNamespace(ctx, ns)
	}
	return out
}

// fleetsWhere lists the cached fleets of namespace ns selected by opts (without copies: they
// are only read) and returns those keep accepts (all when keep is nil).
func (r *Reconciler) fleetsWhere(ctx context.Context, ns string, keep func(*v1.CelldFleet) bool, opts ...client.ListOption) []reconcile.Request {
	list := &v1.CelldFleetList{}
	if err := r.Client.List(ctx, list, append(opts, client.InNamespace(ns), client.UnsafeDisableDeepCopy)...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if keep == nil || keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// isKind says whether a cached object is of kind: a typed claim, or the metadata-only
// ServiceAccount.
func isKind(obj client.Object, kind string) bool {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		return kind == "PersistentVolumeClaim"
	case *metav1.PartialObjectMetadata:
		return o.Kind == kind
	}
	return false
}

// runsAs says whether fleet f runs as the ServiceAccount named sa (its defaulted
// spec.serviceAccountName).
func runsAs(f *v1.CelldFleet, sa string) bool {
	d := f.DeepCopy()
	d.Default()
	return d.Spec.ServiceAccountName == sa
}

// fleetsOfStorageClass wakes the PersistentFleets that name a StorageClass, so a fleet waiting
// for its class (StorageClassMissing, InvalidStorageClass) proceeds when it is created or fixed.
func (r *Reconciler) fleetsOfStorageClass(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &v1.CelldFleetList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil
	}
	var out []reconcile.Request
	for _, f := range list.Items {
		if s := f.Spec.Storage.StorageClassName; s != nil && *s == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&f)})
		}
	}
	return out
}

// New builds a Reconciler from a manager: cached reads of CelldFleets, per-namespace caches of
// their children, direct reads where safety needs them, the chart renderer of the CelldFleet
// watch and the event recorder. The CelldFleet entry of watches.yaml sets the resync period,
// the workers and whether children are watched; Options override them when set.
func New(mgr ctrl.Manager, o Options, watches []watches.Watch) (*Reconciler, error) {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	var renderer *children.Renderer
	for _, w := range watches {
		if w.GroupVersionKind() == v1.GroupVersion.WithKind("CelldFleet") {
			if renderer, err = children.NewRenderer(w.Chart, w.OverrideValues); err != nil {
				return nil, err
			}
			o = o.withWatch(w)
		}
	}
	if renderer == nil {
		return nil, fmt.Errorf("watches.yaml has no entry for %s CelldFleet", v1.GroupVersion)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	apis := cachedAPIs(dc, 30*time.Second)
	caches, err := nscache.New(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), func(ctx context.Context) (nscache.APIs, error) {
		gw, istio, err := apis(ctx)
		return nscache.APIs{GatewayAPI: gw, Istio: istio}, err
	})
	if err != nil {
		return nil, err
	}
	return &Reconciler{
		Client:   mgr.GetClient(),
		Direct:   direct,
		Caches:   caches,
		Recorder: mgr.GetEventRecorder("celld-operator"),
		Options:  o,
		Children: renderer,
		Applier:  &children.Applier{Direct: direct},
		Drift:    &drift.Detector{},
		APIs:     apis,
		Memory:   NewMemory(),
		created:  &drift.Answers{},
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

// Options are the operator-wide settings of the reconciler, set from flags and from the
// CelldFleet entry of watches.yaml.
type Options struct {
	// NetworkPolicyEnforced is the administrator's attestation that the CNI enforces
	// NetworkPolicy; without it no fleet is provisioned (IsolationUnverified).
	NetworkPolicyEnforced bool
	// MemberReplacementDelay is the patience before a lone down member gets a fresh disk.
	MemberReplacementDelay time.Duration
	// AbsorbWindow is how long every other member must have been Ready before a replacement:
	// by then no session depends on the down member's disk.
	AbsorbWindow time.Duration
	// TerminationMargin is how long past its grace a terminating member is force-deleted.
	TerminationMargin time.Duration
	// RequeuePeriod is the resync of a settled fleet: how often it is re-examined without an
	// event. Zero takes watches.yaml's reconcilePeriod (default DefaultResyncPeriod); drift is
	// caught by events, not by this period.
	RequeuePeriod time.Duration
	// WaitingRequeue is how often a fleet that is not settled (blocked, provisioning, routing
	// not ready) is re-examined without an event: some of what it waits for is not watched (an
	// API installed later, a Role applied, a foreign object at the fleet's name removed).
	WaitingRequeue time.Duration
	// MaxConcurrentReconciles is how many fleets are reconciled at once; zero takes
	// watches.yaml's maxConcurrentReconciles (default DefaultMaxConcurrentReconciles).
	MaxConcurrentReconciles int
	// WatchDependentResources: every change of a cached child wakes its fleet. watches.yaml's
	// watchDependentResources: false turns it off; children are then re-examined at the resync
	// period only (and still read from the caches).
	WatchDependentResources bool
	// Namespaces are the namespaces this operator watches (WATCH_NAMESPACE); empty: all. The
	// cluster-scoped reservations of fleets elsewhere belong to another instance.
	Namespaces []string
	// OperatorNamespace and OperatorServiceAccount identify the operator's Pods to the fleet
	// NetworkPolicy and mesh policy.
	OperatorNamespace      string
	OperatorServiceAccount string
	// StorageProvisioners are the CSI provisioners accepted for PersistentFleet disks.
	StorageProvisioners []string
	// NodeLossTolerationSeconds shortens the unreachable/not-ready tolerations of members
	// (e2e only); nil keeps Kubernetes' default of 300 s.
	NodeLossTolerationSeconds *int64
}

// Defaults of the settings watches.yaml may set.
const (
	DefaultResyncPeriod            = 10 * time.Minute
	DefaultMaxConcurrentReconciles = 16
)

// DefaultOptions are the production defaults from the seeds.
func DefaultOptions() Options {
	return Options{
		MemberReplacementDelay:  10 * time.Minute,
		AbsorbWindow:            5 * time.Minute,
		TerminationMargin:       2 * time.Minute,
		WaitingRequeue:          30 * time.Second,
		WatchDependentResources: true,
		OperatorNamespace:       "celld-system",
		OperatorServiceAccount:  "celld-operator",
		StorageProvisioners:     []string{"ebs.csi.aws.com"},
	}
}

// withWatch fills what the options leave unset from the CelldFleet watch, then the defaults.
func (o Options) withWatch(w watches.Watch) Options {
	if o.RequeuePeriod == 0 && w.ReconcilePeriod != nil {
		o.RequeuePeriod = w.ReconcilePeriod.Duration
	}
	if o.RequeuePeriod == 0 {
		o.RequeuePeriod = DefaultResyncPeriod
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = w.MaxConcurrentReconciles
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if w.WatchDependentResources != nil && !*w.WatchDependentResources {
		o.WatchDependentResources = false
	}
	if o.WaitingRequeue <= 0 || o.WaitingRequeue > o.RequeuePeriod {
		o.WaitingRequeue = min(30*time.Second, o.RequeuePeriod)
	}
	return o
}
