package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/mutation"
	"github.com/celld/celld-operator/controllers/reservation"
)

// write is one API write of a pass, as the executor runs, logs and records it.
type write struct {
	// verb is the mutation line's action ("add finalizer", "delete", "hold", ...), and object
	// what it writes: Kind/name, with the one field written where it is one field.
	verb, object string
	// why is the reason the line gives; kv are further key/value pairs of the line.
	why string
	kv  []any
	// member is the fleet member the write concerns (its Pod, its claim, its hold); "" for a
	// write about the fleet as a whole. takesDown: the write takes that member down (a Pod
	// delete). Once a write took a member down, the pass writes nothing about anything else:
	// it takes at most one disruptive action, and the executor refuses any other write.
	member    string
	takesDown bool
	// report: a write of the fleet's own status by the report, which tells what the pass did
	// and is not one of its actions; the rule above does not hold it back.
	report bool
	// event is told with the pass's events once the write is done, never for a write that
	// failed.
	event *fleetEvent
}

// errAfterDisruption is the executor's refusal of a write about anything but the member the
// pass already took down: a second member's Pod, another claim, a fleet-level write. The plans
// never ask for one (the healing phase ends the pass after its action); the executor refuses it
// anyway, so no future plan takes two members down, or acts on a stale plan after a
// disruption, by mistake.
type errAfterDisruption struct{ refused, done write }

func (e errAfterDisruption) Error() string {
	return fmt.Sprintf("refused to %s %s: this pass already did %s %s, and after taking a member down a pass writes nothing but what completes that member's action",
		e.refused.verb, e.refused.object, e.done.verb, e.done.object)
}

// do is the pass's executor of one write: it refuses a write after a disruption that does not
// concern the member taken down, sends it, and, once the API server accepted it, logs the one
// structured mutation line every write carries, records the write on the pass (scope.done) and
// keeps its event. An error is wrapped with the write's verb and object (the API error stays
// inspectable through errors.As). send reports whether it changed anything: a delete of what
// is already gone, say, is no write, and is neither logged nor recorded.
func (r *Reconciler) do(ctx context.Context, s *scope, w write, send func(context.Context) (bool, error)) error {
	for _, d := range s.done {
		if d.takesDown && !w.report && (w.member == "" || w.member != d.member) {
			return errAfterDisruption{refused: w, done: d}
		}
	}
	changed, err := send(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.verb, w.object, err)
	}
	if !changed {
		return nil
	}
	mutation.Log(ctx, w.verb, s.key.String(), w.object, w.why, w.kv...)
	s.done = append(s.done, w)
	if w.event != nil {
		s.events = append(s.events, *w.event)
	}
	return nil
}

// sent is a send whose write always changes what it writes, when it succeeds.
func sent(send func(context.Context) error) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if err := send(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
}

// deletionStep runs one step of the deletion plan; stop ends the pass after it. Closing routing
// records in closing what keeps a route open, and never stops or fails the pass.
func (r *Reconciler) deletionStep(ctx context.Context, s *scope, step lifecycle.DeletionStep, closing *string) (stop bool, err error) {
	switch step {
	case lifecycle.CancelSeed:
		return r.cancelSeed(ctx, s)
	case lifecycle.CloseRouting:
		*closing = r.closeRouting(ctx, s)
	case lifecycle.ReleaseHolds:
		return false, r.releaseHolds(ctx, s)
	case lifecycle.DeleteWorkload:
		return false, r.deleteWorkload(ctx, s)
	case lifecycle.DeleteClaims:
		return false, r.deleteClaims(ctx, s)
	case lifecycle.RemoveChildren:
		remaining, err := r.Applier.Remaining(ctx, s.kube, s.fleet)
		if err != nil {
			s.deleting(v1.ReasonDeleting, fmt.Sprintf("Members and disks are gone; deleting the Services, policies and routes failed, retrying: %v", err))
			return true, err
		}
		if len(remaining) > 0 {
			s.deleting(v1.ReasonDeleting, fmt.Sprintf("Members and disks are gone; deleting %d Services, policies and routes: %s", len(remaining), strings.Join(remaining, ", ")))
			s.again(time.Second)
			return true, nil
		}
	case lifecycle.ConfirmGone:
		gone, err := r.goneForSure(ctx, s)
		if err != nil || !gone {
			s.deleting(v1.ReasonDeleting, "Members, disks and children are gone from the operator's cache; waiting for the API server to confirm before the fleet is released")
			s.again(time.Second)
			return true, err
		}
	case lifecycle.RemoveFinalizer:
		live := s.live
		w := write{verb: "remove finalizer", object: "CelldFleet/" + live.Name + " " + v1.FinalizerLifecycleProtection, why: "the workload and every claim are gone"}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error {
			patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
			controllerutil.RemoveFinalizer(live, v1.FinalizerLifecycleProtection)
			return r.Client.Patch(ctx, live, patch)
		})); err != nil {
			return true, client.IgnoreNotFound(err)
		}
	}
	return false, nil
}

// deleteWorkload deletes the fleet's own workload in the foreground (members drain on SIGTERM),
// with the UID and resourceVersion the plan was made on: a workload relabelled since is
// decided again by the next pass.
func (r *Reconciler) deleteWorkload(ctx context.Context, s *scope) error {
	obj := s.workloadObject()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	w := write{verb: "delete", object: kindOf(obj) + "/" + obj.GetName(), why: "the fleet is being deleted: the workload goes first, members drain"}
	return client.IgnoreNotFound(r.do(ctx, s, w, sent(func(ctx context.Context) error {
		return r.Direct.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground),
			client.Preconditions{UID: &uid, ResourceVersion: &rv})
	})))
}

// deleteClaims deletes every claim carrying the fleet's UID label that is not already
// deleting (deleteFleetClaim).
func (r *Reconciler) deleteClaims(ctx context.Context, s *scope) error {
	for i := range s.claims {
		c := &s.claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		if err := r.deleteFleetClaim(ctx, s, c); err != nil {
			return err
		}
	}
	return nil
}

// deleteFleetClaim deletes one claim of the deleted fleet. What makes it the fleet's is its UID
// label, so the delete carries the UID and resourceVersion of the pass's read: a claim
// relabelled since (someone keeping that disk) survives. Other controllers write a claim's
// status and metadata at any moment (the PV binder its phase and annotations, the PVC
// protection controller its finalizer, the unused-since controller its Unused condition as the
// fleet's last Pod stops), and each write moves the resourceVersion; so a conflict is neither
// the end nor a success: deleteClaimVerified reads the claim again and, if it is still the same
// claim and still carries the fleet's label, deletes it again with the fresh resourceVersion.
func (r *Reconciler) deleteFleetClaim(ctx context.Context, s *scope, c *corev1.PersistentVolumeClaim) error {
	kept, err := r.deleteClaimVerified(ctx, s, "", "deleted fleet "+s.fleet.Name, c.Name, c.UID, c.ResourceVersion,
		func(live *corev1.PersistentVolumeClaim) string {
			if live.Labels[v1.LabelFleetUID] != string(s.fleet.UID) {
				return "it no longer carries the fleet's label"
			}
			return ""
		}, "the fleet is being deleted and its workload is gone")
	if kept != "" {
		log.FromContext(ctx).Info("claim is not the deleted fleet's any more and is kept", "fleet", s.key.String(), "claim", c.Name, "why", kept)
	}
	return err
}

// seedCancelAttempts bounds how often the seed's cancellation is decided again on the API
// server's copy of the reservation after a write of it met a conflict. Past it the conflict
// ends the pass, and the next pass decides again.
const seedCancelAttempts = 5

// cancelStep takes the cancellation's one step on res, the reservation of the fleet's seed.
// Its writes carry res's resourceVersion.
func (r *Reconciler) cancelStep(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (bool, error) {
	name := res.Name
	req := res.Spec.Seed
	switch step := reservation.CancelOf(res); step {
	case reservation.CancelUnclaimed, reservation.CancelRequest:
		res = res.DeepCopy()
		res.Status.Seed = reservation.Cancelled(res, step, s.now)
		w := write{verb: "cancel seed", object: "CelldStorageReservation/" + name + " status.seed",
			why: "the fleet is deleted before its seed finished", kv: []any{"phase", res.Status.Seed.Phase}}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Status().Update(ctx, res) })); err != nil {
			return true, err
		}
		s.deleting(v1.ReasonDeleting, fmt.Sprintf("Cancelling the seed of CelldFleet %s on CelldStorageReservation %s", s.key, name))
		s.again(time.Second)
		return true, nil
	case reservation.CancelWait:
		s.deleting(v1.ReasonSeedCancellationBlocked, fmt.Sprintf(
			"CelldFleet %s is deleted while executor %s (worker %s) copies its seed; the fleet is released once the executor acknowledges the cancellation requested at %s on CelldStorageReservation %s (status.seed.phase Canceled or Failed). If the executor is gone for good, stop its workers, then record the seed Failed on that reservation's status subresource (docs/preview-seeding.md)",
			s.key, req.Executor, res.Status.Seed.ExecutorID, res.Status.Seed.CancelRequestedAt.UTC().Format(time.RFC3339), name))
		return true, nil
	case reservation.CancelClose:
		res = res.DeepCopy()
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[v1.AnnotationSeedGate] = v1.SeedGateClosed
		w := write{verb: "close seed gate", object: "CelldStorageReservation/" + name + " " + v1.AnnotationSeedGate,
			why: "the fleet is deleted before it started", kv: []any{"seed", res.Status.Seed.Phase}}
		if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
			return true, err
		}
	}
	return false, nil
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

// writeRecords brings the reservation's records to this release's in one write, as
// reservation.PlanRecords decides: the creation-time tuning record when the reservation has
// none that verifies (so execution, lifecycle, env and telemetry may change later and the
// reservation still verifies), and the current-operation record kept only as this release's
// capacity state (an earlier release's record rewritten or removed, an operation it held in
// flight reported superseded: the StatefulSet rolls members onto the current template
// instead). A settled reservation gets no write. It is an Update carrying the read's
// resourceVersion, never retried: if anyone wrote the reservation since, the conflict ends
// the pass and the next one decides again from a fresh read.
func (r *Reconciler) writeRecords(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (*v1.CelldStorageReservation, error) {
	plan, err := reservation.PlanRecords(res, s.fleet)
	if err != nil || plan.Empty() {
		return res, err
	}
	updated := plan.Apply(res)
	w := write{verb: "update records", object: "CelldStorageReservation/" + res.Name + " " + plan.String(), why: strings.Join(plan.Why, "; ")}
	if plan.Superseded != "" {
		w.event = &fleetEvent{kind: corev1.EventTypeNormal, reason: v1.EventOperationSuperseded,
			message: fmt.Sprintf("Dropped %s recorded by an earlier release; members roll onto the current template instead", plan.Superseded)}
	}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, updated) })); err != nil {
		return nil, err
	}
	return updated, nil
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

// recordStep records a replica change the workload phase wrote, from and to applied counts, in
// the reservation's capacity history: every step, manual or policy, starts the cooldowns, and a
// policy addition keeps the load it grew from. The write follows the step; a failed write loses
// the record (the cooldown then counts from an earlier step), never records a step not taken.
// capacity.PlanStep decides what the step tells and records.
func (r *Reconciler) recordStep(ctx context.Context, s *scope, from, to int32) {
	st, err := capacity.PlanStep(s.capacity, s.history, s.now, from, to)
	if st.Event != "" {
		s.events = append(s.events, fleetEvent{kind: corev1.EventTypeNormal, reason: st.Event, message: st.Message})
		r.metrics.step(s.fleet, to > from)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the capacity step is taken but its record cannot be encoded", "from", from, "to", to)
		return
	}
	if !st.Changed {
		return // what the annotation would hold is what it holds
	}
	if err := r.writeHistory(ctx, s, st.Encoded); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the capacity step is taken but its record is lost; the cooldown counts from the previous step",
			"from", from, "to", to)
		return
	}
	s.history = st.History
}

// writeHistory writes the encoded history to the reservation's current-operation annotation
// with an Update on a fresh read, never retried: a conflict loses this record.
func (r *Reconciler) writeHistory(ctx context.Context, s *scope, state []byte) error {
	value, err := reservation.CapacityAnnotation(s.fleet.UID, state)
	if err != nil {
		return err
	}
	res := &v1.CelldStorageReservation{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Name: s.reservationName}, res); err != nil {
		return fmt.Errorf("read CelldStorageReservation %s: %w", s.reservationName, err)
	}
	if ok, why := reservation.Matches(res, s.fleet); !ok || len(res.OwnerReferences) > 0 || res.DeletionTimestamp != nil {
		return fmt.Errorf("CelldStorageReservation %s no longer binds the fleet (%s)", res.Name, why)
	}
	if res.Annotations == nil {
		res.Annotations = map[string]string{}
	}
	res.Annotations[v1.AnnotationCurrentOperation] = value
	w := write{verb: "record", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationCurrentOperation,
		why: "a replica step of a fleet with a capacity policy"}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, res) })); err != nil {
		return err
	}
	s.historyBytes = len(value)
	return nil
}

// act carries out one decision; every delete is bound to the object's UID, and where it
// matters to its resourceVersion. A Pod already gone is no write.
func (r *Reconciler) act(ctx context.Context, s *scope, d lifecycle.Decision) error {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = s.fleet.Namespace, d.Pod.Name
	w := write{object: "Pod/" + d.Pod.Name, why: d.Message, member: d.Pod.Name, takesDown: true}
	if d.Event != "" {
		w.event = &fleetEvent{kind: corev1.EventTypeWarning, reason: d.Event, message: d.EventMessage}
	}
	var opts []client.DeleteOption
	switch d.Action {
	case lifecycle.None:
		return nil
	case lifecycle.ForceDeletePod:
		uid := d.Pod.UID
		w.verb, opts = "force delete", []client.DeleteOption{client.GracePeriodSeconds(0), client.Preconditions{UID: &uid}}
	case lifecycle.DeletePod:
		uid, rv := d.Pod.UID, d.Pod.ResourceVersion
		w.verb, opts = "delete", []client.DeleteOption{client.Preconditions{UID: &uid, ResourceVersion: &rv}}
	case lifecycle.ReplaceMember:
		// the Pod (or lone claim) delete commits the replacement; replace tells its event and
		// counts it then
		_, err := r.replace(ctx, s, d)
		return err
	default:
		return fmt.Errorf("unknown healing action %v", d.Action)
	}
	deleted := false
	err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
		err := r.Direct.Delete(ctx, pod, opts...)
		deleted = err == nil
		return deleted, client.IgnoreNotFound(err)
	})
	if deleted {
		r.metrics.healed(s.fleet, d)
	}
	return err
}

// zoneLabel is the well-known topology label the Ordered layout pins members to.
const zoneLabel = "topology.kubernetes.io/zone"

// zoneGateAttempts bounds how often a zone gate's release is tried again after the Pod's
// resourceVersion moved while it was still the same gated Pod. Past it the pass reports that it
// could not release the gate, and the next pass tries again.
const zoneGateAttempts = 5

// releaseZoneGates carries out the workload plan's zone releases: each gated Ordered member is
// pinned to the zone of its ordinal and its gate lifted, so the layout spreads
// deterministically. A release that cannot be made is reported (SchedulingBlocked) and the
// next pass tries again.
func (r *Reconciler) releaseZoneGates(ctx context.Context, s *scope, releases []lifecycle.ZoneRelease) error {
	for _, z := range releases {
		i := slices.IndexFunc(s.pods, func(p corev1.Pod) bool { return p.Name == z.Pod.Name && p.UID == z.Pod.UID })
		if i < 0 {
			continue // planned from these Pods: not reached
		}
		if err := r.releaseZoneGate(ctx, s, &s.pods[i], z.Zone); err != nil {
			s.find.ZoneGate = &lifecycle.Verdict{Reason: v1.ReasonSchedulingBlocked, Message: fmt.Sprintf("Could not release the zone gate of member %s: %v; the operator retries", z.Pod.Name, err)}
			return nil
		}
	}
	return nil
}

// releaseZoneGate pins the gated Pod p to zone and lifts its gate, with an Update carrying the
// resourceVersion of the read, so nothing another writer set on the Pod (labels, annotations,
// finalizers, other gates) is overwritten. Others write a gated Pod at once: the scheduler
// records PodScheduled=False (SchedulingGated) in its status right after the StatefulSet
// controller creates it. A conflict is therefore never the end, nor taken for success: the Pod
// is read again from the API server and, if it still is the same Pod, not deleting and still
// gated, the gate is lifted on that read. A Pod that is gone, replaced or no longer gated is
// left to the next pass, which decides on what it finds.
func (r *Reconciler) releaseZoneGate(ctx context.Context, s *scope, p *corev1.Pod, zone string) error {
	uid := p.UID
	for attempt := 1; ; attempt++ {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[zoneLabel] = zone
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v1.SchedulingGateBucketZone })
		w := write{verb: "release zone gate", object: "Pod/" + p.Name, member: p.Name, why: "an Ordered member runs in the zone of its ordinal: " + zone}
		err := r.do(ctx, s, w, func(ctx context.Context) (bool, error) {
			err := r.Direct.Update(ctx, p)
			return err == nil, client.IgnoreNotFound(err)
		})
		switch {
		case err == nil:
			return nil // released, or the Pod is gone (its successor is decided by a later pass)
		case !apierrors.IsConflict(err):
			return err
		case attempt >= zoneGateAttempts:
			return fmt.Errorf("its resourceVersion kept moving through %d attempts: %w", attempt, err)
		}
		fresh := &corev1.Pod{}
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("re-read the Pod after its update met a conflict: %w", err)
		}
		if fresh.UID != uid || fresh.DeletionTimestamp != nil || !lifecycle.ZoneGated(fresh) {
			// Another Pod at the name, a Pod going away, or a gate someone else lifted: this
			// decision no longer applies, and the next pass decides on what it finds.
			s.again(time.Second)
			return nil
		}
		log.FromContext(ctx).Info("gated Pod changed since it was read (still the same gated Pod); releasing its zone gate on the fresh read",
			"fleet", s.key.String(), "pod", p.Name, "resourceVersion", fresh.ResourceVersion)
		*p = *fresh
	}
}
