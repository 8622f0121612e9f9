package application

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/workload"
)

// member is what the inventory records of one Pod: every field whose change during sampling
// could make a reading describe something other than the Pod it is attributed to.
type member struct {
	name, uid, identity, ip string
	ready, deleting         bool
	owners                  string // controller and owner references, canonical
	started                 time.Time
	// cpuRequest (millicores) and memoryRequest (MiB) are the celld container's requests, for
	// the capacity policy's survivor check.
	cpuRequest, memoryRequest int64
}

// workloadFacts are the workload fields whose change during sampling means a rollout or a
// scale began.
type workloadFacts struct {
	uid        types.UID
	generation int64
	replicas   int32
}

// inventory is one membership read: the workload and the fleet's current Pods in name order.
// verdict is set when membership cannot be observed (WorkloadUnavailable,
// MembershipUnavailable), and detail says why, for the log.
type inventory struct {
	workload        workloadFacts
	members         []member
	verdict, detail string
}

// sameAs reports whether two inventories describe the same membership.
func (a inventory) sameAs(b inventory) bool {
	return a.verdict == b.verdict && a.workload == b.workload &&
		slices.EqualFunc(a.members, b.members, func(x, y member) bool {
			return x.name == y.name && x.uid == y.uid && x.identity == y.identity && x.ip == y.ip &&
				x.ready == y.ready && x.deleting == y.deleting && x.owners == y.owners && x.started.Equal(y.started) &&
				x.cpuRequest == y.cpuRequest && x.memoryRequest == y.memoryRequest
		})
}

// takeInventory reads the fleet's workload and Pods from the API server. f must be defaulted.
// An error is a failed read; a workload or Pod set that cannot be trusted is a verdict.
func takeInventory(ctx context.Context, c client.Reader, f *v1.CelldFleet) (inventory, error) {
	var inv inventory
	key := client.ObjectKeyFromObject(f)
	var wl client.Object
	var replicas *int32
	if f.RunsAsStatefulSet() {
		sts := &appsv1.StatefulSet{}
		wl = sts
		if err := c.Get(ctx, key, sts); err != nil {
			return notFound(err, f, "StatefulSet")
		}
		replicas = sts.Spec.Replicas
	} else {
		d := &appsv1.Deployment{}
		wl = d
		if err := c.Get(ctx, key, d); err != nil {
			return notFound(err, f, "Deployment")
		}
		replicas = d.Spec.Replicas
	}
	// the reconciler's ownership rule (v1.CelldFleet.Owns), so a workload somebody else created
	// under the fleet's name is never observed as the fleet
	if !f.Owns(wl) || wl.GetDeletionTimestamp() != nil {
		inv.verdict = v1.ReasonWorkloadUnavailable
		inv.detail = fmt.Sprintf("workload %s is deleting or does not belong to the fleet", key)
		return inv, nil
	}
	inv.workload = workloadFacts{uid: wl.GetUID(), generation: wl.GetGeneration(), replicas: 1}
	if replicas != nil {
		inv.workload.replicas = *replicas
	}

	selector := client.MatchingLabels{v1.LabelFleetUID: string(f.UID)}
	controllers := map[types.UID]bool{wl.GetUID(): f.RunsAsStatefulSet()}
	if !f.RunsAsStatefulSet() {
		// a Deployment's Pods are controlled by its ReplicaSets, which carry the template labels
		sets := &appsv1.ReplicaSetList{}
		if err := c.List(ctx, sets, client.InNamespace(f.Namespace), selector); err != nil {
			return inv, fmt.Errorf("list ReplicaSets of %s: %w", key, err)
		}
		for _, rs := range sets.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == wl.GetUID() {
				controllers[rs.UID] = true
			}
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(f.Namespace), selector); err != nil {
		return inv, fmt.Errorf("list Pods of %s: %w", key, err)
	}
	items := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if len(items) > MaxMembers {
		inv.verdict = v1.ReasonMembershipUnavailable
		inv.detail = fmt.Sprintf("%d Pods carry the fleet label, more than %d", len(items), MaxMembers)
		return inv, nil
	}
	slices.SortFunc(items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range items {
		p := &items[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil || !controllers[ref.UID] || ref.Kind != controllerKind(f) {
			inv.verdict = v1.ReasonMembershipUnavailable
			inv.detail = fmt.Sprintf("Pod %s/%s carries the fleet label but is not controlled by the fleet's workload", p.Namespace, p.Name)
			inv.members = nil
			return inv, nil
		}
		inv.members = append(inv.members, memberOf(p))
	}
	return inv, nil
}

func notFound(err error, f *v1.CelldFleet, kind string) (inventory, error) {
	if apierrors.IsNotFound(err) {
		return inventory{verdict: v1.ReasonWorkloadUnavailable, detail: kind + " " + f.Name + " does not exist"}, nil
	}
	return inventory{}, fmt.Errorf("get %s %s/%s: %w", kind, f.Namespace, f.Name, err)
}

func controllerKind(f *v1.CelldFleet) string {
	if f.RunsAsStatefulSet() {
		return "StatefulSet"
	}
	return "ReplicaSet"
}

// memberOf records a Pod. The identity names the container incarnation: a restart keeps the
// Pod UID and IP but changes the container ID, the restart count and the start time (compared
// too, in sameAs). A running container without an ID still has an identity: kubelets always
// set one, but fake kubelets (kwok in the local cluster) do not, and the restart count and
// start time alone already tell incarnations apart.
func memberOf(p *corev1.Pod) member {
	m := member{name: p.Name, uid: string(p.UID), ip: p.Status.PodIP, deleting: p.DeletionTimestamp != nil}
	m.cpuRequest, m.memoryRequest = requests(p)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			m.ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == workload.ContainerName && cs.State.Running != nil {
			m.identity = fmt.Sprintf("%s/%s/%d", p.UID, cs.ContainerID, cs.RestartCount)
			m.started = cs.State.Running.StartedAt.Time
		}
	}
	var owners []string
	for _, o := range p.OwnerReferences {
		owners = append(owners, fmt.Sprintf("%s/%s/%s/%t", o.Kind, o.Name, o.UID, o.Controller != nil && *o.Controller))
	}
	m.owners = strings.Join(owners, ",")
	return m
}
