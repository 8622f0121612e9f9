package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
)

// children renders the fleet's static children from the embedded chart and applies them:
// Services, NetworkPolicies, the PodDisruptionBudget, routing and the mesh policies. It runs
// while the fleet is paused (routing changes continue during maintenance) and during deletion
// (the route closes at once); it is skipped only when nothing may be provisioned.
func (r *Reconciler) children(ctx context.Context, s *scope) (bool, error) {
	if err := r.rememberMesh(ctx, s); err != nil {
		return true, err
	}
	facts, err := r.operatorFacts(ctx, s)
	if err != nil {
		return true, err // never prune routes on a failed discovery
	}
	objs, err := r.Children.Render(s.fleet, facts)
	var blocked *children.BlockedError
	if errors.As(err, &blocked) {
		s.verdict(blocked.Reason, blocked.Message)
		return true, nil
	}
	if err != nil {
		return true, err
	}
	res, err := r.Applier.Apply(ctx, r.Direct, s.fleet, objs)
	if errors.As(err, &blocked) {
		s.verdict(blocked.Reason, blocked.Message)
		// A foreign application Service blocks the fleet and is routing's problem too: the
		// route would send traffic to someone else's Pods, so RoutingReady says so.
		s.routing = res.Routing
		return true, nil
	}
	if err != nil {
		return true, err
	}
	if res.Requeue {
		s.result.RequeueAfter = time.Second
	}
	s.routing = res.Routing
	if s.routing == nil {
		c := children.RoutingStatus(ctx, r.Direct, s.fleet)
		s.routing = &c
	}
	if s.routing.Reason == v1.ReasonRoutingDisabled && meta.FindStatusCondition(s.fleet.Status.Conditions, v1.ConditionRoutingReady) == nil {
		s.routing = nil // Disabled is written only over an existing condition
	}
	s.meshMixed = facts.MeshMixed
	return false, nil
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
	if s.sts != nil {
		templateMeshed = s.sts.Spec.Template.Labels["sidecar.istio.io/inject"] == "true"
	} else if s.deploy != nil {
		templateMeshed = s.deploy.Spec.Template.Labels["sidecar.istio.io/inject"] == "true"
	}
	return children.OperatorFacts{
		Namespace:             r.Options.OperatorNamespace,
		ServiceAccount:        r.Options.OperatorServiceAccount,
		NetworkPolicyEnforced: r.Options.NetworkPolicyEnforced,
		GatewayAPIInstalled:   gw,
		IstioInstalled:        istio,
		MeshMixed:             children.MeshMixed(s.pods, wantMeshed, templateMeshed),
	}, nil
}

// rememberMesh records, before any change, that the fleet joined the mesh: the annotation keeps
// replacement Pods' injection explicitly off after the fleet leaves, across operator restarts,
// even in a namespace configured for injection.
func (r *Reconciler) rememberMesh(ctx context.Context, s *scope) error {
	f := s.fleet
	if f.Spec.Mesh == nil || f.Spec.Mesh.Istio == nil {
		return nil
	}
	if _, ok := f.Annotations[v1.AnnotationIstioControlPlane]; ok {
		return nil
	}
	live := &v1.CelldFleet{}
	if err := r.Client.Get(ctx, s.key, live); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	live.Annotations[v1.AnnotationIstioControlPlane] = f.Spec.Mesh.Istio.ControlPlaneNamespace
	if err := r.Client.Patch(ctx, live, patch); err != nil {
		return fmt.Errorf("record the mesh control plane on CelldFleet %s/%s: %w", live.Namespace, live.Name, err)
	}
	logMutation(ctx, s, "annotate", "CelldFleet/"+live.Name+" "+v1.AnnotationIstioControlPlane, "the fleet joins the mesh: replacement Pods keep injection explicit after it leaves")
	if f.Annotations == nil {
		f.Annotations = map[string]string{}
	}
	f.Annotations[v1.AnnotationIstioControlPlane] = f.Spec.Mesh.Istio.ControlPlaneNamespace
	return nil
}
