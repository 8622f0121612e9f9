package nscache

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Optional APIs whose kinds are cached only while the cluster serves them.
var (
	GVKHTTPRoute           = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	GVKAuthorizationPolicy = schema.GroupVersionKind{Group: "security.istio.io", Version: "v1", Kind: "AuthorizationPolicy"}
	GVKPeerAuthentication  = schema.GroupVersionKind{Group: "security.istio.io", Version: "v1", Kind: "PeerAuthentication"}
)

// APIs says which optional APIs the cluster serves.
type APIs struct{ GatewayAPI, Istio bool }

// kind is one cached kind: the object the cache is read with (typed, unstructured for the
// chart's children, metadata-only for ServiceAccounts) and whether it is label-restricted.
type kind struct {
	gvk schema.GroupVersionKind
	// proto returns an empty object of the form the readers use; the cache keeps one informer
	// per kind and form, so every reader of a kind must use the same form.
	proto func() client.Object
	// all: every object of the namespace, not only the fleet-labelled ones.
	all bool
	// unread says whether an update changed only what no decision reads, so it wakes no
	// fleet (the cache still holds the new version); nil: every change wakes.
	unread func(old, new client.Object) bool
}

func typed(obj client.Object, gvk schema.GroupVersionKind, all bool) kind {
	return kind{gvk: gvk, all: all, proto: func() client.Object { return obj.DeepCopyObject().(client.Object) }}
}

// unstructuredKind is a chart child's kind; statusUnread: no decision reads its status (the
// operator converges its spec and metadata), so a status-only update wakes no fleet.
func unstructuredKind(gvk schema.GroupVersionKind, statusUnread bool) kind {
	k := kind{gvk: gvk, proto: func() client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u
	}}
	if statusUnread {
		k.unread = onlyStatus
	}
	return k
}

func metadataKind(gvk schema.GroupVersionKind, all bool) kind {
	return kind{gvk: gvk, all: all, proto: func() client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m
	}}
}

// claims are cached typed and unrestricted. No decision reads a claim's annotations, which the
// scheduler, the PV controller and provisioners write several times while a claim binds
// (selected-node, storage-provisioner, bind-completed), so an update that changed only them
// wakes no fleet; its phase, spec (the volume it binds), labels, finalizers and deletion do.
var claims = func() kind {
	k := typed(&corev1.PersistentVolumeClaim{}, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), true)
	k.unread = onlyAnnotations
	return k
}()

// kinds are the kinds a fleet namespace's cache holds, given the optional APIs served.
//
//   - Pods, StatefulSets, Deployments and ReplicaSets (the observer's ownership proof) are typed
//     and label-restricted;
//   - claims are typed and unrestricted: the planner refuses a claim at a member's name that
//     is not the fleet's (StorageIdentityConflict), so it must see claims without the label;
//   - ServiceAccounts are metadata only and unrestricted: the runtime ServiceAccount is
//     checked by name and carries no fleet label;
//   - the chart's children are unstructured (the applier handles every kind alike) and
//     label-restricted.
func kinds(apis APIs) []kind {
	ks := []kind{
		typed(&corev1.Pod{}, corev1.SchemeGroupVersion.WithKind("Pod"), false),
		claims,
		typed(&appsv1.StatefulSet{}, appsv1.SchemeGroupVersion.WithKind("StatefulSet"), false),
		typed(&appsv1.Deployment{}, appsv1.SchemeGroupVersion.WithKind("Deployment"), false),
		typed(&appsv1.ReplicaSet{}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), false),
		metadataKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"), true),
		unstructuredKind(corev1.SchemeGroupVersion.WithKind("Service"), true),
		unstructuredKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, true),
		unstructuredKind(schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, true),
		// RoutingReady reports a route's status: an Ingress's and an HTTPRoute's wake the fleet
		unstructuredKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, false),
	}
	if apis.GatewayAPI {
		ks = append(ks, unstructuredKind(GVKHTTPRoute, false))
	}
	if apis.Istio {
		ks = append(ks, unstructuredKind(GVKAuthorizationPolicy, true), unstructuredKind(GVKPeerAuthentication, true))
	}
	return ks
}

// ClaimFleetIndex indexes a namespace's claims by the fleet whose member name they carry
// (v1.ClaimFleet): list a fleet's claims, labelled or not, with
// client.MatchingFields{ClaimFleetIndex: fleetName}.
const ClaimFleetIndex = "celld.eric.dev/claim-fleet"

// FleetUIDIndex indexes every cached object by its fleet UID label. Readers need not name it:
// a List selecting one fleet's UID label uses it.
const FleetUIDIndex = "celld.eric.dev/fleet-uid"

func fleetUID(o client.Object) []string {
	if uid := o.GetLabels()[v1.LabelFleetUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

func claimFleet(o client.Object) []string {
	if f := v1.ClaimFleet(o.GetName()); f != "" {
		return []string{f}
	}
	return nil
}

// Set holds the per-namespace caches. It is a manager Runnable: caches live until the manager
// stops, or until their namespace has no fleet left (Release).
type Set struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	// direct proves list and watch before a cache starts.
	direct client.WithWatch
	// apis reports the optional APIs; a change restarts each namespace's cache with the new
	// kinds on its next use.
	apis func(context.Context) (APIs, error)
	// SyncTimeout bounds the first sync of a namespace's informers.
	SyncTimeout time.Duration

	events chan event.GenericEvent

	mu     sync.Mutex
	ctx    context.Context // the manager's, once started
	spaces map[string]*space
}

type space struct {
	ready  chan struct{} // closed when the cache synced or failed
	err    error         // why it could not start (a Forbidden, usually)
	apis   APIs
	cache  cache.Cache
	cancel context.CancelFunc

	mu     sync.Mutex
	denied error // a later Forbidden from a reflector: the Role was removed or lacks watch
}

// New builds a Set. apis reports which optional APIs the cluster serves.
func New(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, apis func(context.Context) (APIs, error)) (*Set, error) {
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	return &Set{cfg: cfg, scheme: scheme, mapper: mapper, direct: direct, apis: apis, SyncTimeout: time.Minute,
		events: make(chan event.GenericEvent, 4096), spaces: map[string]*space{}}, nil
}

// Events delivers every add, update and delete of a cached object; map each to its fleet.
func (s *Set) Events() <-chan event.GenericEvent { return s.events }

// Start runs until ctx ends, then stops every namespace cache.
func (s *Set) Start(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for ns, sp := range s.spaces {
		if sp.cancel != nil {
			sp.cancel()
		}
		delete(s.spaces, ns)
	}
	return nil
}

// NeedLeaderElection is false: caches start only when a leader's reconcile asks for one.
func (s *Set) NeedLeaderElection() bool { return false }

// Reader returns the cache of namespace ns, starting it on first use. Reading a kind the cache
// does not hold answers a NoKindMatchError, as the API server would for an unserved kind. An
// error that IsForbidden means the operator may not list or watch a child kind there.
func (s *Set) Reader(ctx context.Context, ns string) (client.Reader, error) {
	apis, err := s.apis(ctx)
	if err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.ctx == nil {
			s.mu.Unlock()
			return nil, errors.New("namespace caches are not started yet")
		}
		sp, ok := s.spaces[ns]
		if !ok {
			sp = &space{ready: make(chan struct{}), apis: apis}
			s.spaces[ns] = sp
			base := s.ctx
			s.mu.Unlock()
			s.start(base, ns, sp)
			return s.readerOf(ns, sp)
		}
		s.mu.Unlock()
		select {
		case <-sp.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sp.apis == apis && sp.err == nil && sp.deniedErr() == nil {
			return reader{cache: sp.cache, scheme: s.scheme}, nil
		}
		// Failed, denied since, or the served APIs changed: start again.
		s.drop(ns, sp)
	}
}

func (s *Set) readerOf(ns string, sp *space) (client.Reader, error) {
	if sp.err != nil {
		s.drop(ns, sp)
		return nil, sp.err
	}
	return reader{cache: sp.cache, scheme: s.scheme}, nil
}

// Release stops the cache of a namespace that holds no fleet any more.
func (s *Set) Release(ns string) {
	s.mu.Lock()
	sp, ok := s.spaces[ns]
	s.mu.Unlock()
	if ok {
		select {
		case <-sp.ready:
			s.drop(ns, sp)
		default: // starting: the next Release (or the next failure) stops it
		}
	}
}

// Namespaces lists the namespaces with a cache, for tests and metrics.
func (s *Set) Namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.spaces))
	for ns := range s.spaces {
		out = append(out, ns)
	}
	return out
}

func (s *Set) drop(ns string, sp *space) {
	s.mu.Lock()
	if s.spaces[ns] == sp {
		delete(s.spaces, ns)
	}
	s.mu.Unlock()
	if sp.cancel != nil {
		sp.cancel()
	}
}

func (sp *space) deniedErr() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.denied
}

// start probes the rights, builds the cache, registers the event handlers and waits for the
// first sync. It closes sp.ready in every case.
func (s *Set) start(base context.Context, ns string, sp *space) {
	defer close(sp.ready)
	ks := kinds(sp.apis)
	probeCtx, cancelProbe := context.WithTimeout(base, s.SyncTimeout)
	defer cancelProbe()
	if sp.err = s.probe(probeCtx, ns, ks); sp.err != nil {
		return
	}
	fleetLabel, err := labels.NewRequirement(v1.LabelFleetUID, selection.Exists, nil)
	if err != nil {
		sp.err = err
		return
	}
	opts := cache.Options{
		Scheme:                      s.scheme,
		Mapper:                      s.mapper,
		DefaultNamespaces:           map[string]cache.Config{ns: {}},
		DefaultLabelSelector:        labels.NewSelector().Add(*fleetLabel),
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true,
		ByObject:                    map[client.Object]cache.ByObject{},
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			if AccessDenied(err) {
				sp.mu.Lock()
				sp.denied = err
				sp.mu.Unlock()
			}
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		},
	}
	for _, k := range ks {
		if k.all {
			opts.ByObject[k.proto()] = cache.ByObject{Label: labels.Everything()}
		}
	}
	c, err := cache.New(s.cfg, opts)
	if err != nil {
		sp.err = fmt.Errorf("build the cache of namespace %s: %w", ns, err)
		return
	}
	ctx, cancel := context.WithCancel(base)
	sp.cache, sp.cancel = c, cancel
	if err := c.IndexField(ctx, &corev1.PersistentVolumeClaim{}, ClaimFleetIndex, claimFleet); err != nil {
		sp.err = fmt.Errorf("index the claims of namespace %s: %w", ns, err)
		cancel()
		return
	}
	for _, k := range ks {
		if err := c.IndexField(ctx, k.proto(), FleetUIDIndex, fleetUID); err != nil {
			sp.err = fmt.Errorf("index the %s objects of namespace %s: %w", k.gvk.Kind, ns, err)
			cancel()
			return
		}
	}
	for _, k := range ks {
		inf, err := c.GetInformer(ctx, k.proto(), cache.BlockUntilSynced(false))
		if err != nil {
			sp.err = fmt.Errorf("watch %s in namespace %s: %w", k.gvk.Kind, ns, err)
			cancel()
			return
		}
		if _, err := inf.AddEventHandler(s.handler(ctx, k)); err != nil {
			sp.err = err
			cancel()
			return
		}
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			log.FromContext(ctx).Error(err, "namespace cache stopped", "namespace", ns)
		}
	}()
	syncCtx, cancelSync := context.WithTimeout(ctx, s.SyncTimeout)
	defer cancelSync()
	if !c.WaitForCacheSync(syncCtx) {
		sp.err = fmt.Errorf("the cache of namespace %s did not sync within %s", ns, s.SyncTimeout)
		if d := sp.deniedErr(); d != nil {
			sp.err = d
		}
		cancel()
	}
}

// probe proves, for every kind, that the operator may list and watch it in ns: an informer
// without the rights would retry forever instead of failing. The kinds are probed at once; it
// returns the first Forbidden (or other error) in kind order.
func (s *Set) probe(ctx context.Context, ns string, ks []kind) error {
	errs := make([]error, len(ks))
	var wg sync.WaitGroup
	for i, k := range ks {
		wg.Go(func() { errs[i] = s.probeKind(ctx, ns, k) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Set) probeKind(ctx context.Context, ns string, k kind) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	if err := s.direct.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
		return fmt.Errorf("list %s in namespace %s: %w", k.gvk.Kind, ns, err)
	}
	w, err := s.direct.Watch(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: "probe"})
	if err != nil {
		return fmt.Errorf("watch %s in namespace %s: %w", k.gvk.Kind, ns, err)
	}
	w.Stop()
	return nil
}

// handler forwards every change of a cached object of kind k to Events, and counts it. An
// update that changed nothing (a resync) is not forwarded, nor one that changed only what no
// decision reads (kind.unread).
func (s *Set) handler(ctx context.Context, k kind) toolscache.ResourceEventHandler {
	woke, skipped := childEvents.WithLabelValues(k.gvk.Kind, "true"), childEvents.WithLabelValues(k.gvk.Kind, "false")
	send := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		woke.Inc()
		select {
		case s.events <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { send(obj) },
		UpdateFunc: func(old, obj any) {
			a, aok := old.(client.Object)
			b, bok := obj.(client.Object)
			if aok && bok && (a.GetResourceVersion() == b.GetResourceVersion() || (k.unread != nil && k.unread(a, b))) {
				skipped.Inc()
				return
			}
			send(obj)
		},
		DeleteFunc: send,
	}
}

// onlyStatus says whether two versions of an unstructured object differ only in their status
// and the metadata every write moves (resourceVersion, managedFields). Neither object is
// changed: they are the cache's own.
func onlyStatus(a, b client.Object) bool {
	ua, ub, ok := both[*unstructured.Unstructured](a, b)
	return ok && equality.Semantic.DeepEqual(withoutStatus(ua.Object), withoutStatus(ub.Object))
}

// onlyAnnotations says whether two versions of a claim differ only in their annotations and
// the metadata every write moves. The copies are shallow: neither cached object is changed.
func onlyAnnotations(a, b client.Object) bool {
	ca, cb, ok := both[*corev1.PersistentVolumeClaim](a, b)
	if !ok {
		return false
	}
	x, y := *ca, *cb
	x.Annotations, y.Annotations = nil, nil
	x.ResourceVersion, y.ResourceVersion = "", ""
	x.ManagedFields, y.ManagedFields = nil, nil
	return equality.Semantic.DeepEqual(x, y)
}

// both are a and b as T, and whether both are.
func both[T client.Object](a, b client.Object) (T, T, bool) {
	x, okA := a.(T)
	y, okB := b.(T)
	return x, y, okA && okB
}

// withoutStatus is a shallow copy of obj without status, resourceVersion and managedFields.
func withoutStatus(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			if k != "resourceVersion" && k != "managedFields" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

// reader reads one namespace's cache. A kind the cache does not hold is answered as the API
// server answers an unserved kind, so callers keep one rule for "this API is not served".
type reader struct {
	cache  cache.Cache
	scheme *runtime.Scheme
}

func (r reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.translate(obj, r.cache.Get(ctx, key, obj, opts...))
}

// List lists from the cache. A selection of one fleet's objects by its UID label goes through
// the FleetUIDIndex (the label selector still applies), so it visits that fleet's objects
// only, not every object of its kind in the namespace.
func (r reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.FieldSelector == nil && lo.LabelSelector != nil {
		if uid, ok := oneFleet(lo.LabelSelector); ok {
			lo.FieldSelector = fields.OneTermEqualSelector(FleetUIDIndex, uid)
		}
	}
	return r.translate(list, r.cache.List(ctx, list, lo))
}

// oneFleet is the fleet UID a label selector requires exactly, if it requires one.
func oneFleet(sel labels.Selector) (string, bool) {
	reqs, _ := sel.Requirements()
	for _, req := range reqs {
		if req.Key() != v1.LabelFleetUID {
			continue
		}
		switch req.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := req.Values(); vals.Len() == 1 {
				return vals.UnsortedList()[0], true
			}
		}
	}
	return "", false
}

func (r reader) translate(obj runtime.Object, err error) error {
	var missing *cache.ErrResourceNotCached
	if err == nil || !errors.As(err, &missing) {
		return err
	}
	gvk, gerr := apiutil.GVKForObject(obj, r.scheme)
	if gerr != nil {
		return err
	}
	if k, found := trimList(gvk); found {
		gvk = k
	}
	return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

func trimList(gvk schema.GroupVersionKind) (schema.GroupVersionKind, bool) {
	const suffix = "List"
	if n := len(gvk.Kind); n > len(suffix) && gvk.Kind[n-len(suffix):] == suffix {
		gvk.Kind = gvk.Kind[:n-len(suffix)]
		return gvk, true
	}
	return gvk, false
}

// authorizerDenial matches the API server's RBAC refusal ("User \"x\" cannot list resource
// \"pods\" ..."), as opposed to a 403 from an admission webhook, a quota or a terminating
// namespace.
var authorizerDenial = regexp.MustCompile(`cannot [a-z]+ resource "`)

// AccessDenied reports whether err is a Forbidden from the API server's authorizer: the
// operator's Role is missing or lacks a verb. A Forbidden from admission (a webhook, a
// ValidatingAdmissionPolicy, a ResourceQuota, a terminating namespace) is not missing RBAC.
func AccessDenied(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return false
	}
	return authorizerDenial.MatchString(status.Status().Message)
}
