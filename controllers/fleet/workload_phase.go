package fleet

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/workload"
)

// workload creates or converges the fleet's StatefulSet or Deployment: the operator's template,
// and a replica count that moves by growth runs (PersistentFleet) or one member per step on
// scale-in. A paused fleet gets no workload write at all. While a blocker holds provisioning
// back, nothing is written either, but a StatefulSet fleet's healing is still planned at the
// applied count: members that run are healed on their own disks whatever else is wrong.
func (r *Reconciler) workload(ctx context.Context, s *scope) (bool, error) {
	if paused(s.fleet) {
		// Only the early replacement cleanup runs: holds are released and no disk is deleted.
		return true, r.releaseHolds(ctx, s)
	}
	if s.fleet.RunsAsStatefulSet() {
		return r.statefulSet(ctx, s)
	}
	return r.deployment(ctx, s)
}

// planHeal plans the pass at target and keeps its healing decision, with the target, for the
// healing phase.
func (s *scope) planHeal(facts lifecycle.Facts, target int32) lifecycle.Step {
	step := lifecycle.Plan(facts, target)
	s.heal, s.healTarget = &step.Heal, target
	return step
}

func paused(f *v1.CelldFleet) bool {
	return f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused
}

func (r *Reconciler) statefulSet(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if s.sts != nil && !r.ownedWorkload(s, s.sts) {
		return true, nil
	}
	if s.find.Blocked() {
		if s.sts == nil {
			return true, nil // nothing runs, nothing to heal
		}
		// Heal only: the plan is made at the applied count, so no member is added or removed.
		// Nothing is written this pass, so the live template is the one members keep running:
		// for the healing rules it matches (no rollout of ours is about to recreate a member).
		s.matches = true
		facts := r.facts(s, s.matches)
		s.planHeal(facts, facts.Workload.Replicas)
		return false, nil
	}
	o := r.workloadOptions(s)
	desired := workload.StatefulSet(f, o, f.DesiredReplicas())
	var want *appsv1.StatefulSet
	var drifted []string
	if s.sts != nil {
		want = statefulSetUpdate(s.sts, desired)
		var err error
		if drifted, err = r.Drift.Check(ctx, r.Direct, s.key, s.sts, want, client.FieldOwner(FieldOwner)); err != nil {
			return true, fmt.Errorf("compare StatefulSet %s/%s with its rendering: %w", f.Namespace, f.Name, err)
		}
	}
	s.matches = s.sts != nil && len(drifted) == 0
	facts := r.facts(s, s.matches)
	step := s.planHeal(facts, s.target())
	next := step.Replicas
	if step.Reason != "" && !lifecycle.Provisioned(step.Reason) {
		// StorageIdentityConflict: no member is added and nothing is written, but the members
		// that run are healed.
		s.find.Block(step.Reason, step.Message)
		if s.sts != nil {
			s.planHeal(facts, facts.Workload.Replicas)
		}
		return s.sts == nil, nil
	}
	s.find.Step = lifecycle.Verdict{Reason: step.Reason, Message: step.Message}
	s.uncertain()
	desired.Spec.Replicas = new(next)
	if s.sts == nil {
		return r.create(ctx, s, desired)
	}
	want.Spec.Replicas = new(next)
	applied := lifecycle.ReplicasOf(s.sts.Spec.Replicas)
	if err := r.converge(ctx, s, s.sts, want, applied, next, drifted); err != nil {
		return true, err
	}
	r.recordStep(ctx, s, applied, next)
	s.find.Workload, s.find.Applied = facts.Workload, next
	return false, nil
}

func (r *Reconciler) deployment(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if s.deploy != nil && !r.ownedWorkload(s, s.deploy) {
		return true, nil
	}
	if s.find.Blocked() {
		return true, nil // a Deployment has no healing of its own: nothing to do
	}
	desired := workload.Deployment(f, r.workloadOptions(s), f.DesiredReplicas())
	if s.deploy == nil {
		return r.create(ctx, s, desired)
	}
	d := s.deploy
	want := deploymentUpdate(d, desired)
	drifted, err := r.Drift.Check(ctx, r.Direct, s.key, d, want, client.FieldOwner(FieldOwner))
	if err != nil {
		return true, fmt.Errorf("compare Deployment %s/%s with its rendering: %w", f.Namespace, f.Name, err)
	}
	w := lifecycle.DeploymentFacts(d, len(drifted) == 0)
	next, step := lifecycle.DeploymentStep(w, s.target())
	want.Spec.Replicas = new(next)
	if err := r.converge(ctx, s, d, want, w.Replicas, next, drifted); err != nil {
		return true, err
	}
	r.recordStep(ctx, s, w.Replicas, next)
	s.find.Step = step
	s.uncertain()
	s.find.Workload, s.find.Applied = w, next
	return false, nil
}

// ownedWorkload refuses a workload the fleet did not create: without this fleet's UID label, or
// with an owner reference to anything but this fleet (a controller, or any owner the garbage
// collector would follow to delete the members). Such an object is never converted or adopted;
// the message names it and its owner (foreignWorkload).
func (r *Reconciler) ownedWorkload(s *scope, obj client.Object) bool {
	if s.fleet.Owns(obj) {
		return true
	}
	s.find.Block(v1.ReasonLifecycleBlocked, foreignWorkload(s, obj)+"; it is left alone: delete or rename it, remove the owner reference, or choose another fleet name")
	return false
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
	if err := r.Direct.Update(ctx, obj, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("update %s %s/%s: %w", kindOf(live), live.GetNamespace(), live.GetName(), err)
	}
	why := fmt.Sprintf("replicas %d to %d", applied, next)
	if len(drifted) > 0 {
		why = "the live spec differs from the rendering (a spec change or a hand edit); " + why
	}
	logMutation(ctx, s, "update", kindOf(live)+"/"+live.GetName(), why, "paths", drifted)
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
	created, taken, err := children.Create(ctx, r.Direct, r.Direct, obj)
	if err != nil {
		return true, fmt.Errorf("create %s %s/%s: %w", kindOf(desired), desired.GetNamespace(), desired.GetName(), err)
	}
	if !created { // the name was taken
		if taken == nil || r.ownedWorkload(s, taken) {
			s.soon = time.Second // gone since, or ours and not in the cache yet: the next pass
		}
		return true, nil
	}
	logMutation(ctx, s, "create", kindOf(desired)+"/"+desired.GetName(), "the fleet has no workload")
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
