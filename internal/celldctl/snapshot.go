package celldctl

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// The custom resources the plugin reads and writes.
var (
	fleetsGVR       = v1.GroupVersion.WithResource("celldfleets")
	reservationsGVR = v1.GroupVersion.WithResource("celldstoragereservations")
	previewsGVR     = v1.GroupVersion.WithResource("celldpreviews")
	httpRoutesGVR   = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	authzGVR        = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}
	peerAuthnGVR    = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"}
)

// Clients are the API clients every command uses. Tests substitute fakes.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Problem is something the plugin could not read, and why. Commands report problems instead of
// failing, so a user with the namespace's view role still gets everything they may read.
type Problem struct {
	What string `json:"what"`
	Why  string `json:"why"`
}

// Snapshot is everything status reads about one fleet, read once. BuildStatus is a pure
// function of it.
type Snapshot struct {
	Fleet       *v1.CelldFleet
	StatefulSet *appsv1.StatefulSet
	Deployment  *appsv1.Deployment
	ReplicaSets []appsv1.ReplicaSet
	Pods        []corev1.Pod
	Claims      []corev1.PersistentVolumeClaim
	// Zones maps node names to their topology.kubernetes.io/zone label; a node missing from it
	// could not be read.
	Zones       map[string]string
	Reservation *v1.CelldStorageReservation
	Previews    []v1.CelldPreview
	Events      []Event
	Problems    []Problem

	// The custom resources as the API server returned them, for the support bundle.
	FleetRaw       *unstructured.Unstructured
	ReservationRaw *unstructured.Unstructured
	PreviewsRaw    []unstructured.Unstructured
}

// Event is the part of an events.k8s.io/v1 or core/v1 Event the plugin shows.
type Event struct {
	Type      string      `json:"type"`
	Reason    string      `json:"reason"`
	Regarding string      `json:"regarding"` // Kind/name
	Related   string      `json:"related,omitempty"`
	Note      string      `json:"note"`
	Count     int32       `json:"count,omitempty"`
	Last      metav1.Time `json:"last"`
}

func (s *Snapshot) problem(what string, err error) {
	s.Problems = append(s.Problems, Problem{What: what, Why: explain(err)})
}

// explain turns an API error into a reason a person can act on.
func explain(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden: " + apiMessage(err)
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsUnauthorized(err):
		return "unauthorized: the credentials of the kubeconfig were refused"
	}
	return err.Error()
}

func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return err.Error()
}

// clusterScopedHint is added to a refused cluster-scoped read: the chart's user roles grant
// reservations through the built-in view role, but a RoleBinding only grants namespaced objects.
const clusterScopedHint = " (cluster-scoped: a RoleBinding to the view role does not grant it, a ClusterRoleBinding does)"

// ReadSnapshot reads a fleet and everything its status screen shows. Only get, list and watch
// requests are sent. An error is returned only when the fleet itself cannot be read; any other
// read that fails is recorded in Problems.
func ReadSnapshot(ctx context.Context, c Clients, ns, name string) (*Snapshot, error) {
	u, err := c.Dynamic.Resource(fleetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fleetReadError(ns, name, err)
	}
	f := &v1.CelldFleet{}
	if err := fromUnstructured(u, f); err != nil {
		return nil, fmt.Errorf("decode CelldFleet %s/%s: %w", ns, name, err)
	}
	s := &Snapshot{Fleet: f, FleetRaw: u, Zones: map[string]string{}}
	readWorkload(ctx, c, s)
	readMembers(ctx, c, s)
	readReservation(ctx, c, s)
	readPreviews(ctx, c, s)
	readEvents(ctx, c, s)
	return s, nil
}

func getFleet(ctx context.Context, c Clients, ns, name string) (*v1.CelldFleet, error) {
	u, err := c.Dynamic.Resource(fleetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fleetReadError(ns, name, err)
	}
	f := &v1.CelldFleet{}
	if err := fromUnstructured(u, f); err != nil {
		return nil, fmt.Errorf("decode CelldFleet %s/%s: %w", ns, name, err)
	}
	return f, nil
}

func fleetReadError(ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("CelldFleet %s/%s not found", ns, name)
	}
	return fmt.Errorf("read CelldFleet %s/%s: %s", ns, name, explain(err))
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

func readWorkload(ctx context.Context, c Clients, s *Snapshot) {
	f := s.Fleet
	if f.RunsAsStatefulSet() {
		sts, err := c.Kube.AppsV1().StatefulSets(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			s.StatefulSet = sts
		case apierrors.IsNotFound(err): // not created yet, or deleted: status says so
		default:
			s.problem("StatefulSet "+f.Name, err)
		}
		return
	}
	d, err := c.Kube.AppsV1().Deployments(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		s.Deployment = d
	case apierrors.IsNotFound(err):
	default:
		s.problem("Deployment "+f.Name, err)
	}
	if f.UID == "" {
		return
	}
	rs, err := c.Kube.AppsV1().ReplicaSets(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(f.UID)})
	if err != nil {
		s.problem("ReplicaSets of Deployment "+f.Name, err)
		return
	}
	s.ReplicaSets = rs.Items
}

func readMembers(ctx context.Context, c Clients, s *Snapshot) {
	f := s.Fleet
	selector := v1.LabelFleetUID + "=" + string(f.UID)
	pods, err := c.Kube.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		s.problem("Pods ("+selector+")", err)
	} else {
		s.Pods = pods.Items
		sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Name < s.Pods[j].Name })
	}
	if f.Spec.Profile == v1.ProfilePersistentFleet {
		claims, err := c.Kube.CoreV1().PersistentVolumeClaims(f.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			s.problem("PersistentVolumeClaims", err)
		} else {
			for _, cl := range claims.Items {
				if _, ok := v1.ClaimOrdinal(f.Name, cl.Name); ok {
					s.Claims = append(s.Claims, cl)
				}
			}
		}
	}
	nodes := map[string]bool{}
	for _, p := range s.Pods {
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	var refused error
	for _, n := range names {
		node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) { // one refusal says it for every node
				refused = err
				break
			}
			s.problem("Node "+n, err)
			continue
		}
		s.Zones[n] = node.Labels[corev1.LabelTopologyZone]
	}
	if refused != nil {
		s.Problems = append(s.Problems, Problem{What: "Nodes (members' zones)", Why: explain(refused) + clusterScopedHint})
	}
}

func readReservation(ctx context.Context, c Clients, s *Snapshot) {
	name := s.Fleet.Status.Reservation
	if name == "" {
		return // none recorded yet: status says so
	}
	u, err := c.Dynamic.Resource(reservationsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		why := explain(err)
		if apierrors.IsForbidden(err) {
			why += clusterScopedHint
		}
		s.Problems = append(s.Problems, Problem{What: "CelldStorageReservation " + name, Why: why})
		return
	}
	r := &v1.CelldStorageReservation{}
	if err := fromUnstructured(u, r); err != nil {
		s.problem("CelldStorageReservation "+name, err)
		return
	}
	s.Reservation, s.ReservationRaw = r, u
}

func readPreviews(ctx context.Context, c Clients, s *Snapshot) {
	f := s.Fleet
	if f.Spec.Previews == nil {
		return
	}
	list, err := c.Dynamic.Resource(previewsGVR).Namespace(f.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		s.problem("CelldPreviews", err)
		return
	}
	for i := range list.Items {
		p := v1.CelldPreview{}
		if err := fromUnstructured(&list.Items[i], &p); err != nil {
			s.problem("CelldPreview "+list.Items[i].GetName(), err)
			continue
		}
		if p.Spec.FleetRef.Name == f.Name {
			s.Previews = append(s.Previews, p)
			s.PreviewsRaw = append(s.PreviewsRaw, list.Items[i])
		}
	}
}

// readEvents reads the namespace's events about the fleet and its members and claims:
// events.k8s.io/v1 first (the operator records there), core/v1 when that is refused.
func readEvents(ctx context.Context, c Clients, s *Snapshot) {
	f := s.Fleet
	about := fleetObjectNames(s)
	keep := func(e Event) bool {
		_, a := about[e.Regarding]
		_, b := about[e.Related]
		return a || b
	}
	list, err := c.Kube.EventsV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range list.Items {
			if ev := fromEventsV1(e); keep(ev) {
				s.Events = append(s.Events, ev)
			}
		}
		sortEvents(s.Events)
		return
	}
	core, err2 := c.Kube.CoreV1().Events(f.Namespace).List(ctx, metav1.ListOptions{})
	if err2 != nil {
		s.problem("Events", err)
		return
	}
	for _, e := range core.Items {
		if ev := fromCoreEvent(e); keep(ev) {
			s.Events = append(s.Events, ev)
		}
	}
	sortEvents(s.Events)
}

// fleetObjectNames are the Kind/name keys of the fleet, its workload, its members and claims.
func fleetObjectNames(s *Snapshot) map[string]struct{} {
	f := s.Fleet
	out := map[string]struct{}{
		"CelldFleet/" + f.Name: {}, "StatefulSet/" + f.Name: {}, "Deployment/" + f.Name: {},
	}
	for _, p := range s.Pods {
		out["Pod/"+p.Name] = struct{}{}
	}
	for _, c := range s.Claims {
		out["PersistentVolumeClaim/"+c.Name] = struct{}{}
	}
	for _, rs := range s.ReplicaSets {
		out["ReplicaSet/"+rs.Name] = struct{}{}
	}
	// Members and claims that are gone still have events worth seeing.
	n := max(replicasOf(f), s.Fleet.Status.AppliedReplicas, int32(len(s.Pods)))
	for i := range n {
		out["Pod/"+v1.MemberName(f.Name, i)] = struct{}{}
		out["PersistentVolumeClaim/"+v1.ClaimName(f.Name, i)] = struct{}{}
	}
	return out
}

func replicasOf(f *v1.CelldFleet) int32 {
	if f.Spec.Replicas == nil {
		return v1.DefaultReplicas
	}
	return *f.Spec.Replicas
}

func fromEventsV1(e eventsv1.Event) Event {
	out := Event{
		Type: e.Type, Reason: e.Reason, Note: e.Note,
		Regarding: e.Regarding.Kind + "/" + e.Regarding.Name,
	}
	if e.Related != nil {
		out.Related = e.Related.Kind + "/" + e.Related.Name
	}
	switch {
	case e.Series != nil:
		out.Count = e.Series.Count
		out.Last = metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.EventTime.IsZero():
		out.Last = metav1.NewTime(e.EventTime.Time)
	case !e.DeprecatedLastTimestamp.IsZero():
		out.Last = e.DeprecatedLastTimestamp
		out.Count = e.DeprecatedCount
	default:
		out.Last = e.CreationTimestamp
	}
	return out
}

func fromCoreEvent(e corev1.Event) Event {
	out := Event{
		Type: e.Type, Reason: e.Reason, Note: e.Message, Count: e.Count,
		Regarding: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
	}
	if e.Related != nil {
		out.Related = e.Related.Kind + "/" + e.Related.Name
	}
	switch {
	case e.Series != nil:
		out.Last = metav1.NewTime(e.Series.LastObservedTime.Time)
	case !e.LastTimestamp.IsZero():
		out.Last = e.LastTimestamp
	case !e.EventTime.IsZero():
		out.Last = metav1.NewTime(e.EventTime.Time)
	default:
		out.Last = e.CreationTimestamp
	}
	return out
}

// sortEvents orders events oldest first, ties by reason and note so output is stable.
func sortEvents(ev []Event) {
	sort.SliceStable(ev, func(i, j int) bool {
		if !ev[i].Last.Equal(&ev[j].Last) {
			return ev[i].Last.Before(&ev[j].Last)
		}
		if ev[i].Reason != ev[j].Reason {
			return ev[i].Reason < ev[j].Reason
		}
		return strings.Compare(ev[i].Note, ev[j].Note) < 0
	})
}
