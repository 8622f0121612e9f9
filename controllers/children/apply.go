package children

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Applier writes rendered children with server-side apply under FieldOwner, refuses objects the
// fleet does not own, prunes what the chart no longer renders and orders routing changes. It
// holds no state: everything it decides comes from the fleet, the rendered objects and the
// live objects.
type Applier struct{}

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

	// Read every core child first and refuse before the first write: a half-applied set would
	// leave the fleet with, say, a policy but no Service.
	lives := make([]*unstructured.Unstructured, len(core))
	for i, o := range core {
		live, err := getLive(ctx, c, o.GroupVersionKind(), f.Namespace, o.GetName())
		if err != nil {
			return res, err
		}
		if live != nil {
			if why := foreign(live, f.UID); why != "" {
				obj := describe(live, o.GetKind())
				msg := conflictMessage(o.GetKind(), f.Namespace, o.GetName(), why)
				if f.Spec.Routing != nil && o.GetKind() == "Service" && o.GetName() == f.Name {
					res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict, msg+"; the existing route and policy are kept"))
				}
				return res, &BlockedError{Reason: v1.ReasonInfrastructureBlocked, Object: obj, Message: msg}
			}
		}
		lives[i] = live
	}
	for i, o := range core {
		if err := a.apply(ctx, c, o, lives[i], &res); err != nil {
			return res, err
		}
	}
	if err := a.routing(ctx, c, f, route, policy, &res); err != nil {
		return res, err
	}
	if err := a.prune(ctx, c, f, core, &res); err != nil {
		return res, err
	}
	if f.Spec.Mesh != nil && f.Spec.Mesh.Istio != nil && !slices.ContainsFunc(objs, isKind(gvkAuthorizationPolicy)) {
		return res, &BlockedError{
			Reason:  v1.ReasonInfrastructureBlocked,
			Message: "spec.mesh.istio needs Istio's security.istio.io/v1 API (AuthorizationPolicy, PeerAuthentication), which this cluster does not serve; install Istio 1.22 or later, or remove spec.mesh",
		}
	}
	return res, nil
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

// apply server-side applies one owned child unless the live object already carries the desired
// hash and every desired field: the hash catches changes of the desired object (including
// removed fields), the field check catches hand edits, and together they make a settled fleet
// cost zero writes.
func (a *Applier) apply(ctx context.Context, c client.Client, want, live *unstructured.Unstructured, res *Result) error {
	if live != nil && live.GetAnnotations()[v1.AnnotationSpecHash] == want.GetAnnotations()[v1.AnnotationSpecHash] && covers(live, want) {
		res.Unchanged++
		return nil
	}
	obj := want.DeepCopy() // Apply writes the response into its argument
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", want.GetKind(), want.GetNamespace(), want.GetName(), err)
	}
	res.Applied = append(res.Applied, want.GetKind()+"/"+want.GetName())
	if live != nil {
		if err := pruneAnnotations(ctx, c, want, live, res); err != nil {
			return err
		}
	}
	return nil
}

// pruneAnnotations removes managed route annotations that left the spec but survived the apply.
// Server-side apply already drops a key only this field owner set; a key another manager also
// set (an older operator's Update, a controller echoing it) would otherwise stay for ever.
// Keys never listed in routing-annotation-keys belong to someone else and are kept.
func pruneAnnotations(ctx context.Context, c client.Client, want, live *unstructured.Unstructured, res *Result) error {
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
	if len(stale) == 0 {
		return nil
	}
	now, err := getLive(ctx, c, want.GroupVersionKind(), want.GetNamespace(), want.GetName())
	if err != nil || now == nil {
		return err
	}
	remove := map[string]any{}
	for _, k := range stale {
		if _, ok := now.GetAnnotations()[k]; ok {
			remove[k] = nil
		}
	}
	if len(remove) == 0 {
		return nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": remove, "resourceVersion": now.GetResourceVersion()}}
	if err := c.Patch(ctx, now, client.RawPatch(types.MergePatchType, mustJSON(patch)), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("prune annotations of %s %s/%s: %w", want.GetKind(), want.GetNamespace(), want.GetName(), err)
	}
	res.Applied = append(res.Applied, want.GetKind()+"/"+want.GetName()+" (annotations)")
	return nil
}

// prune deletes owned children of chart kinds that the chart no longer renders.
func (a *Applier) prune(ctx context.Context, c client.Client, f *v1.CelldFleet, core []*unstructured.Unstructured, res *Result) error {
	type key struct {
		gvk  schema.GroupVersionKind
		name string
	}
	desired := map[key]bool{{gvkNetworkPolicy, routingName(f)}: true} // the routing order owns it
	for _, o := range core {
		desired[key{o.GroupVersionKind(), o.GetName()}] = true
	}
	for _, gvk := range pruneKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := c.List(ctx, list, client.InNamespace(f.Namespace), client.MatchingLabels{v1.LabelFleetUID: string(f.UID)})
		if meta.IsNoMatchError(err) {
			continue // the API is not served, so nothing of this kind exists
		}
		if err != nil {
			return fmt.Errorf("list %s of fleet %s: %w", gvk.Kind, f.Name, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			item.SetGroupVersionKind(gvk)
			if desired[key{gvk, item.Name}] || foreign(item, f.UID) != "" || item.DeletionTimestamp != nil {
				continue
			}
			if err := deleteExact(ctx, c, item, res); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteExact deletes the very object that was read: UID and resourceVersion preconditions make
// a replaced or changed object survive, and the next reconcile decides again.
func deleteExact(ctx context.Context, c client.Client, obj client.Object, res *Result) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		res.Deleted = append(res.Deleted, obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName())
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		res.Requeue = true
		return nil
	}
	return fmt.Errorf("delete %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
}

// covers reports whether live holds every field of want. Metadata is compared only where the
// operator sets it (its labels, annotations and controller reference), so labels or owners that
// others add do not force a write; lists must match in length so an extra rule is drift.
func covers(live, want *unstructured.Unstructured) bool {
	if !subsetStrings(live.GetLabels(), want.GetLabels()) || !subsetStrings(live.GetAnnotations(), want.GetAnnotations()) {
		return false
	}
	for _, w := range want.GetOwnerReferences() {
		if !slices.ContainsFunc(live.GetOwnerReferences(), func(l metav1.OwnerReference) bool { return reflect.DeepEqual(l, w) }) {
			return false
		}
	}
	for k, w := range want.Object {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			continue
		}
		if !coversValue(live.Object[k], w) {
			return false
		}
	}
	return true
}

func coversValue(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok {
				if isZero(wv) {
					continue // the server drops empty values it was sent
				}
				return false
			}
			if !coversValue(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return len(w) == 0 && live == nil
		}
		for i := range w {
			if !coversValue(l[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(live, want)
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func subsetStrings(live, want map[string]string) bool {
	for k, v := range want {
		if lv, ok := live[k]; !ok || lv != v {
			return false
		}
	}
	return true
}
