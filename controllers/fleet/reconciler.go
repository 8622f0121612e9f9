package fleet

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/nscache"
	"github.com/celld/celld-operator/controllers/workload"
)

// FieldOwner is the one field manager of every object and status field the reconciler applies.
const FieldOwner = "celld-operator"

// Reconciler drives CelldFleets. A fleet's children are read from its namespace's cache
// (Caches): the operator may hold a Role in only some namespaces, and a namespace without it
// surfaces as NamespaceAccessDenied for its fleets instead of stalling a cluster-wide cache.
// Reads that safety depends on go to the API server (Direct): reservation arbitration, the
// re-read of a fleet's members before a Pod or claim is deleted, the read of what a create
// found at a taken name, and the last check before the finalizer goes.
type Reconciler struct {
	// Client reads CelldFleets (and StorageClasses) from the manager's cache and writes fleets.
	Client client.Client
	// Direct writes children and reads what must not come from a cache.
	Direct client.Client
	// Caches hold the fleet namespaces' children; nil reads them from Direct (unit tests).
	Caches *nscache.Set

	Recorder events.EventRecorder
	Options  Options
	Children *children.Renderer
	Applier  *children.Applier
	// APIs reports which optional APIs (Gateway API, Istio security) the cluster serves.
	APIs func(context.Context) (gatewayAPI, istio bool, err error)
	// Now is the clock; tests replace it.
	Now     func() time.Time
	metrics *metrics
	// AfterReplacementPodDelete, a test hook, runs after a replacement deleted its victim Pod
	// and before it commits and deletes the claim: crash tests stop the operator there.
	AfterReplacementPodDelete func(namespace, pod string)
	// Drift remembers which live workload contents were verified as the rendering; nil
	// remembers nothing, so every pass asks the API server.
	Drift *drift.Detector
	// Memory is what the reconciler keeps of each fleet between passes: the capacity policy's
	// latest observations and trends, and the last status write, which paces the next; nil
	// decides no capacity step (spec.replicas is applied as declared) and writes every status
	// change at once.
	Memory *Memory
	// created holds the answers to workload creations the cache has not delivered yet; nil
	// reads such a workload from the API server.
	created *drift.Answers
}

// phase is one step of a reconcile. It records what it decided on the scope and says whether
// the pass stops there.
type phase func(ctx context.Context, s *scope) (stop bool, err error)

// Reconcile drives one CelldFleet one step toward its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	f := &v1.CelldFleet{}
	if err := r.Client.Get(ctx, req.NamespacedName, f); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName) // the fleet is gone: nothing remembered of it may outlive it
			r.releaseNamespace(ctx, req.Namespace)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	s := newScope(f, r.now())

	err := r.runPhases(ctx, s, []namedPhase{
		{"observe", r.observe}, {"deletion", r.deletion}, {"validate", r.validate}, {"finalizer", r.finalizer},
		{"guards", r.guards}, {"reservation", r.reservation}, {"children", r.children}, {"capacity", r.capacity},
		{"workload", r.workload}, {"healing", r.healing},
	})
	switch {
	case err == nil:
	case nscache.AccessDenied(err):
		s.find.Block(v1.ReasonNamespaceAccessDenied, fmt.Sprintf(
			"The operator may not manage namespace %s (%s); apply the Role and RoleBinding celld-operator-fleet from config/rbac/fleet_namespace_role.yaml (or add the namespace to the chart's fleetNamespaces) in namespace %s",
			f.Namespace, err.Error(), f.Namespace))
		err = nil
	case refused(err):
		s.find.Block(v1.ReasonInfrastructureBlocked, refusedMessage(s, err))
		err = nil
	case apierrors.IsConflict(err):
		// Someone wrote between our read and our write: the pass saw a state that is gone, so
		// it reports no status and starts again from fresh reads. What it did is still told.
		r.emitActions(s, s.live)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	default:
		s.find.Failure = &lifecycle.Verdict{Reason: v1.ReasonProvisioning, Message: fmt.Sprintf("Retrying after an error: %v", err)}
	}
	s.outcome = lifecycle.Decide(s.find)
	if reportErr := r.report(ctx, s); reportErr != nil && err == nil {
		err = reportErr
	}
	after := s.find.Requeue(s.outcome, lifecycle.Periods{Resync: r.requeueDelay(f), Waiting: r.Options.WaitingRequeue})
	if s.soon > 0 {
		after = min(after, s.soon)
	}
	if err != nil {
		return ctrl.Result{}, err // controller-runtime retries with backoff
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// refused: admission (a webhook, a ValidatingAdmissionPolicy, a quota, a terminating
// namespace) refused a write. That is not missing RBAC, and it says what denied it.
func refused(err error) bool {
	return (apierrors.IsForbidden(err) && !nscache.AccessDenied(err)) || apierrors.IsInvalid(err)
}

func refusedMessage(s *scope, err error) string {
	return fmt.Sprintf("The API server refused a write for CelldFleet %s/%s: %s; an admission webhook, ValidatingAdmissionPolicy or ResourceQuota in namespace %s must admit the operator's objects",
		s.fleet.Namespace, s.fleet.Name, err.Error(), s.fleet.Namespace)
}

// releaseNamespace stops the cache of a namespace whose last fleet is gone. One fleet is enough
// to keep it, so at most one is read.
func (r *Reconciler) releaseNamespace(ctx context.Context, ns string) {
	if r.Caches == nil {
		return
	}
	list := &v1.CelldFleetList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.Limit(1), client.UnsafeDisableDeepCopy); err == nil && len(list.Items) == 0 {
		r.Caches.Release(ns)
	}
}

// namedPhase is a phase with the name its errors carry.
type namedPhase struct {
	name string
	run  phase
}

// runPhases runs the phases in order until one stops the pass or fails; an error is wrapped
// with the phase's name, so the log and the status say which step failed (the API error stays
// inspectable through errors.As).
func (r *Reconciler) runPhases(ctx context.Context, s *scope, phases []namedPhase) error {
	for _, p := range phases {
		stop, err := p.run(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if stop {
			return nil
		}
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// requeueDelay spreads fleets over the requeue period with a stable per-fleet jitter, so many
// fleets do not wake together.
func (r *Reconciler) requeueDelay(f *v1.CelldFleet) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(f.UID))
	jitter := time.Duration(h.Sum32()%2000) * time.Millisecond
	if r.Options.RequeuePeriod < 2*time.Second {
		jitter /= 10
	}
	return r.Options.RequeuePeriod + jitter
}

// workloadOptions are the builder's options for this operator.
func (r *Reconciler) workloadOptions(s *scope) workload.Options {
	return workload.Options{
		OperatorNamespace:         r.Options.OperatorNamespace,
		OperatorServiceAccount:    r.Options.OperatorServiceAccount,
		NodeLossTolerationSeconds: r.Options.NodeLossTolerationSeconds,
		ReservationName:           s.reservationName,
	}
}
