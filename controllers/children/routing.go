package children

import (
	"context"
	"errors"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// routing converges FLEET-routing in the order the seed requires: preflight (the route and
// policy are ours), then remove any route of the other kind and wait until it has disappeared,
// then the policy, then the route. Removing routing deletes the route first and the policy only
// once the route is gone, so the policy never outlives its purpose while traffic still flows.
// A failed preflight leaves the existing route and policy exactly as they are.
func (a *Applier) routing(ctx context.Context, c client.Client, f *v1.CelldFleet, route, policy *unstructured.Unstructured, res *Result) error {
	name := routingName(f)
	if f.Spec.Routing != nil && f.DeletionTimestamp == nil && route == nil {
		res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonGatewayAPIUnavailable,
			fmt.Sprintf("The Gateway API (gateway.networking.k8s.io/v1 HTTPRoute) is not served, so HTTPRoute %s/%s cannot be created; install the Gateway API CRDs. Any existing route and policy are kept", f.Namespace, name)))
		return nil
	}

	var liveRoute, livePolicy *unstructured.Unstructured
	var err error
	if route != nil {
		if liveRoute, err = a.preflightLive(ctx, c, f, route.GroupVersionKind(), name); err != nil {
			return err
		}
		if liveRoute != nil {
			if why := Foreign(liveRoute, f); why != "" {
				res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict,
					conflictMessage(route.GetKind(), f.Namespace, name, why)+"; routing is left unchanged"))
				return nil
			}
		}
	}
	if policy != nil {
		livePolicy, err = a.desiredLive(ctx, c, f, gvkNetworkPolicy, name)
	} else {
		livePolicy, err = getLive(ctx, c, gvkNetworkPolicy, f.Namespace, name)
	}
	if err != nil {
		return err
	}
	if livePolicy != nil && Foreign(livePolicy, f) != "" {
		if policy != nil {
			res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict,
				conflictMessage("NetworkPolicy", f.Namespace, name, Foreign(livePolicy, f))+"; routing is left unchanged"))
			return nil
		}
		livePolicy = nil // not ours to delete
	}

	// Obsolete routes first: two routes for one fleet, or a policy admitting traffic for a route
	// that is being replaced, is never the intended state.
	pending, holders := "", []string(nil)
	for _, gvk := range routeKinds {
		if route != nil && route.GroupVersionKind() == gvk {
			continue
		}
		old, err := getLive(ctx, c, gvk, f.Namespace, name)
		if err != nil {
			return err
		}
		if old == nil || Foreign(old, f) != "" {
			continue
		}
		pending, holders = gvk.Kind, old.GetFinalizers()
		if old.GetDeletionTimestamp() == nil {
			if err := deleteExact(ctx, c, f, old, res); err != nil {
				return err
			}
		}
	}
	if pending == "" && liveRoute != nil && liveRoute.GetDeletionTimestamp() != nil {
		pending, holders = route.GetKind(), liveRoute.GetFinalizers() // someone deleted it; a write would be lost with it
	}
	if pending != "" {
		res.Requeue = true
		msg := fmt.Sprintf("Waiting for %s %s/%s to disappear before changing routing; a finalizer on it delays the switch", pending, f.Namespace, name)
		if f.DeletionTimestamp != nil {
			msg = fmt.Sprintf("%s %s/%s is being deleted", pending, f.Namespace, name)
			if len(holders) > 0 {
				msg += fmt.Sprintf(" and finalizers %s hold it", strings.Join(holders, ", "))
			}
			msg += "; the fleet's deletion goes on meanwhile"
		}
		res.Routing = new(routingCondition(f, metav1.ConditionUnknown, v1.ReasonRemovingRoute, msg))
		return nil
	}

	if route == nil {
		if livePolicy != nil && livePolicy.GetDeletionTimestamp() == nil {
			return deleteExact(ctx, c, f, livePolicy, res)
		}
		return nil
	}
	for _, o := range []struct{ want, live *unstructured.Unstructured }{{policy, livePolicy}, {route, liveRoute}} {
		var foreign *foreignError
		if err := a.apply(ctx, c, f, o.want, o.live, res); errors.As(err, &foreign) {
			// Found by its create: a foreign object the cache could not show. Routing is left
			// unchanged from here; the fleet itself is not blocked.
			res.Routing = new(routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict, foreign.Error()+"; routing is left unchanged"))
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// InvalidRouting is RoutingReady of a fleet whose spec.routing failed validation (stored by an
// older schema or past admission): routing is left exactly as it is.
func InvalidRouting(f *v1.CelldFleet, message string) metav1.Condition {
	return routingCondition(f, metav1.ConditionFalse, v1.ReasonInvalidConfiguration, message)
}

// RoutingStatus computes RoutingReady from the live route; use it when Apply left
// Result.Routing nil. It reads one object and polls nothing else: acceptance is the route's
// own status, never a watch on Gateways.
//
//   - no spec.routing: True/Disabled (write it only if the condition already exists);
//   - HTTPRoute: True/RouteAccepted when the configured parent reports current-generation
//     Accepted=True and ResolvedRefs=True, False/RouteRejected when either is False,
//     Unknown/AwaitingAcceptance otherwise; False/GatewayAPIUnavailable without the CRDs;
//   - Ingress: True/AddressAssigned once the controller published an address,
//     Unknown/AwaitingAddress until then (some controllers never publish one).
func RoutingStatus(ctx context.Context, c client.Client, f *v1.CelldFleet) metav1.Condition {
	r := f.Spec.Routing
	if r == nil {
		return routingCondition(f, metav1.ConditionTrue, v1.ReasonRoutingDisabled, "spec.routing is not set; the operator manages no route")
	}
	name := routingName(f)
	gvk := gvkIngress
	if r.Gateway != nil {
		gvk = gvkHTTPRoute
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: name}, u)
	switch {
	case meta.IsNoMatchError(err):
		return routingCondition(f, metav1.ConditionFalse, v1.ReasonGatewayAPIUnavailable,
			"The Gateway API (gateway.networking.k8s.io/v1 HTTPRoute) is not served; install the Gateway API CRDs")
	case client.IgnoreNotFound(err) != nil:
		return routingCondition(f, metav1.ConditionUnknown, v1.ReasonRoutingError, fmt.Sprintf("Reading %s %s/%s failed: %v", gvk.Kind, f.Namespace, name, err))
	case err != nil:
		if gvk == gvkIngress {
			return routingCondition(f, metav1.ConditionUnknown, v1.ReasonAwaitingAddress, fmt.Sprintf("Ingress %s/%s does not exist yet", f.Namespace, name))
		}
		return routingCondition(f, metav1.ConditionUnknown, v1.ReasonAwaitingAcceptance, fmt.Sprintf("HTTPRoute %s/%s does not exist yet", f.Namespace, name))
	}
	if why := Foreign(u, f); why != "" {
		return routingCondition(f, metav1.ConditionFalse, v1.ReasonServiceConflict, conflictMessage(gvk.Kind, f.Namespace, name, why))
	}
	if gvk == gvkIngress {
		return ingressStatus(f, u)
	}
	return httpRouteStatus(f, u)
}

// ingressStatus reads the Ingress through its typed API.
func ingressStatus(f *v1.CelldFleet, u *unstructured.Unstructured) metav1.Condition {
	ing := &networkingv1.Ingress{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ing); err != nil {
		return routingCondition(f, metav1.ConditionUnknown, v1.ReasonRoutingError,
			fmt.Sprintf("Ingress %s/%s cannot be read as networking.k8s.io/v1: %v", u.GetNamespace(), u.GetName(), err))
	}
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		for _, addr := range []string{lb.IP, lb.Hostname} {
			if addr != "" {
				return routingCondition(f, metav1.ConditionTrue, v1.ReasonAddressAssigned,
					fmt.Sprintf("Ingress %s/%s has address %s; this does not prove DNS, TLS or application connectivity", ing.Namespace, ing.Name, addr))
			}
		}
	}
	return routingCondition(f, metav1.ConditionUnknown, v1.ReasonAwaitingAddress,
		fmt.Sprintf("Ingress %s/%s has no address yet; controllers that never publish one keep this Unknown", ing.Namespace, ing.Name))
}

// httpRouteStatus reads the HTTPRoute through the Gateway API's typed API: the parent status of
// the fleet's Gateway, for the route's current generation.
func httpRouteStatus(f *v1.CelldFleet, u *unstructured.Unstructured) metav1.Condition {
	gw := f.Spec.Routing.Gateway
	wantNS := gw.Namespace
	if wantNS == "" {
		wantNS = f.Namespace
	}
	id := fmt.Sprintf("HTTPRoute %s/%s", u.GetNamespace(), u.GetName())
	route := &gatewayv1.HTTPRoute{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, route); err != nil {
		return routingCondition(f, metav1.ConditionUnknown, v1.ReasonRoutingError,
			fmt.Sprintf("%s cannot be read as gateway.networking.k8s.io/v1: %v", id, err))
	}
	for _, ps := range route.Status.Parents {
		ref := ps.ParentRef
		if string(ref.Name) != gw.Name || deref((*string)(ref.Namespace), route.Namespace) != wantNS ||
			deref((*string)(ref.Group), gatewayv1.GroupName) != gatewayv1.GroupName || deref((*string)(ref.Kind), "Gateway") != "Gateway" ||
			deref((*string)(ref.SectionName), "") != gw.SectionName {
			continue
		}
		accepted := current(ps.Conditions, string(gatewayv1.RouteConditionAccepted), route.Generation)
		resolved := current(ps.Conditions, string(gatewayv1.RouteConditionResolvedRefs), route.Generation)
		for _, cond := range []*metav1.Condition{accepted, resolved} {
			if cond != nil && cond.Status == metav1.ConditionFalse {
				return routingCondition(f, metav1.ConditionFalse, v1.ReasonRouteRejected,
					fmt.Sprintf("%s: Gateway %s/%s reports %s=False (%s): %s", id, wantNS, gw.Name, cond.Type, cond.Reason, cond.Message))
			}
		}
		if accepted != nil && resolved != nil && accepted.Status == metav1.ConditionTrue && resolved.Status == metav1.ConditionTrue {
			return routingCondition(f, metav1.ConditionTrue, v1.ReasonRouteAccepted,
				fmt.Sprintf("%s is accepted by Gateway %s/%s with resolved references; this does not prove DNS, TLS or listener programming", id, wantNS, gw.Name))
		}
	}
	return routingCondition(f, metav1.ConditionUnknown, v1.ReasonAwaitingAcceptance,
		fmt.Sprintf("%s waits for Gateway %s/%s to report Accepted and ResolvedRefs for its current generation; check the Gateway and its listener's allowedRoutes", id, wantNS, gw.Name))
}

// current is the condition of that type written for the route's current generation; an older
// one describes a spec that no longer exists.
func current(conds []metav1.Condition, t string, generation int64) *metav1.Condition {
	c := meta.FindStatusCondition(conds, t)
	if c == nil || c.ObservedGeneration != generation {
		return nil
	}
	return c
}

func deref(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}

func routingCondition(f *v1.CelldFleet, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: v1.ConditionRoutingReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: f.Generation}
}
