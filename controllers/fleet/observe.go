package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/capacity"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/controllers/lifecycle"
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
// also reads the fleet's reservation (and a preview fleet's pool) from the manager's cache, and
// what the guards check (observeGuards).
func (r *Reconciler) observe(ctx context.Context, s *scope) (bool, error) {
	f := s.fleet
	st := &f.Spec.Storage
	s.reservationName = reservation.Name(st.Bucket, st.Prefix)
	// The reservations come from the manager's cache, which costs no request: a new fleet's
	// is not there, and is created, never read while absent.
	s.reserved = r.cachedReservation(ctx, s.reservationName)
	if st.Prefix != "" || st.PreviewFleetRef != nil {
		s.pool = r.cachedReservation(ctx, reservation.Name(st.Bucket, ""))
	}
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
	case s.own != nil || s.other != nil:
		r.created.Seen(layoutOf(f).kind(), s.key.Namespace, s.key.Name) // the cache has caught up with a creation
	case r.Caches != nil:
		if err := r.uncachedWorkload(ctx, s); err != nil {
			return true, err
		}
	}
	// A workload of the other layout's kind at the fleet's name is never converted or adopted:
	// the layout is fixed at creation, and a foreign object is left alone.
	if other := s.other; other != nil && f.DeletionTimestamp == nil {
		s.find.Block(v1.ReasonLifecycleBlocked, fmt.Sprintf("%s %s/%s exists, but this fleet's layout runs as a %s; a layout is never converted or adopted: delete or rename the %s, or create the fleet under another name",
			kindOf(other), f.Namespace, f.Name, layoutOf(f).kind(), kindOf(other)))
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
	if s.takeWorkload(r.created.Recent(layoutOf(s.fleet).kind(), s.key.Namespace, s.key.Name, s.fleet.UID, r.now())) {
		return nil
	}
	if s.fleet.DeletionTimestamp == nil {
		return nil
	}
	return r.readWorkload(ctx, s, r.Direct)
}

// takeWorkload makes o the pass's workload of its kind (the fleet's layout's, or the other's)
// when it is a StatefulSet or a Deployment, and says whether it was.
func (s *scope) takeWorkload(o client.Object) bool {
	l := layoutOfObject(o)
	switch {
	case l == nil:
		return false
	case l == layoutOf(s.fleet):
		s.own = o
	default:
		s.other = o
	}
	return true
}

// readWorkload reads the workload of each kind at the fleet's name through c.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope, c client.Reader) error {
	s.own, s.other = nil, nil
	for _, l := range layouts {
		o := l.empty()
		if err := c.Get(ctx, s.key, o); err == nil {
			s.takeWorkload(o)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read %s %s: %w", l.kind(), s.key, err)
		}
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

// observeGuards reads what the guards check: whether the runtime ServiceAccount exists (from
// the namespace's cache) and, for a PersistentFleet, its StorageClass (from the manager's
// cache). Nothing is read without the NetworkPolicy attestation, which comes first, nor for a
// fleet being deleted. A read that fails is the guards' error, so it ends only a pass that
// reaches them.
func (r *Reconciler) observeGuards(ctx context.Context, s *scope) {
	f := s.fleet
	s.guard = lifecycle.GuardInput{NetworkPolicyEnforced: r.Options.NetworkPolicyEnforced, Namespace: f.Namespace,
		ServiceAccount: f.Spec.ServiceAccountName, Bucket: f.Spec.Storage.Bucket,
		Persistent: f.Spec.Profile == v1.ProfilePersistentFleet, Provisioners: r.Options.StorageProvisioners}
	if !s.guard.NetworkPolicyEnforced || f.DeletionTimestamp != nil {
		return
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := s.read.Get(ctx, types.NamespacedName{Namespace: f.Namespace, Name: f.Spec.ServiceAccountName}, sa)
	s.guard.ServiceAccountExists = err == nil
	if client.IgnoreNotFound(err) != nil {
		s.guardErr = fmt.Errorf("read ServiceAccount %s/%s: %w", f.Namespace, f.Spec.ServiceAccountName, err)
		return
	}
	if !s.guard.Persistent || !s.guard.ServiceAccountExists || f.Spec.Storage.StorageClassName == nil {
		return
	}
	s.guard.StorageClassName = *f.Spec.Storage.StorageClassName
	sc := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: s.guard.StorageClassName}, sc); err == nil {
		s.guard.StorageClass = sc
	} else if !apierrors.IsNotFound(err) {
		s.guardErr = fmt.Errorf("read StorageClass %s: %w", s.guard.StorageClassName, err)
	}
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
			ob.want = layoutOf(f).update(ob.live, ob.desired)
			var err error
			if ob.drifted, err = r.Drift.Check(ctx, r.Direct, s.key, ob.live, ob.want, client.FieldOwner(FieldOwner)); err != nil {
				return in, ob, fmt.Errorf("compare %s %s/%s with its rendering: %w", kindOf(ob.live), f.Namespace, f.Name, err)
			}
		}
	}
	in.Facts = r.facts(s, ob.want != nil && len(ob.drifted) == 0)
	return in, ob, nil
}

// facts turns the pass's observations into the pure planner's input. matches says the live
// workload's spec, other than replicas, is the operator's current rendering (its content
// compared with what the API server stores for the rendering). A StatefulSet fleet's facts
// carry its members, a Deployment fleet's only the Deployment.
func (r *Reconciler) facts(s *scope, matches bool) lifecycle.Facts {
	f := s.fleet
	lf := lifecycle.Facts{
		Now:               s.now,
		ReplacementDelay:  r.Options.MemberReplacementDelay,
		AbsorbWindow:      r.Options.AbsorbWindow,
		TerminationMargin: r.Options.TerminationMargin,
		Paused:            paused(f),
		OrderedBucket:     f.Spec.Profile == v1.ProfileBucket,
		Fleet:             f.Name,
		Declared:          f.DesiredReplicas(),
		Workload:          s.workloadFacts(matches),
	}
	lf.Applied = lf.Workload.Replicas
	if !f.RunsAsStatefulSet() {
		return lf // a Deployment's Pods are no ordinal members: its plan reads the workload alone
	}
	// Every current and declared ordinal has a slot, Pod or not; AddClaim extends the slots
	// to removed members' kept claims.
	lf.Members = make([]lifecycle.Member, max(lf.Workload.Replicas, lf.Declared))
	for i := range s.pods {
		lf.AddPod(&s.pods[i])
	}
	for i := range s.namedClaims {
		lf.AddClaim(&s.namedClaims[i], f.UID)
	}
	return lf
}

// workload is the pass's live workload of the fleet's layout, nil when there is none.
func (s *scope) workload() client.Object { return s.own }

// workloadFacts reads the pass's live workload of the fleet's layout; matches is the drift
// check's verdict.
func (s *scope) workloadFacts(matches bool) lifecycle.Workload {
	return layoutOf(s.fleet).facts(s.own, matches)
}

func paused(f *v1.CelldFleet) bool {
	return f.Spec.Maintenance != nil && f.Spec.Maintenance.Paused
}

// render is the operator's rendering of the fleet's workload, at spec.replicas.
func (r *Reconciler) render(s *scope) client.Object {
	f := s.fleet
	return layoutOf(f).render(f, r.workloadOptions(s), f.DesiredReplicas())
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
		templateMeshed = layoutOf(f).template(w).Labels["sidecar.istio.io/inject"] == "true"
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

// cachedReservation is the reservation at name as the manager's cache holds it, or nil when
// the cache has not seen it (or cannot be read): the caller then asks the API server.
// Reservations are never deleted and their spec never changes, so what the cache holds is
// the reservation's spec; annotations and status may lag, and are written back only with the
// read's resourceVersion.
func (r *Reconciler) cachedReservation(ctx context.Context, name string) *v1.CelldStorageReservation {
	if r.Client == nil {
		return nil
	}
	res := &v1.CelldStorageReservation{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, res); err != nil {
		return nil
	}
	return res
}

// directReservation is the reservation at name as the API server has it; nil when it does not
// exist.
func (r *Reconciler) directReservation(ctx context.Context, name string) (*v1.CelldStorageReservation, error) {
	res := &v1.CelldStorageReservation{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Name: name}, res); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read CelldStorageReservation %s: %w", name, err)
	}
	return res, nil
}

// readHistory decodes the capacity history of the reservation, or forgets an unreadable one
// (it only delays the next step). The record is there only for a fleet with spec.capacity:
// writeRecords removed any other before.
func (r *Reconciler) readHistory(ctx context.Context, s *scope, res *v1.CelldStorageReservation) {
	value, ok := res.Annotations[v1.AnnotationCurrentOperation]
	if !ok || s.fleet.Spec.Capacity == nil {
		return
	}
	s.historyBytes = len(value)
	state := reservation.CapacityState(value, s.fleet.UID)
	if state == nil {
		return
	}
	if err := json.Unmarshal(state, &s.history); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "the reservation's capacity history is unreadable; the policy starts from none", "reservation", res.Name)
		s.history = capacity.History{}
	}
}

// readClaimRecord reads the decision's claim from the API server. It returns nil when that
// claim is gone or another claim now has its name: the pass then decides again.
func (r *Reconciler) readClaimRecord(ctx context.Context, s *scope, ref lifecycle.Ref) (*claimRecord, error) {
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.Direct.Get(ctx, types.NamespacedName{Namespace: s.fleet.Namespace, Name: ref.Name}, claim); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if claim.UID != ref.UID || claim.DeletionTimestamp != nil {
		return nil, nil
	}
	rec := recordClaim(claim)
	return &rec, nil
}

// goneForSure asks the API server, not the cache, whether the workload, the Pods and the
// claims are gone: once the finalizer is released nothing deletes a claim left behind.
func (r *Reconciler) goneForSure(ctx context.Context, s *scope) (bool, error) {
	if r.Caches == nil {
		return true, nil // the pass already read from the API server
	}
	fresh := *s
	if err := r.readWorkload(ctx, &fresh, r.Direct); err != nil {
		return false, err
	}
	if err := r.readMembers(ctx, &fresh, r.Direct, false); err != nil {
		return false, err
	}
	return fresh.own == nil && fresh.other == nil && len(fresh.claims) == 0 && len(fresh.pods) == 0, nil
}
