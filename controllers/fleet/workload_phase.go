package fleet

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/workload"
)

// workload is the pass's workload step: it observes what the plan needs (the live workload, and
// whether its spec other than replicas is the rendering), asks lifecycle.PlanWorkload, the one
// pure decision for both layouts, and carries the plan out: create, or converge the live
// workload (a write only when the template drifted or the count moves). The plan's input is
// kept on the scope, so the healing phase's confirmation plans again from the same input with
// the members re-read.
func (r *Reconciler) workload(ctx context.Context, s *scope) (bool, error) {
	in, ob, err := r.observeWorkload(ctx, s)
	if err != nil {
		return true, err
	}
	p := lifecycle.PlanWorkload(in)
	s.planned, s.heal, s.zoneGates = &in, p.Heal, p.ZoneGates
	if p.Block != nil {
		s.find.Block(p.Block.Reason, p.Block.Message)
	}
	if p.ReleaseHolds {
		// Only the early replacement cleanup runs: holds are released and no disk is deleted.
		return true, r.releaseHolds(ctx, s)
	}
	switch p.Write {
	case lifecycle.WriteCreate:
		s.find.Step = p.Step
		setReplicas(ob.desired, p.Replicas)
		return r.create(ctx, s, ob.desired)
	case lifecycle.WriteUpdate:
		s.find.Step = p.Step
		setReplicas(ob.want, p.Replicas)
		applied := in.Facts.Workload.Replicas
		if err := r.converge(ctx, s, ob.live, ob.want, applied, p.Replicas, ob.drifted); err != nil {
			return true, err
		}
		r.recordStep(ctx, s, applied, p.Replicas)
		s.find.Workload, s.find.Applied = in.Facts.Workload, p.Replicas
	}
	return p.Stop, nil
}

// workloadObservation is what the workload step read besides the plan's input: the live
// workload, the rendering (desired) and the rendering merged onto the live object (want), and
// the paths in which the live spec differs from the rendering.
type workloadObservation struct {
	live, desired, want client.Object
	drifted             []string
}

// observeWorkload builds the workload plan's input. The drift check, a dry-run compared with
// the live spec, runs only when the plan can use it: the fleet's own workload, nothing paused
// or blocked.
func (r *Reconciler) observeWorkload(ctx context.Context, s *scope) (lifecycle.WorkloadInput, workloadObservation, error) {
	f := s.fleet
	in := lifecycle.WorkloadInput{StatefulSet: f.RunsAsStatefulSet(), Blocked: s.find.Blocked(), Target: s.target()}
	if d := s.capacity; d != nil && d.CapacityUncertain {
		in.Uncertain = &lifecycle.Verdict{Reason: v1.ReasonCapacityUncertain, Message: d.UncertainMessage}
	}
	if f.Spec.Profile == v1.ProfileBucket && f.Spec.BucketWorkload == v1.BucketWorkloadOrdered {
		in.Zones = f.Spec.Placement.Zones
	}
	ob := workloadObservation{live: s.workload()}
	isPaused := paused(f)
	if !isPaused && ob.live != nil && !f.Owns(ob.live) {
		in.Foreign = leftAlone(s, ob.live)
	}
	if !isPaused && in.Foreign == "" && !in.Blocked {
		ob.desired = r.render(s)
		if ob.live != nil {
			ob.want = mergeUpdate(ob.live, ob.desired)
			var err error
			if ob.drifted, err = r.Drift.Check(ctx, r.Direct, s.key, ob.live, ob.want, client.FieldOwner(FieldOwner)); err != nil {
				return in, ob, fmt.Errorf("compare %s %s/%s with its rendering: %w", kindOf(ob.live), f.Namespace, f.Name, err)
			}
		}
	}
	in.Facts = r.facts(s, ob.want != nil && len(ob.drifted) == 0)
	return in, ob, nil
}

func paused(f *v1.CelldFleet) bool {
	return f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused
}

// workload is the pass's live workload of the fleet's layout, nil when there is none.
func (s *scope) workload() client.Object {
	if s.fleet.RunsAsStatefulSet() {
		if s.sts != nil {
			return s.sts
		}
	} else if s.deploy != nil {
		return s.deploy
	}
	return nil
}

// render is the operator's rendering of the fleet's workload, at spec.replicas.
func (r *Reconciler) render(s *scope) client.Object {
	f := s.fleet
	if f.RunsAsStatefulSet() {
		return workload.StatefulSet(f, r.workloadOptions(s), f.DesiredReplicas())
	}
	return workload.Deployment(f, r.workloadOptions(s), f.DesiredReplicas())
}

// mergeUpdate is the rendering merged onto the live workload for an update (statefulSetUpdate,
// deploymentUpdate).
func mergeUpdate(live, desired client.Object) client.Object {
	switch l := live.(type) {
	case *appsv1.StatefulSet:
		return statefulSetUpdate(l, desired.(*appsv1.StatefulSet))
	case *appsv1.Deployment:
		return deploymentUpdate(l, desired.(*appsv1.Deployment))
	}
	panic(fmt.Sprintf("mergeUpdate: %T is no workload", live))
}

// workloadFacts reads the pass's live workload of the fleet's layout (lifecycle.WorkloadFacts,
// lifecycle.DeploymentFacts); matches is the drift check's verdict.
func (s *scope) workloadFacts(matches bool) lifecycle.Workload {
	if s.fleet.RunsAsStatefulSet() {
		return lifecycle.WorkloadFacts(s.sts, matches)
	}
	return lifecycle.DeploymentFacts(s.deploy, matches)
}

// podTemplate is a workload's Pod template.
func podTemplate(o client.Object) *corev1.PodTemplateSpec {
	switch o := o.(type) {
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.Deployment:
		return &o.Spec.Template
	}
	return &corev1.PodTemplateSpec{}
}

func setReplicas(o client.Object, n int32) {
	switch o := o.(type) {
	case *appsv1.StatefulSet:
		o.Spec.Replicas = new(n)
	case *appsv1.Deployment:
		o.Spec.Replicas = new(n)
	}
}

// ownedWorkload refuses a workload the fleet did not create: without this fleet's UID label, or
// with an owner reference to anything but this fleet (a controller, or any owner the garbage
// collector would follow to delete the members). Such an object is never converted or adopted;
// the message names it and its owner (leftAlone).
func (r *Reconciler) ownedWorkload(s *scope, obj client.Object) bool {
	if s.fleet.Owns(obj) {
		return true
	}
	s.find.Block(v1.ReasonLifecycleBlocked, leftAlone(s, obj))
	return false
}

// leftAlone is the LifecycleBlocked message of a foreign workload at the fleet's name.
func leftAlone(s *scope, obj client.Object) string {
	return foreignWorkload(s, obj) + "; it is left alone: delete or rename it, remove the owner reference, or choose another fleet name"
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *appsv1.StatefulSet:
		return "StatefulSet"
	case *appsv1.Deployment:
		return "Deployment"
	}
	return fmt.Sprintf("%T", obj)
}

// converge writes want, the operator's rendering merged onto the live workload, unless the live
// spec already is the rendering (drifted is empty: the content check found no difference
// other than replicas) at the replica count next. It is an Update carrying the read's
// resourceVersion, not a server-side apply, because a hand edit that added fields must be
// undone too, and an apply leaves other managers' fields in place. A settled fleet performs no
// write.
func (r *Reconciler) converge(ctx context.Context, s *scope, live, want client.Object, applied, next int32, drifted []string) error {
	if len(drifted) == 0 && applied == next {
		return nil
	}
	obj := want.DeepCopyObject().(client.Object)
	why := fmt.Sprintf("replicas %d to %d", applied, next)
	if len(drifted) > 0 {
		why = "the live spec differs from the rendering (a spec change or a hand edit); " + why
	}
	w := write{verb: "update", object: kindOf(live) + "/" + live.GetName(), why: why, kv: []any{"paths", drifted}}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, obj, client.FieldOwner(FieldOwner)) })); err != nil {
		return err
	}
	r.Drift.Written(s.key, want, obj)
	return nil
}

// statefulSetUpdate is the rendering desired merged onto live for an update: the operator's
// spec, except the fields the API server never lets change (selector, serviceName, claim
// templates, pod management), which stay as created, and the live replica count (the caller
// sets the next one). Labels and annotations others set are kept.
func statefulSetUpdate(live, desired *appsv1.StatefulSet) *appsv1.StatefulSet {
	want := desired.DeepCopy()
	drift.MergeMetadata(want, live)
	want.Spec.Selector = live.Spec.Selector
	want.Spec.ServiceName = live.Spec.ServiceName
	want.Spec.VolumeClaimTemplates = live.Spec.VolumeClaimTemplates
	want.Spec.PodManagementPolicy = live.Spec.PodManagementPolicy
	want.Spec.Replicas = live.Spec.Replicas
	want.Status = live.Status
	return want
}

// deploymentUpdate is statefulSetUpdate for a Deployment, whose selector alone is immutable.
func deploymentUpdate(live, desired *appsv1.Deployment) *appsv1.Deployment {
	want := desired.DeepCopy()
	drift.MergeMetadata(want, live)
	want.Spec.Selector = live.Spec.Selector
	want.Spec.Replicas = live.Spec.Replicas
	want.Status = live.Status
	return want
}

// create creates the workload (POST) and ends the pass. The API server arbitrates the name: a
// workload already there, which the cache did not hold, answers AlreadyExists and is read; one
// the fleet does not own is refused (LifecycleBlocked, as any foreign workload), and the
// fleet's own, which the cache has not delivered yet, is left for the next pass, a second from
// now. Nothing is read before the create, so a new fleet costs no read of what is not there.
func (r *Reconciler) create(ctx context.Context, s *scope, desired client.Object) (bool, error) {
	obj := desired.DeepCopyObject().(client.Object)
	var taken client.Object
	created := false
	w := write{verb: "create", object: kindOf(desired) + "/" + desired.GetName(), why: "the fleet has no workload"}
	if err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
		var err error
		created, taken, err = children.Create(ctx, r.Direct, r.Direct, obj)
		return created, err
	}); err != nil {
		return true, err
	}
	if !created { // the name was taken
		if taken == nil || r.ownedWorkload(s, taken) {
			s.soon = time.Second // gone since, or ours and not in the cache yet: the next pass
		}
		return true, nil
	}
	// The pass reports the workload it created: its first status already carries the applied
	// count, rather than a status write without it and another once the cache has it.
	s.takeWorkload(r.rememberCreated(s.key, desired, obj))
	s.find.Created = true
	return true, nil
}

// rememberCreated records the API server's answer to a workload's creation, stored: as the
// rendering, as converge does for an update, so the pass that first reads the new workload
// sends no dry-run to compare it; and as the workload itself until the cache delivers it
// (drift.Answers). It returns the workload as stored, nil without a usable answer (the next
// pass then finds it in the cache, or creates and reads it).
func (r *Reconciler) rememberCreated(key types.NamespacedName, desired, stored client.Object) client.Object {
	if stored.GetUID() == "" {
		return nil
	}
	switch d := desired.(type) {
	case *appsv1.StatefulSet:
		sts, ok := stored.(*appsv1.StatefulSet)
		if !ok {
			return nil
		}
		// The answer is decoded from JSON, in which the API server gives every claim template
		// an apiVersion and kind; the cache's reads carry none, and the two would differ.
		for i := range sts.Spec.VolumeClaimTemplates {
			sts.Spec.VolumeClaimTemplates[i].TypeMeta = metav1.TypeMeta{}
		}
		r.Drift.Written(key, statefulSetUpdate(sts, d), sts)
	case *appsv1.Deployment:
		deploy, ok := stored.(*appsv1.Deployment)
		if !ok {
			return nil
		}
		r.Drift.Written(key, deploymentUpdate(deploy, d), deploy)
	default:
		return nil
	}
	r.created.Remember(key, kindOf(stored), stored, r.now())
	return stored
}
