package fleet

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/workload"
)

// layout is the workload kind a fleet runs as, and all that differs between a StatefulSet and
// a Deployment: the reconciler reads, renders, compares, creates, scales and remembers the
// workload once, through it. A fleet's layout is fixed at creation (v1.CelldFleet.
// RunsAsStatefulSet); observe reads both kinds at the fleet's name, since one of the other
// kind is refused, never converted.
type layout interface {
	// kind is the API kind, as logs, messages and the creation answers name it.
	kind() string
	// empty is a new object of the kind, to read into.
	empty() client.Object
	// render is the operator's rendering of the fleet's workload at replicas.
	render(f *v1.CelldFleet, o workload.Options, replicas int32) client.Object
	// facts are the planner's facts of live, none when it is nil; matches is the drift
	// check's verdict.
	facts(live client.Object, matches bool) lifecycle.Workload
	// update is the rendering desired merged onto live for an update: the operator's spec,
	// except the fields the API server never lets change, which stay as created, and the live
	// replica count (the caller sets the next one). Labels and annotations others set are kept.
	update(live, desired client.Object) client.Object
	// stored is the API server's answer to a create as a read from the cache returns it.
	stored(answer client.Object) client.Object
	template(o client.Object) *corev1.PodTemplateSpec
	setReplicas(o client.Object, n int32)
}

// layouts are the two kinds, in the order observe reads them.
var layouts = []layout{statefulSets{}, deployments{}}

// layoutOf is the fleet's layout.
func layoutOf(f *v1.CelldFleet) layout {
	if f.RunsAsStatefulSet() {
		return statefulSets{}
	}
	return deployments{}
}

// layoutOfObject is the layout of a workload object, nil for any other object.
func layoutOfObject(o client.Object) layout {
	switch o.(type) {
	case *appsv1.StatefulSet:
		return statefulSets{}
	case *appsv1.Deployment:
		return deployments{}
	}
	return nil
}

// kindOf is the kind of a workload object, or its Go type for anything else.
func kindOf(o client.Object) string {
	if l := layoutOfObject(o); l != nil {
		return l.kind()
	}
	return fmt.Sprintf("%T", o)
}

type statefulSets struct{}

func (statefulSets) kind() string         { return "StatefulSet" }
func (statefulSets) empty() client.Object { return &appsv1.StatefulSet{} }
func (statefulSets) render(f *v1.CelldFleet, o workload.Options, replicas int32) client.Object {
	return workload.StatefulSet(f, o, replicas)
}
func (statefulSets) facts(live client.Object, matches bool) lifecycle.Workload {
	sts, _ := live.(*appsv1.StatefulSet)
	return lifecycle.WorkloadFacts(sts, matches)
}

// update keeps the selector, serviceName, claim templates and pod management policy.
func (statefulSets) update(live, desired client.Object) client.Object {
	l := live.(*appsv1.StatefulSet)
	want := desired.(*appsv1.StatefulSet).DeepCopy()
	drift.MergeMetadata(want, l)
	want.Spec.Selector = l.Spec.Selector
	want.Spec.ServiceName = l.Spec.ServiceName
	want.Spec.VolumeClaimTemplates = l.Spec.VolumeClaimTemplates
	want.Spec.PodManagementPolicy = l.Spec.PodManagementPolicy
	want.Spec.Replicas = l.Spec.Replicas
	want.Status = l.Status
	return want
}

// stored drops the claim templates' apiVersion and kind: the answer is decoded from JSON, in
// which the API server gives every claim template one; the cache's reads carry none, and the
// two would differ.
func (statefulSets) stored(answer client.Object) client.Object {
	sts := answer.(*appsv1.StatefulSet)
	for i := range sts.Spec.VolumeClaimTemplates {
		sts.Spec.VolumeClaimTemplates[i].TypeMeta = metav1.TypeMeta{}
	}
	return sts
}
func (statefulSets) template(o client.Object) *corev1.PodTemplateSpec {
	return &o.(*appsv1.StatefulSet).Spec.Template
}
func (statefulSets) setReplicas(o client.Object, n int32) {
	o.(*appsv1.StatefulSet).Spec.Replicas = new(n)
}

type deployments struct{}

func (deployments) kind() string         { return "Deployment" }
func (deployments) empty() client.Object { return &appsv1.Deployment{} }
func (deployments) render(f *v1.CelldFleet, o workload.Options, replicas int32) client.Object {
	return workload.Deployment(f, o, replicas)
}
func (deployments) facts(live client.Object, matches bool) lifecycle.Workload {
	d, _ := live.(*appsv1.Deployment)
	return lifecycle.DeploymentFacts(d, matches)
}

// update keeps the selector, a Deployment's one immutable field.
func (deployments) update(live, desired client.Object) client.Object {
	l := live.(*appsv1.Deployment)
	want := desired.(*appsv1.Deployment).DeepCopy()
	drift.MergeMetadata(want, l)
	want.Spec.Selector = l.Spec.Selector
	want.Spec.Replicas = l.Spec.Replicas
	want.Status = l.Status
	return want
}
func (deployments) stored(answer client.Object) client.Object { return answer }
func (deployments) template(o client.Object) *corev1.PodTemplateSpec {
	return &o.(*appsv1.Deployment).Spec.Template
}
func (deployments) setReplicas(o client.Object, n int32) {
	o.(*appsv1.Deployment).Spec.Replicas = new(n)
}
