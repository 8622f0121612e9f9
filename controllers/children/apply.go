package children

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/mutation"
)

// Applier creates and restores rendered children under FieldOwner, refuses objects the
// fleet does not own, prunes what the chart no longer renders and orders routing changes.
// Everything it decides comes from the fleet, the rendered objects and the live objects; the
// only state it keeps is which live contents it has already verified as the rendering, so a
// settled fleet costs no request, and for a few seconds the answers to its own creations, so
// the pass before the cache delivers them does not read them back. Use one Applier for the
// life of the operator.
type Applier struct {
	// Direct, when set, reads what a create found at a taken name, and a route the cache does
	// not hold before the routing policy is written: the client Apply is given then reads from
	// a cache that holds only the fleet's labelled objects, which cannot show a foreign object.
	Direct client.Reader
	drift  drift.Detector
	// created holds the answers to creations the cache has not delivered yet.
	created drift.Answers
}

// Result is what one Apply did.
type Result struct {
	// Applied are the children written ("Kind/name"); empty for a settled fleet.
	Applied []string
	// Unchanged counts children skipped because the live object already matches.
	Unchanged int
	// Deleted are the deletions issued: pruned children, obsolete routes, the routing policy.
	Deleted []string
	// Requeue: an obsolete route is still disappearing (or a delete raced a change); call Apply
	// again shortly rather than waiting for the next event.
	Requeue bool
	// Routing, when set, is the RoutingReady condition Apply decided (preflight failure,
	// GatewayAPIUnavailable, a route being removed). When nil, compute it with RoutingStatus.
	Routing *metav1.Condition
}

// Writes is the number of API writes Apply issued.
func (r Result) Writes() int { return len(r.Applied) + len(r.Deleted) }

// Apply converges the fleet's children on objs (from Renderer.Render). Nothing is written when
// a desired child exists without this fleet's ownership: Apply returns a *BlockedError with
// reason InfrastructureBlocked naming it. It also returns one, after applying everything else,
// when the fleet wants the mesh and Istio's API is not served. Routing problems never block the
// fleet: they are reported in Result.Routing and the existing route and policy are kept.
//
// Call Apply while the fleet is paused too (routing changes continue during maintenance) and
// once deletion has started (Render then omits routing, so the route closes at once).
func (a *Applier) Apply(ctx context.Context, c client.Client, f *v1.CelldFleet, objs []*unstructured.Unstructured) (Result, error) {
	var res Result
	route, policy, core := splitRouting(f, objs)

	// The reads come first: every core child is looked up in the cache, and the fleet's
	// children of the prunable kinds are listed. PlanChildren, a pure function of those reads,
	// decides each child's step, and refuses a foreign object at a rendered name before the
	// first write. One the cache does not hold is created: the API server arbitrates the name,
	// and a foreign object there answers AlreadyExists and is then read and refused (the
	// children created beside it are the fleet's own and stay). The creates and converges do
	// not depend on each other, so they run concurrently: a fleet's first pass waits for one
	// round trip instead of one per child. The prunes follow the routing order.
	lives := make([]*unstructured.Unstructured, len(core))
	if err := concurrently(ctx, core, func(ctx context.Context, i int, o *unstructured.Unstructured) (err error) {
		lives[i], err = a.desiredLive(ctx, c, f, o.GroupVersionKind(), o.GetName())
		return err
	}); err != nil {
		return res, err
	}
	owned, err := listPrunable(ctx, c, f)
	if err != nil {
		return res, err
	}
	plan := PlanChildren(f, core, lives, owned)
	if r := plan.Refused; r != nil {
		return res, refuseCore(f, r.Want, r.Live, r.Why, &res)
	}
	writes := plan.writes()
	each := make([]Result, len(writes))
	err = concurrently(ctx, writes, func(ctx context.Context, i int, s Step) error {
		return a.apply(ctx, c, f, s.Want, s.Live, &each[i])
	})
	for _, r := range each { // in rendering order, whatever order the writes finished in
		res.Applied = append(res.Applied, r.Applied...)
		res.Unchanged += r.Unchanged
		res.Requeue = res.Requeue || r.Requeue
	}
	if foreign := (*foreignError)(nil); errors.As(err, &foreign) {
		return res, refuseCore(f, foreign.want, foreign.live, foreign.why, &res)
	}
	if err != nil {
		return res, err
	}
	if err := a.routing(ctx, c, f, route, policy, &res); err != nil {
		return res, err
	}
	for _, s := range plan.prunes() {
		if err := deleteExact(ctx, c, f, s.Live, &res); err != nil {
			return res, err
		}
	}
	if f.Spec.Mesh != nil && f.Spec.Mesh.Istio != nil && !slices.ContainsFunc(objs, isKind(gvkAuthorizationPolicy)) {
		return res, &BlockedError{
			Reason:  v1.ReasonInfrastructureBlocked,
			Message: "spec.mesh.istio needs Istio's security.istio.io/v1 API (AuthorizationPolicy, PeerAuthentication), which this cluster does not serve; install Istio 1.22 or later, or remove spec.mesh",
		}
	}
	return res, nil
}

// concurrently calls do for every item concurrently and returns the first error (in items'
// order) once all calls have returned. Each call gets its own index, so do may write to
// per-index slots without locks.
func concurrently[T any](ctx context.Context, items []T, do func(ctx context.Context, i int, item T) error) error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, item := range items {
		wg.Go(func() { errs[i] = do(ctx, i, item) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// desiredLive reads a child the chart renders from c. With a Direct reader (c then reads a
// cache that holds only the fleet's labelled objects), one the cache does not hold is the
// answer to its creation when this applier created it moments ago, or else nil: the create
// that follows finds out whether anything is there.
func (a *Applier) desiredLive(ctx context.Context, c client.Reader, f *v1.CelldFleet, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	live, err := getLive(ctx, c, gvk, f.Namespace, name)
	if err != nil || a.Direct == nil {
		return live, err
	}
	if live != nil {
		a.created.Seen(gvk.Kind, f.Namespace, name)
		return live, nil
	}
	if u, ok := a.created.Recent(gvk.Kind, f.Namespace, name, f.UID, time.Now()).(*unstructured.Unstructured); ok {
		return u, nil
	}
	return nil, nil
}

// preflightLive is desiredLive that, for a child the cache does not hold, asks the API server:
// the routing order must know whether the route is the fleet's before it writes the policy
// that admits the route's traffic, so a foreign route is found before any write.
func (a *Applier) preflightLive(ctx context.Context, c client.Reader, f *v1.CelldFleet, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	live, err := a.desiredLive(ctx, c, f, gvk, name)
	if live != nil || err != nil || a.Direct == nil {
		return live, err
	}
	return getLive(ctx, a.Direct, gvk, f.Namespace, name)
}

// foreignError: a create found a foreign object at the child's name (AlreadyExists, and the
// object read then is not the fleet's).
type foreignError struct {
	want, live *unstructured.Unstructured
	why        string
}

func (e *foreignError) Error() string {
	return conflictMessage(e.want.GetKind(), e.live.GetNamespace(), e.live.GetName(), e.why)
}

// refuseCore is the refusal of a foreign object at a core child's name: InfrastructureBlocked
// naming it and, for the fleet's own Service of a routed fleet, ServiceConflict on routing.
func refuseCore(f *v1.CelldFleet, want, live *unstructured.Unstructured, why string, res *Result) error {
	msg := conflictMessage(want.GetKind(), f.Namespace, want.GetName(), why)
	if f.Spec.Routing != nil && want.GetKind() == "Service" && want.GetName() == f.Name {
		res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict, msg+"; the existing route and policy are kept"))
	}
	return &BlockedError{Reason: v1.ReasonInfrastructureBlocked, Object: describe(live, want.GetKind()), Message: msg}
}

// splitRouting separates the route and its policy (which follow the routing order) from the
// other children.
func splitRouting(f *v1.CelldFleet, objs []*unstructured.Unstructured) (route, policy *unstructured.Unstructured, core []*unstructured.Unstructured) {
	name := routingName(f)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case o.GetName() == name && slices.Contains(routeKinds, gvk):
			route = o
		case o.GetName() == name && gvk == gvkNetworkPolicy:
			policy = o
		default:
			core = append(core, o)
		}
	}
	return route, policy, core
}

func isKind(gvk schema.GroupVersionKind) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool { return u.GroupVersionKind() == gvk }
}

// apply converges one owned child on its rendering. A child nobody has seen is created (POST)
// under FieldOwner with strict field validation, so a rendering with a field the API does not
// know fails loudly instead of losing it; AlreadyExists means the cache has not delivered it
// or it is somebody else's, which the read that follows tells apart (a *foreignError). A live
// child is compared by content with what the API server would store for the rendering
// (drift.Detector), so a hand edit of any field the operator renders is seen whatever its
// shape (a key added inside a list item, an extra port range) and a value the server defaults
// is not; a drifted child is replaced by an update carrying the read's resourceVersion, which
// also removes fields other managers added. An unchanged child costs no request once
// verified, so a settled fleet performs no write.
func (a *Applier) apply(ctx context.Context, c client.Client, f *v1.CelldFleet, want, live *unstructured.Unstructured, res *Result) error {
	kind := want.GetKind()
	if live == nil {
		var read client.Reader = c
		if a.Direct != nil {
			read = a.Direct
		}
		obj := want.DeepCopy()
		created, taken, err := Create(ctx, c, read, obj)
		switch {
		case err != nil:
			return fmt.Errorf("create %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
		case created:
			logMutation(ctx, f, "create", kind+"/"+want.GetName(), "the chart renders it and it did not exist")
			a.drift.Written(owner(f), drift.Merge(obj, want, staleAnnotations(want, obj)...), obj)
			a.created.Remember(owner(f), kind, obj, time.Now())
			res.Applied = append(res.Applied, kind+"/"+want.GetName())
			return nil
		case taken == nil: // the name was taken, and what took it has gone since: the next pass creates it
			res.Requeue = true
			return nil
		}
		live = taken.(*unstructured.Unstructured)
		if why := Foreign(live, f); why != "" {
			return &foreignError{want: want, live: live, why: why}
		}
	}
	merged := drift.Merge(live, want, staleAnnotations(want, live)...)
	// An earlier release set the fleet as controller; that reference lets the garbage collector
	// take the child before the members are gone, so it is dropped (others' references stay).
	merged.SetOwnerReferences(slices.DeleteFunc(merged.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == f.UID }))
	paths, err := a.drift.Check(ctx, c, owner(f), live, merged, client.FieldOwner(FieldOwner))
	if err != nil {
		return fmt.Errorf("compare %s %s/%s with its rendering: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	if len(paths) == 0 {
		res.Unchanged++
		return nil
	}
	obj := merged.DeepCopy()
	if err := c.Update(ctx, obj, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("restore %s %s/%s to its rendering: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	logMutation(ctx, f, "restore", kind+"/"+want.GetName(), "its content differs from the rendering (a spec change or a hand edit)", "paths", paths)
	a.drift.Written(owner(f), merged, obj)
	res.Applied = append(res.Applied, kind+"/"+want.GetName())
	return nil
}

// staleAnnotations are the managed route annotations live carries that the rendering no longer
// lists. Keys never listed in routing-annotation-keys belong to someone else and are kept.
func staleAnnotations(want, live *unstructured.Unstructured) []string {
	before := live.GetAnnotations()[v1.AnnotationRoutingAnnotationKeys]
	if before == "" {
		return nil
	}
	desired := want.GetAnnotations()
	var stale []string
	for _, k := range strings.Split(before, ",") {
		if _, keep := desired[k]; !keep && k != "" {
			stale = append(stale, k)
		}
	}
	return stale
}

// owner groups a fleet's remembered drift verdicts, so Forget drops them with the fleet.
func owner(f *v1.CelldFleet) types.NamespacedName { return client.ObjectKeyFromObject(f) }

// Forget drops what the applier remembers of the fleet (a fleet that is gone).
func (a *Applier) Forget(fleet types.NamespacedName) {
	a.drift.Forget(fleet)
	a.created.Forget(fleet)
}

// logMutation writes the mutation line of a write to one of f's children.
func logMutation(ctx context.Context, f *v1.CelldFleet, action, object, why string, kv ...any) {
	mutation.Log(ctx, action, owner(f).String(), object, why, kv...)
}

// listPrunable lists the fleet's children of every prunable kind (listOwned), the owned
// children PlanChildren may prune.
func listPrunable(ctx context.Context, c client.Reader, f *v1.CelldFleet) ([]*unstructured.Unstructured, error) {
	var owned []*unstructured.Unstructured
	for _, gvk := range pruneKinds {
		items, err := listOwned(ctx, c, f, gvk)
		if err != nil {
			return nil, err
		}
		owned = append(owned, items...)
	}
	return owned, nil
}

// listOwned lists the fleet's children of one prunable kind by its UID label, leaving out any
// another controller claims; none when the kind's API is not served (nothing of it can exist).
// It lists unstructured objects, the form the applier reads children in, so a cache serves
// reads and lists of a kind from one informer.
func listOwned(ctx context.Context, c client.Reader, f *v1.CelldFleet, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err := c.List(ctx, list, client.InNamespace(f.Namespace), client.MatchingLabels{v1.LabelFleetUID: string(f.UID)})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s of fleet %s: %w", gvk.Kind, f.Name, err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		item := &list.Items[i]
		item.SetGroupVersionKind(gvk)
		if Foreign(item, f) == "" {
			out = append(out, item)
		}
	}
	return out, nil
}

// deleteExact deletes the very object that was read: UID and resourceVersion preconditions make
// a replaced or changed object survive, and the next reconcile decides again. What the delete
// rests on is the object's ownership (the fleet's UID label, no other controller), which the
// preconditions protect; other controllers write these objects' status (the disruption
// controller a PDB's, a Gateway or Ingress controller a route's) and move the resourceVersion
// too. A conflict is never taken for success: the object is not reported deleted, RemoveAll
// still counts it, and Requeue asks for the next pass within a second, which reads it again and
// decides again. The re-read is the next pass's, not this one's: c may read from a cache that
// has not seen the write yet.
func deleteExact(ctx context.Context, c client.Client, f *v1.CelldFleet, obj client.Object, res *Result) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		res.Deleted = append(res.Deleted, obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName())
		logMutation(ctx, f, "delete", obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName(), "the chart no longer renders it, the routing changed, or the fleet is gone")
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).Info("delete met a conflict: the object changed since it was read; the next pass decides again",
			"fleet", owner(f).String(), "object", obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName())
		res.Requeue = true
		return nil
	}
	return fmt.Errorf("delete %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
}

// RemoveAll deletes every child of the fleet, of every kind the chart can render, once the
// fleet's members are gone: the last step of deletion before the finalizer is released, so the
// NetworkPolicy and PDB outlive the last member and nothing the operator created is left
// behind. Each delete carries UID and resourceVersion preconditions; a child controlled by
// someone else is left alone. It returns how many children still exist (deleting ones
// included); call it again until none do.
func (a *Applier) RemoveAll(ctx context.Context, c client.Client, f *v1.CelldFleet) (remaining int, err error) {
	left, err := a.Remaining(ctx, c, f)
	return len(left), err
}

// Remaining is RemoveAll naming the children that still exist ("Kind namespace/name", and for
// one being deleted, the finalizers that hold it), so a deletion that waits says on what.
func (a *Applier) Remaining(ctx context.Context, c client.Client, f *v1.CelldFleet) ([]string, error) {
	var res Result
	var left []string
	note := func(u *unstructured.Unstructured, kind string) {
		what := describe(u, kind)
		if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) > 0 {
			what += fmt.Sprintf(" (being deleted, held by finalizers %s)", strings.Join(u.GetFinalizers(), ", "))
		}
		left = append(left, what)
	}
	// Routes are read by name, never listed (the Role has no list on them); deletion already
	// removed them by the routing order, so this only catches one that came back or is held.
	for _, gvk := range routeKinds {
		live, err := getLive(ctx, c, gvk, f.Namespace, routingName(f))
		if err != nil {
			return left, err
		}
		if live == nil || Foreign(live, f) != "" {
			continue
		}
		note(live, gvk.Kind)
		if live.GetDeletionTimestamp() == nil {
			if err := deleteExact(ctx, c, f, live, &res); err != nil {
				return left, err
			}
		}
	}
	for _, gvk := range pruneKinds {
		items, err := listOwned(ctx, c, f, gvk)
		if err != nil {
			return left, err
		}
		for _, item := range items {
			note(item, gvk.Kind)
			if item.GetDeletionTimestamp() != nil {
				continue
			}
			if err := deleteExact(ctx, c, f, item, &res); err != nil {
				return left, err
			}
		}
	}
	return left, nil
}
