package fleet

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/drift"
	"github.com/celld/celld-operator/controllers/lifecycle"
	"github.com/celld/celld-operator/controllers/workload"
)

// FieldOwner is the one field manager of every object and status field the reconciler applies.
const FieldOwner = "celld-operator"

// Reconciler drives CelldFleets. Namespaced reads go straight to the API server (Direct):
// the operator may hold a Role in only some namespaces, and a Forbidden read must surface as
// NamespaceAccessDenied for that fleet instead of stalling a cluster-wide cache.
type Reconciler struct {
	// Client reads CelldFleets from the manager's cache and writes everything.
	Client client.Client
	// Direct reads namespaced children and reservations without a cache.
	Direct   client.Client
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
}

// phase is one step of a reconcile. It records what it decided on the scope and says whether
// the pass stops there.
type phase func(ctx context.Context, s *scope) (stop bool, err error)

// Reconcile drives one CelldFleet one step toward its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	f := &v1.CelldFleet{}
	if err := r.Client.Get(ctx, req.NamespacedName, f); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.Namespace, req.Name)
			// The fleet is gone: nothing remembered of it may outlive it.
			r.Drift.Forget(req.NamespacedName)
			if r.Applier != nil {
				r.Applier.Forget(req.NamespacedName)
			}
			if r.Children != nil {
				r.Children.ForgetFleet(req.NamespacedName)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	s := newScope(f, r.now())
	s.result = ctrl.Result{RequeueAfter: r.requeueDelay(f)}

	err := r.runPhases(ctx, s, []phase{
		r.observe, r.deletion, r.validate, r.finalizer, r.guards, r.reservation,
		r.children, r.workload, r.healing,
	})
	if err != nil && apierrors.IsForbidden(err) {
		s.verdict(v1.ReasonNamespaceAccessDenied, fmt.Sprintf(
			"The operator may not manage namespace %s (%s); apply the Role and RoleBinding celld-operator-fleet from config/rbac/fleet_namespace_role.yaml (or add the namespace to the chart's fleetNamespaces) in namespace %s",
			f.Namespace, err.Error(), f.Namespace))
		err = nil
	}
	if err != nil && apierrors.IsConflict(err) {
		// Someone wrote between our read and our write; start again from fresh reads.
		s.result = ctrl.Result{RequeueAfter: time.Second}
		err = nil
	}
	if reportErr := r.report(ctx, s); reportErr != nil && err == nil {
		err = reportErr
	}
	if err != nil {
		return ctrl.Result{}, err // controller-runtime retries with backoff
	}
	return s.result, nil
}

func (r *Reconciler) runPhases(ctx context.Context, s *scope, phases []phase) error {
	for _, p := range phases {
		stop, err := p(ctx, s)
		if err != nil || stop {
			return err
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

// scope is everything one pass read and decided.
type scope struct {
	fleet *v1.CelldFleet // the defaulted fleet; its status is projected at the end
	key   types.NamespacedName
	now   time.Time

	sts    *appsv1.StatefulSet
	deploy *appsv1.Deployment
	pods   []corev1.Pod
	// claims carry the fleet's UID label; namedClaims are every claim of the namespace, for the
	// planner, which refuses a claim at a member's name that is not the fleet's.
	claims      []corev1.PersistentVolumeClaim
	namedClaims []corev1.PersistentVolumeClaim

	// The lifecycle verdict of the pass: one reason and message explain Ready, Progressing
	// and Blocked together (reference §1.19).
	reason, message string
	routing         *metav1.Condition
	meshMixed       bool
	reservationName string
	// heal is the self-healing decision the workload phase's plan made for the healing phase.
	heal   *lifecycle.Decision
	result ctrl.Result
	events []event
}

type event struct {
	kind, reason, message string
	regarding             client.Object
}

func newScope(f *v1.CelldFleet, now time.Time) *scope {
	d := f.DeepCopy()
	d.Default()
	return &scope{fleet: d, key: client.ObjectKeyFromObject(f), now: now}
}

// verdict records the pass's lifecycle reason and message. Whether the reason holds
// provisioning back (Blocked) or reports progress is derived from the reason itself
// (lifecycle.Provisioned), never from which phase set it.
func (s *scope) verdict(reason, message string) {
	s.reason, s.message = reason, message
}

func (s *scope) warn(reason, message string, regarding client.Object) {
	s.events = append(s.events, event{kind: corev1.EventTypeWarning, reason: reason, message: message, regarding: regarding})
}

func (s *scope) isStatefulSet() bool {
	f := s.fleet
	return f.Spec.Profile == v1.ProfilePersistentFleet || f.Spec.BucketWorkload == v1.BucketWorkloadOrdered
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
