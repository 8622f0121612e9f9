package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/nscache"
	"github.com/celld/celld-operator/controllers/reservation"
)

// observe reads the workload, the fleet's Pods and its claims once for the whole pass, from
// the namespace's cache. The cache holds only labelled workloads. One it does not hold is the
// answer to this reconciler's own creation moments ago, if there was one; otherwise the pass
// goes on as if there were none, and the create that follows is the API server's arbitration:
// a workload somebody else created at the fleet's name answers it AlreadyExists and is then
// read and refused (statefulSet, deployment). Only a fleet being deleted asks the API server
// first, since its deletion must not take a workload the cache has not delivered for gone. It
// also reads what the guards check (observeGuards).
func (r *Reconciler) observe(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	s.reservationName = reservation.Name(f.Spec.Storage.Bucket, f.Spec.Storage.Prefix)
	s.read, s.kube = r.Direct, r.Direct
	if r.Caches != nil {
		read, err := r.Caches.Reader(ctx, f.Namespace)
		if err != nil {
			return true, fmt.Errorf("read the children of CelldFleet %s/%s: %w", f.Namespace, f.Name, err)
		}
		s.read, s.kube = read, cachedClient{Client: r.Direct, read: read}
	}
	if err := r.readWorkload(ctx, s, s.read); err != nil {
		return true, err
	}
	switch {
	case s.sts != nil || s.deploy != nil:
		r.created.Seen(layoutKind(s), s.key.Namespace, s.key.Name) // the cache has caught up with a creation
	case r.Caches != nil:
		if err := r.uncachedWorkload(ctx, s); err != nil {
			return true, err
		}
	}
	// A workload of the other layout's kind at the fleet's name is never converted or adopted:
	// the layout is fixed at creation, and a foreign object is left alone.
	var other client.Object
	switch {
	case s.fleet.RunsAsStatefulSet() && s.deploy != nil:
		other = s.deploy
	case !s.fleet.RunsAsStatefulSet() && s.sts != nil:
		other = s.sts
	}
	if other != nil && f.DeletionTimestamp == nil {
		s.find.Block(v1.ReasonLifecycleBlocked, fmt.Sprintf("%s %s/%s exists, but this fleet's layout runs as a %s; a layout is never converted or adopted: delete or rename the %s, or create the fleet under another name",
			kindOf(other), f.Namespace, f.Name, layoutKind(s), kindOf(other)))
		return true, nil
	}
	if err := r.readMembers(ctx, s, s.read, r.Caches != nil); err != nil {
		return true, err
	}
	r.observeGuards(ctx, s)
	return false, nil
}

// readMembers reads the fleet's Pods and, for a PersistentFleet, the claims at its member
// names through c; cached says c is a namespace cache, which indexes claims by fleet name.
func (r *Reconciler) readMembers(ctx context.Context, s *scope, c client.Reader, cached bool) error {
	f := s.fleet
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(f.Namespace), client.MatchingLabels{v1.LabelFleetUID: string(f.UID)}); err != nil {
		return fmt.Errorf("list the Pods of CelldFleet %s/%s: %w", f.Namespace, f.Name, err)
	}
	s.held = nil
	for _, p := range pods.Items {
		if p.Labels[v1.LabelReplacementFleet] != "" || controllerutil.ContainsFinalizer(&p, v1.FinalizerReplacingDisk) {
			s.held = append(s.held, p)
		}
	}
	s.pods = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	slices.SortFunc(s.pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	s.claims, s.namedClaims = nil, nil
	if f.Spec.Profile != v1.ProfilePersistentFleet {
		return nil
	}
	// Every claim at one of the fleet's member names, not only the fleet's: a claim there
	// without the fleet's label must be seen to be refused (StorageIdentityConflict). The
	// namespace's cache indexes claims by the fleet name in theirs, so a pass copies its own
	// fleet's claims, not the namespace's (300 fleets in one namespace: 3, not 900). A fleet
	// being deleted lists them all: it must find every claim that carries its label.
	claims := &corev1.PersistentVolumeClaimList{}
	opts := []client.ListOption{client.InNamespace(f.Namespace)}
	if cached && f.DeletionTimestamp == nil {
		opts = append(opts, client.MatchingFields{nscache.ClaimFleetIndex: f.Name})
	}
	if err := c.List(ctx, claims, opts...); err != nil {
		return fmt.Errorf("list the claims of namespace %s: %w", f.Namespace, err)
	}
	s.namedClaims = claims.Items
	for _, cl := range claims.Items {
		if cl.Labels[v1.LabelFleetUID] == string(f.UID) {
			s.claims = append(s.claims, cl)
		}
	}
	return nil
}

// uncachedWorkload finds the workload the cache does not hold: the answer to this reconciler's
// own creation moments ago, which the cache has not delivered yet, or, for a fleet being
// deleted, whatever the API server has at the fleet's name.
func (r *Reconciler) uncachedWorkload(ctx context.Context, s *scope) error {
	if s.takeWorkload(r.created.Recent(layoutKind(s), s.key.Namespace, s.key.Name, s.fleet.UID, r.now())) {
		return nil
	}
	if s.fleet.DeletionTimestamp == nil {
		return nil
	}
	return r.readWorkload(ctx, s, r.Direct)
}

// takeWorkload makes o the pass's workload when it is a StatefulSet or a Deployment, and says
// whether it was.
func (s *scope) takeWorkload(o client.Object) bool {
	switch o := o.(type) {
	case *appsv1.StatefulSet:
		s.sts = o
	case *appsv1.Deployment:
		s.deploy = o
	default:
		return false
	}
	return true
}

// readWorkload reads the StatefulSet and the Deployment at the fleet's name through c.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope, c client.Reader) error {
	sts, d := &appsv1.StatefulSet{}, &appsv1.Deployment{}
	s.sts, s.deploy = nil, nil
	if err := c.Get(ctx, s.key, sts); err == nil {
		s.sts = sts
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read StatefulSet %s: %w", s.key, err)
	}
	if err := c.Get(ctx, s.key, d); err == nil {
		s.deploy = d
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Deployment %s: %w", s.key, err)
	}
	return nil
}

// cachedClient reads from a namespace's cache and writes to the API server.
type cachedClient struct {
	client.Client
	read client.Reader
}

func (c cachedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.read.Get(ctx, key, obj, opts...)
}

func (c cachedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.read.List(ctx, list, opts...)
}

func layoutKind(s *scope) string {
	if s.fleet.RunsAsStatefulSet() {
		return "StatefulSet"
	}
	return "Deployment"
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
