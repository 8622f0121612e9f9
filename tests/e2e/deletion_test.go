package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

var _ = Describe("deletion keeps isolation until the members are gone", func() {
	var ns string
	const name = "dl"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "del") })

	DescribeTable("under every cascade a user or GitOps tool may choose",
		func(ctx context.Context, propagation metav1.DeletionPropagation) {
			f := persistentFleet(ns, name, 3)
			f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 10, TerminationGraceSeconds: 20}
			Expect(kube().Create(ctx, f)).To(Succeed())
			waitFleetReady(ctx, ns, name, 3)
			// Members drain for a while, as loaded ones do: long enough for the garbage collector
			// to act on a foreground cascade before the last member is gone.
			for i := range 3 {
				setKnob(ctx, ns, fmt.Sprintf("%s-%d", name, i), "CELLD_SIM_DRAIN_MS", "8000")
			}
			f = getFleet(ctx, ns, name)
			waitGarbageCollectorKnowsFleets(ctx, ns)
			mon := monitorIsolation(ctx, ns, f)

			Expect(kube().Delete(ctx, f, client.PropagationPolicy(propagation))).To(Succeed())
			framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
				err := kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1.CelldFleet{})
				g.Expect(client.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "the fleet is gone once its members, disks and children are")
			}).Should(Succeed())
			mon.Check(string(propagation))

			owned := client.MatchingLabels{v1.LabelFleetUID: string(f.UID)}
			for _, list := range []client.ObjectList{&corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.ServiceList{},
				&networkingv1.NetworkPolicyList{}, &policyv1.PodDisruptionBudgetList{}} {
				Expect(kube().List(ctx, list, client.InNamespace(ns), owned)).To(Succeed())
				Expect(metaItems(list)).To(BeEmpty(), "%T: the operator left something behind after releasing the fleet", list)
			}
			res := &v1.CelldStorageReservation{}
			Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}, res)).To(Succeed(), "the bucket reservation is permanent")
		},
		Entry("foreground", metav1.DeletePropagationForeground),
		Entry("background", metav1.DeletePropagationBackground),
		Entry("orphan", metav1.DeletePropagationOrphan),
	)
})

// waitGarbageCollectorKnowsFleets waits until the garbage collector resolves CelldFleet owner
// references: it learns a CRD's kind only at its next discovery sync (every 30 s), and a spec
// that deletes a fleet before that would not see what a cascade does. A ConfigMap owned by a
// fleet that does not exist is collected once the kind is known.
func waitGarbageCollectorKnowsFleets(ctx context.Context, ns string) {
	GinkgoHelper()
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gc-canary", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet", Name: "no-such-fleet", UID: "00000000-0000-0000-0000-000000000000"}}}}
	Expect(kube().Create(ctx, canary)).To(Succeed())
	framework.EventuallyWithin(ctx, 2*framework.Medium, func() bool {
		return apierrors.IsNotFound(kube().Get(ctx, client.ObjectKeyFromObject(canary), &corev1.ConfigMap{}))
	}).Should(BeTrue(), "the garbage collector never collected a ConfigMap owned by a missing CelldFleet")
}

func metaItems(list client.ObjectList) []string {
	GinkgoHelper()
	items, err := meta.ExtractList(list)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, it := range items {
		o := it.(client.Object)
		out = append(out, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	return out
}

// isolationMonitor follows a fleet's member Pods, its NetworkPolicy and its PDB through watches
// and records the first moment a member Pod existed while the policy or the PDB did not (or
// was being deleted): peer isolation or disruption protection opened before the last member
// was gone.
type isolationMonitor struct {
	mu        sync.Mutex
	pods      map[string]bool
	policy    bool
	pdb       bool
	violation string
	events    int
}

func monitorIsolation(ctx context.Context, ns string, f *v1.CelldFleet) *isolationMonitor {
	GinkgoHelper()
	m := &isolationMonitor{pods: map[string]bool{}, policy: true, pdb: true}
	cs := framework.Cluster.Client
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(f.UID)})
	Expect(err).NotTo(HaveOccurred())
	for _, p := range pods.Items {
		m.pods[p.Name] = true
	}
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + f.Name}
	np, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, byName)
	Expect(err).NotTo(HaveOccurred())
	Expect(np.Items).To(HaveLen(1))
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, byName)
	Expect(err).NotTo(HaveOccurred())
	Expect(pdb.Items).To(HaveLen(1))
	follow := func(start func() (watch.Interface, error), apply func(watch.Event)) {
		w, err := start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				m.mu.Lock()
				m.events++
				apply(ev)
				m.judge(ev)
				m.mu.Unlock()
			}
		}()
	}
	follow(func() (watch.Interface, error) {
		return cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID + "=" + string(f.UID), ResourceVersion: pods.ResourceVersion})
	}, func(ev watch.Event) {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			m.pods[p.Name] = ev.Type != watch.Deleted
		}
	})
	present := func(ev watch.Event) bool {
		o, ok := ev.Object.(metav1.Object)
		return ev.Type != watch.Deleted && (!ok || o.GetDeletionTimestamp() == nil)
	}
	follow(func() (watch.Interface, error) {
		return cs.NetworkingV1().NetworkPolicies(ns).Watch(ctx, metav1.ListOptions{FieldSelector: byName.FieldSelector, ResourceVersion: np.ResourceVersion})
	}, func(ev watch.Event) { m.policy = present(ev) })
	follow(func() (watch.Interface, error) {
		return cs.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: byName.FieldSelector, ResourceVersion: pdb.ResourceVersion})
	}, func(ev watch.Event) { m.pdb = present(ev) })
	return m
}

// judge records the first state with a member Pod but no policy or PDB. Caller holds mu.
func (m *isolationMonitor) judge(ev watch.Event) {
	if m.violation != "" || (m.policy && m.pdb) {
		return
	}
	for pod, alive := range m.pods {
		if alive {
			m.violation = fmt.Sprintf("at %s (after %s %T) member Pod %s existed while NetworkPolicy present=%v and PDB present=%v",
				time.Now().Format(time.RFC3339Nano), ev.Type, ev.Object, pod, m.policy, m.pdb)
			return
		}
	}
}

func (m *isolationMonitor) Check(cascade string) {
	GinkgoHelper()
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.violation).To(BeEmpty(), "isolation during a %s deletion", cascade)
	Expect(m.events).To(BeNumerically(">", 0), "the monitor saw nothing during a %s deletion", cascade)
	Expect(m.policy || m.pdb).To(BeFalse(), "the NetworkPolicy and PDB must be gone once the fleet is (policy %v, PDB %v)", m.policy, m.pdb)
}
