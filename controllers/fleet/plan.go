package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/reservation"
)

// scope is everything one pass read and decided.
type scope struct {
	fleet *v1.CelldFleet // the defaulted fleet; its status is projected at the end
	// live is the pass's one read of the fleet, as stored; the pass's own patches (the
	// finalizer, the mesh annotation) update it in place.
	live *v1.CelldFleet
	key  types.NamespacedName
	now  time.Time

	// read reads the fleet's children from its namespace's cache; kube reads there and writes
	// to the API server.
	read client.Reader
	kube client.Client

	// own is the workload of the fleet's layout at its name, other one of the other kind
	// there (refused, never converted); nil when there is none.
	own, other client.Object

	pods []corev1.Pod
	// held are the fleet's Pods carrying a replacement hold, in any phase: a held Pod the
	// pod garbage collector marked Failed is no member but must still be released.
	held []corev1.Pod
	// claims carry the fleet's UID label; namedClaims are every claim of the namespace, for the
	// planner, which refuses a claim at a member's name that is not the fleet's.
	claims      []corev1.PersistentVolumeClaim
	namedClaims []corev1.PersistentVolumeClaim

	// reserved is the fleet's reservation as the manager's cache holds it, and pool, for a
	// preview fleet, its parent's whole-bucket reservation; nil when the cache has none (the
	// reservation phase then creates, and the pool is asked of the API server).
	reserved, pool *v1.CelldStorageReservation

	// guard is what the guards check, read by observe; guardErr a read of it that failed.
	guard    lifecycle.GuardInput
	guardErr error

	// find is what the phases found; outcome is lifecycle.Decide's verdict of it: one reason
	// and message explain Ready, Progressing and Blocked together (reference §1.19).
	find    lifecycle.Findings
	outcome lifecycle.Verdict
	routing *metav1.Condition
	// routingInvalid: spec.routing failed validation; routing is left exactly as it is.
	routingInvalid bool
	// reservationName is the name of the fleet's reservation (its bucket and prefix), set once
	// by observe.
	reservationName string
	// heal is the self-healing decision of the workload step's plan, and planned the input it
	// was planned from: the confirmation re-read plans again from the same input (the same
	// target, blockers and template verdict) with only the members fresh, or a fleet whose
	// growth is blocked or held by its capacity policy would be healed at one count and
	// confirmed at another, and never healed.
	heal    *lifecycle.Decision
	planned *lifecycle.WorkloadInput
	// zoneGates are the gated Ordered members the workload plan releases once healing takes no
	// action.
	zoneGates []lifecycle.ZoneRelease
	// abandoned is a replacement this pass committed but gave up before its claim went,
	// because the claim changed; it is the pass's healing finding.
	abandoned *lifecycle.Decision
	// history is the capacity policy's durable state, read from the reservation, and
	// historyBytes the size of its annotation; capacity is the pass's capacity decision, nil
	// without spec.capacity or while paused.
	history      capacity.History
	historyBytes int
	capacity     *capacity.Decision
	// soon asks for the next pass within this time (a write to confirm, a handoff to finish).
	soon   time.Duration
	events []fleetEvent
	// done records the writes the executor (do) made in this pass, in order.
	done []write
}

type fleetEvent struct {
	kind, reason, message string
	regarding             client.Object
}

func newScope(f *v1.CelldFleet, now time.Time) *scope {
	d := f.DeepCopy()
	d.Default()
	return &scope{fleet: d, live: f, key: client.ObjectKeyFromObject(f), now: now,
		find: lifecycle.Findings{Fleet: f.Name, Paused: paused(d)}}
}

// deleting records the deletion phase's progress.
func (s *scope) deleting(reason, message string) {
	s.find.Deletion = &lifecycle.Verdict{Reason: reason, Message: message}
}

// again asks for the next pass within d.
func (s *scope) again(d time.Duration) {
	if s.soon == 0 || d < s.soon {
		s.soon = d
	}
}

// target is the replica count the workload phase plans toward: the capacity decision's, or
// spec.replicas.
func (s *scope) target() int32 {
	if s.capacity != nil {
		return s.capacity.Target
	}
	return s.fleet.DesiredReplicas()
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

// reportAbandoned makes an abandoned replacement the pass's healing finding, and asks for the
// next pass soon: it decides again from what it then finds.
func (s *scope) reportAbandoned() {
	if s.abandoned != nil {
		s.find.Heal = *s.abandoned
		s.again(time.Second)
	}
}

// workloadObject is the StatefulSet or Deployment at the fleet's name as observed, of either
// layout (a deletion removes a workload of the other layout too, unlike workload()), nil when
// there is none.
func (s *scope) workloadObject() client.Object {
	if s.own != nil {
		return s.own
	}
	return s.other
}

// deletion runs while the fleet is being deleted. lifecycle.PlanDeletion decides the pass's
// steps from what observe saw, and this is their executor: routing closes at once, then the workload
// is deleted in the foreground (members drain on SIGTERM), then every claim of the fleet,
// removed members' included, then the static children (the NetworkPolicy and PDB outlive the
// last member, whatever cascade the user chose: they carry no owner reference the garbage
// collector could follow), then the finalizer. The reservation stays: a bucket is never
// released.
//
// Closing routing never delays the runtime's shutdown (seed 000): whatever keeps the route from
// closing (a discovery or render error, a route delete that fails, a foreign finalizer holding
// the route, a child the fleet may not touch) is logged and reported in the deletion message,
// the workload and claim steps run all the same, and the pass is repeated within seconds. The
// children step's error is not returned: the controller's backoff would grow with every member
// event of the shutdown and could then hold the last steps back for many minutes.
func (r *Reconciler) deletion(ctx context.Context, s *scope) (bool, error) {
	if s.fleet.DeletionTimestamp == nil {
		return false, nil
	}
	plan := lifecycle.PlanDeletion(deletionInput(s))
	if plan.Done {
		return true, nil
	}
	s.find.Deletion = plan.Verdict
	closing := ""
	for _, step := range plan.Steps {
		stop, err := r.deletionStep(ctx, s, step, &closing)
		if err != nil {
			return true, fmt.Errorf("%s: %w", step, err)
		}
		if stop {
			break
		}
	}
	if closing != "" {
		if s.find.Deletion != nil {
			s.find.Deletion.Message += "; routing has not closed yet, which does not delay the members' shutdown: " + closing
		}
		s.again(5 * time.Second)
	}
	return true, nil
}

// deletionInput is what the deletion is planned from: the pass's observation.
func deletionInput(s *scope) lifecycle.DeletionInput {
	in := lifecycle.DeletionInput{
		Finalizer: controllerutil.ContainsFinalizer(s.fleet, v1.FinalizerLifecycleProtection),
		Pods:      len(s.pods), Claims: len(s.claims),
	}
	if obj := s.workloadObject(); obj != nil {
		in.Workload, in.WorkloadDeleting = true, obj.GetDeletionTimestamp() != nil
		if !s.fleet.Owns(obj) {
			in.Foreign = foreignWorkload(s, obj)
		}
	}
	return in
}

// closeRouting applies the children of a deleting fleet while members still run: the chart
// renders no route for a deleting fleet, so applying the children removes it, while the
// isolation policy and the PDB stay applied. It says why routing has not closed yet, "" when
// nothing holds it; an error of the step is logged and said, never returned (deletion).
func (r *Reconciler) closeRouting(ctx context.Context, s *scope) string {
	before := len(s.find.Blockers)
	if _, err := r.children(ctx, s); err != nil {
		log.FromContext(ctx).Error(err, "closing routing failed; the fleet's deletion goes on", "fleet", s.key.String())
		return err.Error()
	}
	if len(s.find.Blockers) > before {
		// A child the fleet may not apply (a foreign object, admission refusing a write).
		return s.find.Blockers[before].Message
	}
	if c := s.routing; c != nil {
		switch c.Reason {
		case v1.ReasonRemovingRoute, v1.ReasonRoutingError, v1.ReasonServiceConflict:
			return c.Message
		}
	}
	return ""
}

// validate fails closed on a fleet that bypassed admission (an object stored by an older
// schema, or written past the webhook-less CEL rules). An invalid routing block alone does not
// block the runtime: RoutingReady reports it, the existing route and policy are kept, and the
// fleet is provisioned and healed as usual. Any other invalid field stops the pass.
func (r *Reconciler) validate(_ context.Context, s *scope) (bool, error) {
	// The bound on spec.env's literal values is admission's alone: it keeps the reserved-tuning
	// record small enough to write. A fleet stored before the bound runs as it is; only its
	// tuning stays as created until its env is shortened.
	errs := slices.DeleteFunc(s.fleet.Validate(), func(e *field.Error) bool { return e.Detail == v1.MsgEnvValuesTotal })
	if len(errs) == 0 {
		return false, nil
	}
	var routing, other field.ErrorList
	for _, e := range errs {
		if e.Field == "spec.routing" || strings.HasPrefix(e.Field, "spec.routing.") {
			routing = append(routing, e)
		} else {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		s.find.Block(v1.ReasonInvalidConfiguration, fmt.Sprintf("CelldFleet %s/%s is invalid and was not provisioned: %s; fix the spec (kubectl explain celldfleet.spec)",
			s.fleet.Namespace, s.fleet.Name, summarize(errs)))
		return true, nil
	}
	s.routingInvalid = true
	s.routing = new(children.InvalidRouting(s.fleet, fmt.Sprintf("spec.routing of CelldFleet %s/%s is invalid: %s; the existing route and policy are kept and the fleet runs without routing changes: fix spec.routing (kubectl explain celldfleet.spec.routing)",
		s.fleet.Namespace, s.fleet.Name, summarize(routing))))
	return false, nil
}

func summarize(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Field+": "+e.Detail)
	}
	if len(msgs) > 5 {
		msgs = append(msgs[:5], fmt.Sprintf("and %d more", len(errs)-5))
	}
	return strings.Join(msgs, "; ")
}

// finalizer adds the lifecycle-protection finalizer with an optimistic-lock merge patch, so
// the fleet cannot disappear before its workload and claims are gone.
func (r *Reconciler) finalizer(ctx context.Context, s *scope) (bool, error) {
	live := s.live
	if controllerutil.ContainsFinalizer(live, v1.FinalizerLifecycleProtection) {
		return false, nil
	}
	w := write{verb: "add finalizer", object: "CelldFleet/" + live.Name + " " + v1.FinalizerLifecycleProtection,
		why: "the fleet may not disappear before its workload and claims"}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error {
		patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(live, v1.FinalizerLifecycleProtection)
		return r.Client.Patch(ctx, live, patch)
	})); err != nil {
		return true, err
	}
	s.fleet.Finalizers = live.Finalizers
	return false, nil
}

// guards refuses to provision a fleet whose prerequisites are missing: lifecycle.Guard, the
// pure chain of the checks, on what observeGuards read. A missing prerequisite is a blocker:
// nothing is created or changed, but the pass goes on to heal the members that already run (a
// prerequisite removed under a running fleet must not leave a member stuck on a lost node).
func (r *Reconciler) guards(_ context.Context, s *scope) (bool, error) {
	if s.guardErr != nil {
		return true, s.guardErr
	}
	if b := lifecycle.Guard(s.guard); b != nil {
		s.find.Block(b.Reason, b.Message)
	}
	return false, nil
}

// foreignWorkload is the sentence naming a workload at the fleet's name that the fleet does not
// own, and why (children.Foreign: the missing label, or the owner it names), worded as the
// children's conflicts are.
func foreignWorkload(s *scope, obj client.Object) string {
	return fmt.Sprintf("%s %s/%s exists and %s (this fleet's objects carry %s=%s and no owner reference)",
		kindOf(obj), obj.GetNamespace(), obj.GetName(), children.Foreign(obj, s.fleet), v1.LabelFleetUID, s.fleet.UID)
}

// leftAlone is the LifecycleBlocked message of a foreign workload at the fleet's name.
func leftAlone(s *scope, obj client.Object) string {
	return foreignWorkload(s, obj) + "; it is left alone: delete or rename it, remove the owner reference, or choose another fleet name"
}

// reservation gets or creates the fleet's CelldStorageReservation and verifies that it binds
// the bucket (or, for a preview fleet, its prefix) to this fleet. Create is the arbitration
// point between fleets that ask for one scope: whoever creates the reservation first owns it
// forever, and the arbitration reads the API server, never a cache, so leader election is not
// the safety proof. A reservation the cache already holds is verified from the cache: its spec
// (the holder's UID, the hash, a seed request) is immutable, so a cached copy names its holder
// as surely as the API server does, and every write to it carries the read's resourceVersion. A preview fleet runs only in its parent's preview pool: the whole-bucket
// reservation is read first, every pass, and a prefix anywhere else is refused before
// anything is reserved.
func (r *Reconciler) reservation(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	if f.Spec.Storage.Prefix != "" || f.Spec.Storage.PreviewFleetRef != nil {
		if inPool, err := r.inPool(ctx, s); !inPool || err != nil {
			return err != nil, err
		}
	}
	want := reservation.Desired(f)
	res, conflict := s.reserved, (*v1.CelldStorageReservation)(nil)
	var err error
	if res == nil {
		w := write{verb: "reserve", object: "CelldStorageReservation/" + want.Name,
			why: "the fleet's storage scope is reserved to it before anything of it is created"}
		if err = r.do(ctx, s, w, func(ctx context.Context) (created bool, err error) {
			res, conflict, created, err = reservation.Claim(ctx, r.Direct, want)
			return created, err
		}); err != nil {
			return true, err
		}
	}
	if b := lifecycle.ReservationHeld(f, want, res, conflict); b != nil {
		s.find.Block(b.Reason, b.Message)
		return false, nil // heal what runs; provision nothing
	}
	if res, err = r.writeRecords(ctx, s, res); err != nil {
		return true, err
	}
	if stop, err := r.seedGate(ctx, s, res); stop || err != nil {
		return true, err
	}
	r.readHistory(ctx, s, res)
	return false, nil
}

// inPool reads the preview pool a preview fleet's bucket must be (lifecycle.PreviewPool) and
// blocks the fleet when it is not.
func (r *Reconciler) inPool(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	st := &f.Spec.Storage
	pool, err := s.pool, error(nil)
	if pool == nil {
		pool, err = r.directReservation(ctx, reservation.Name(st.Bucket, ""))
	}
	if err != nil {
		return false, fmt.Errorf("read the preview pool of CelldFleet %s/%s: %w", f.Namespace, f.Name, err)
	}
	if b := lifecycle.PreviewPool(f, pool); b != nil {
		s.find.Block(b.Reason, b.Message)
		return false, nil
	}
	return true, nil
}

// seedGate holds a seeded preview fleet before anything of it exists: no Service, policy,
// route or member is created until the executor the request names reports success on the
// fleet's reservation and its manifest matches the request. The operator then opens the gate
// (annotation seed-gate Open) with an Update carrying the pass's read of the reservation, so
// it never opens a gate a cancellation closed meanwhile; from then on the fleet is an
// ordinary fleet. A seed that failed, was cancelled or cannot be verified blocks the fleet for
// good (SeedReservationBlocked): a prefix is never seeded twice. res is the reservation the
// pass verified as the fleet's.
func (r *Reconciler) seedGate(ctx context.Context, s *scope, res *v1.CelldStorageReservation) (bool, error) {
	g := reservation.GateOf(res, s.fleet.Spec.Storage.Seed)
	switch g.State {
	case reservation.SeedStart:
		return false, nil
	case reservation.SeedWait:
		s.find.Seed = &lifecycle.Verdict{Reason: v1.ReasonSeedInitializing, Message: g.Message}
		return true, nil
	case reservation.SeedRefused:
		s.find.Block(v1.ReasonSeedReservationBlocked, g.Message)
		return true, nil
	}
	open := res.DeepCopy()
	if open.Annotations == nil {
		open.Annotations = map[string]string{}
	}
	open.Annotations[v1.AnnotationSeedGate] = v1.SeedGateOpen
	w := write{verb: "open seed gate", object: "CelldStorageReservation/" + res.Name + " " + v1.AnnotationSeedGate, why: g.Message}
	if err := r.do(ctx, s, w, sent(func(ctx context.Context) error { return r.Direct.Update(ctx, open) })); err != nil {
		return true, err
	}
	return false, nil
}

// cancelSeed runs first when a seeded preview fleet whose gate never opened is deleted:
// nothing of it started, and nothing may start once it is gone. A seed no executor claimed is
// recorded Canceled by the operator; a running one gets cancelRequestedAt and deletion waits
// for the executor to acknowledge it (SeedCancellationBlocked); once the seed is final the
// gate is closed, and deletion goes on (it finds nothing to shut down). Every write carries
// the resourceVersion read, so a claim, a progress message or a result the executor wrote
// meanwhile makes it a conflict. The status write copies the seed result it read, so it must
// never land on a newer one; and an executor reports progress while it copies, which would
// make every write from a cached read conflict for as long as the copy runs. So a conflict is
// decided again at once, from the reservation as the API server has it: the step may have
// changed (the executor claimed the seed, or finished it), and the write follows the fresh
// decision. A fleet whose gate is open is shut down as any fleet.
func (r *Reconciler) cancelSeed(ctx context.Context, s *scope) (bool, error) {
	st := &s.fleet.Spec.Storage
	if st.Seed == nil {
		return false, nil
	}
	name := reservation.Name(st.Bucket, st.Prefix)
	// The cached copy observe read is enough for the first decision: every write below
	// carries its resourceVersion, so a stale one conflicts and is decided again from the API
	// server, which is also asked when the cache has none.
	res, err := s.reserved, error(nil)
	if res == nil {
		res, err = r.directReservation(ctx, name)
	}
	for attempt := 1; ; attempt++ {
		if err != nil {
			return true, fmt.Errorf("cancel the seed of %s: %w", s.key, err)
		}
		if res == nil {
			return false, nil // never reserved: nothing was requested, nothing started
		}
		if res.Spec.FleetUID != string(s.fleet.UID) {
			return false, nil // another fleet's: this one reserved nothing and started nothing
		}
		stop, werr := r.cancelStep(ctx, s, res)
		if !apierrors.IsConflict(werr) {
			return stop, werr
		}
		if attempt >= seedCancelAttempts {
			return true, fmt.Errorf("CelldStorageReservation %s kept changing through %d decisions: %w", name, attempt, werr)
		}
		log.FromContext(ctx).Info("reservation changed since it was read; deciding the seed's cancellation again on the API server's copy",
			"fleet", s.key.String(), "reservation", name)
		res, err = r.directReservation(ctx, name)
	}
}

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

// capacity makes the pass's one capacity decision for a fleet with spec.capacity: from the
// latest collection, the trend of the earlier ones and the reservation's history. The workload
// phase hands its Target to the lifecycle planner, which still grows in runs and removes one
// member per step. A paused fleet makes no new decision; its status keeps the last one.
func (r *Reconciler) capacity(_ context.Context, s *scope) (bool, error) {
	f := s.fleet
	if f.Spec.Capacity == nil || r.Memory == nil {
		r.Memory.dropCapacity(s.key)
		return false, nil
	}
	if paused(f) {
		return false, nil
	}
	in := capacity.Input{Policy: *f.Spec.Capacity, Now: s.now, Declared: f.DesiredReplicas(), History: s.history}
	if w := s.workloadFacts(false); w.Exists {
		in.Applied = w.Replicas
		if in.Applied > 0 && f.RunsAsStatefulSet() {
			in.Victim = v1.MemberName(f.Name, in.Applied-1) // a scale-in removes the last ordinal
		}
	}
	in.Observation, in.Trend = r.Memory.capacity(s.key, f.UID)
	d := capacity.Decide(in)
	r.Memory.keepTrend(s.key, f.UID, d.Trend)
	s.capacity = &d
	if d.RequeueAfter > 0 {
		s.again(d.RequeueAfter)
	}
	return false, nil
}

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
		layoutOf(s.fleet).setReplicas(ob.desired, p.Replicas)
		return r.create(ctx, s, ob.desired)
	case lifecycle.WriteUpdate:
		s.find.Step = p.Step
		layoutOf(s.fleet).setReplicas(ob.want, p.Replicas)
		applied := in.Facts.Workload.Replicas
		if err := r.converge(ctx, s, ob.live, ob.want, applied, p.Replicas, ob.drifted); err != nil {
			return true, err
		}
		r.recordStep(ctx, s, applied, p.Replicas)
		s.find.Workload, s.find.Applied = in.Facts.Workload, p.Replicas
	}
	return p.Stop, nil
}

// healing finishes or aborts any replacement handoff an earlier pass left, then takes at most
// one self-healing action, then releases Ordered members' zone gates.
func (r *Reconciler) healing(ctx context.Context, s *scope) (bool, error) {
	if !s.fleet.RunsAsStatefulSet() || s.heal == nil {
		return false, nil
	}
	if handled, err := r.resumeReplacements(ctx, s); handled || err != nil {
		s.again(time.Second)
		s.reportAbandoned()
		return true, err
	}
	d := *s.heal
	if d.Action != lifecycle.None {
		fresh, same, err := r.confirm(ctx, s, d)
		if err != nil || !same {
			s.again(time.Second)
			return true, err
		}
		d = fresh // its preconditions carry the API server's resourceVersions
	}
	if err := r.act(ctx, s, d); err != nil {
		return true, err
	}
	s.find.Heal = d
	s.reportAbandoned()
	if d.Action != lifecycle.None {
		return true, nil
	}
	return false, r.releaseZoneGates(ctx, s, s.zoneGates)
}

// confirm re-reads the fleet's Pods and claims from the API server and plans the workload step
// again from the pass's input with those members: an action that deletes a Pod or a claim,
// decided on a cache that may lag, is taken only when the API server's state leads to the same
// action on the same objects.
func (r *Reconciler) confirm(ctx context.Context, s *scope, d lifecycle.Decision) (lifecycle.Decision, bool, error) {
	if r.Caches == nil {
		return d, true, nil // already read from the API server
	}
	fresh := *s
	if err := r.readMembers(ctx, &fresh, r.Direct, false); err != nil {
		return d, false, err
	}
	in := *s.planned
	in.Facts = r.facts(&fresh, in.Facts.Workload.TemplateMatches)
	var again lifecycle.Decision
	if h := lifecycle.PlanWorkload(in).Heal; h != nil {
		again = *h
	}
	if !d.Confirms(again) {
		log.FromContext(ctx).Info("heal decision changed on a fresh read; deciding again", "fleet", s.key.String(), "cached", d.Message, "fresh", again.Message)
		return d, false, nil
	}
	return again, true, nil
}
