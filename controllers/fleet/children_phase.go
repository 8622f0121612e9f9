package fleet

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
)

// children renders the fleet's static children from the embedded chart and applies them:
// Services, NetworkPolicies, the PodDisruptionBudget, routing and the mesh policies. It runs
// while the fleet is paused (routing changes continue during maintenance) and during deletion
// (the route closes at once); it is skipped when a blocker found earlier holds provisioning
// back. A child it may not apply is a blocker too, and the pass goes on to heal the members
// that already run.
func (r *Reconciler) children(ctx context.Context, s *scope) (bool, error) {
	if s.find.Blocked() {
		return false, nil
	}
	if err := r.rememberMesh(ctx, s); err != nil {
		return true, err
	}
	facts, err := r.operatorFacts(ctx, s)
	if err != nil {
		return true, err // never prune routes on a failed discovery
	}
	rendered := s.fleet
	if s.routingInvalid {
		// Render without the invalid block; Apply, given the fleet as it is, then keeps the
		// existing route and policy as it does when a route cannot be rendered.
		rendered = s.fleet.DeepCopy()
		rendered.Spec.Routing = nil
	}
	objs, err := r.Children.Render(rendered, facts)
	var blocked *children.BlockedError
	if errors.As(err, &blocked) {
		s.find.Block(blocked.Reason, blocked.Message)
		return false, nil
	}
	if err != nil {
		return true, err
	}
	res, err := r.Applier.Apply(ctx, s.kube, s.fleet, objs)
	if refused(err) {
		// Admission refused a child: a blocker, and the members that run are still healed.
		s.find.Block(v1.ReasonInfrastructureBlocked, refusedMessage(s, err))
		return false, nil
	}
	if errors.As(err, &blocked) {
		s.find.Block(blocked.Reason, blocked.Message)
		// A foreign application Service blocks the fleet and is routing's problem too: the
		// route would send traffic to someone else's Pods, so RoutingReady says so.
		s.setRouting(res.Routing)
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if res.Requeue {
		s.again(time.Second)
	}
	routing := res.Routing
	if routing == nil {
		c := children.RoutingStatus(ctx, s.kube, s.fleet)
		routing = &c
	}
	if routing.Reason == v1.ReasonRoutingDisabled && meta.FindStatusCondition(s.fleet.Status.Conditions, v1.ConditionRoutingReady) == nil {
		routing = nil // Disabled is written only over an existing condition
	}
	s.setRouting(routing)
	s.find.MeshMixed = facts.MeshMixed
	return false, nil
}

// setRouting records the RoutingReady condition of the pass, unless validation already judged
// the routing block invalid.
func (s *scope) setRouting(c *metav1.Condition) {
	if s.routing != nil && s.routing.Reason == v1.ReasonInvalidConfiguration {
		return
	}
	s.routing = c
	if c == nil {
		s.find.RoutingWaits = false
		return
	}
	switch c.Reason {
	case v1.ReasonGatewayAPIUnavailable, v1.ReasonRoutingError, v1.ReasonServiceConflict, v1.ReasonRemovingRoute:
		s.find.RoutingWaits = true
	default:
		s.find.RoutingWaits = false
	}
}

func (r *Reconciler) operatorFacts(ctx context.Context, s *scope) (children.OperatorFacts, error) {
	gw, istio := false, false
	if r.APIs != nil {
		var err error
		if gw, istio, err = r.APIs(ctx); err != nil {
			return children.OperatorFacts{}, err
		}
	}
	f := s.fleet
	wantMeshed := f.Spec.Mesh != nil && f.Spec.Mesh.Istio != nil
	templateMeshed := wantMeshed
	if w := s.workload(); w != nil {
		templateMeshed = podTemplate(w).Labels["sidecar.istio.io/inject"] == "true"
	}
	facts := children.OperatorFacts{
		Namespace:             r.Options.OperatorNamespace,
		ServiceAccount:        r.Options.OperatorServiceAccount,
		NetworkPolicyEnforced: r.Options.NetworkPolicyEnforced,
		GatewayAPIInstalled:   gw,
		IstioInstalled:        istio,
		MeshMixed:             children.MeshMixed(s.pods, wantMeshed, templateMeshed),
	}
	if _, remembered := f.Annotations[v1.AnnotationIstioControlPlane]; wantMeshed || remembered {
		facts.ProxyControlPlanes = children.ProxyControlPlanes(s.pods)
	}
	return facts, nil
}

// rememberMesh records, before any change, that the fleet joined the mesh and through which
// control plane: the annotation keeps replacement Pods' injection explicitly off after the
// fleet leaves, across operator restarts, even in a namespace configured for injection, and
// follows a controlPlaneNamespace change (istiod egress also covers every namespace a running
// proxy still uses, see children.ProxyControlPlanes).
func (r *Reconciler) rememberMesh(ctx context.Context, s *scope) error {
	f := s.fleet
	if f.Spec.Mesh == nil || f.Spec.Mesh.Istio == nil {
		return nil
	}
	if ns, ok := f.Annotations[v1.AnnotationIstioControlPlane]; ok && ns == f.Spec.Mesh.Istio.ControlPlaneNamespace {
		return nil
	}
	live := s.live
	w := write{verb: "annotate", object: "CelldFleet/" + live.Name + " " + v1.AnnotationIstioControlPlane + "=" + f.Spec.Mesh.Istio.ControlPlaneNamespace,
		why: "the fleet joins the mesh or changes control plane: replacement Pods keep injection explicit after it leaves"}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error {
		patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if live.Annotations == nil {
			live.Annotations = map[string]string{}
		}
		live.Annotations[v1.AnnotationIstioControlPlane] = f.Spec.Mesh.Istio.ControlPlaneNamespace
		return r.Client.Patch(ctx, live, patch)
	})); err != nil {
		return err
	}
	if f.Annotations == nil {
		f.Annotations = map[string]string{}
	}
	f.Annotations[v1.AnnotationIstioControlPlane] = f.Spec.Mesh.Istio.ControlPlaneNamespace
	return nil
}
