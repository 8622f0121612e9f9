package e2e

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// Bucket fleets (seeds/000, 002): every acknowledged write is in the bucket, disks are caches.
var _ = Describe("Bucket fleets", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "bk") })

	deployment := func(ctx context.Context, name string) *appsv1.Deployment {
		GinkgoHelper()
		d := &appsv1.Deployment{}
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d)).To(Succeed())
		return d
	}

	It("runs the Deployment layout across three zones, rolls one member at a time and contracts one step at a time", func(ctx context.Context) {
		const name = "bd"
		Expect(kube().Create(ctx, bucketFleet(ns, name, 5, v1.BucketWorkloadDeployment))).To(Succeed())
		waitFleetReady(ctx, ns, name, 5)
		d := deployment(ctx, name)
		Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(Equal(1))
		Expect(d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(0))
		Expect(envOf(d.Spec.Template.Spec.Containers[0], "CELLD_DURABILITY")).To(Equal("bucket"))
		Expect(claimUIDs(ctx, ns)).To(BeEmpty(), "a Bucket fleet has no claims")
		zones := map[string]bool{}
		for _, p := range fleetPods(ctx, ns, getFleet(ctx, ns, name)) {
			zones[framework.NodeZone(ctx, p.Spec.NodeName)] = true
		}
		Expect(zones).To(HaveLen(3))

		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 5, 1) // maxUnavailable 1, maxSurge 0
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"r1"}}}`)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			for _, p := range fleetPods(ctx, ns, getFleet(ctx, ns, name)) {
				g.Expect(p.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "r1"))
			}
			g.Expect(fleetPods(ctx, ns, getFleet(ctx, ns, name))).To(HaveLen(5))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 5)
		mon.Check("a Bucket Deployment rollout")

		By("contracting by two members goes one step at a time, each after the previous rolled out")
		steps := recordReplicas(ctx, ns, name, true)
		mon = monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 0) // never fewer than the target serving
		scale(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() int32 { return *deployment(ctx, name).Spec.Replicas }).Should(Equal(int32(3)))
		waitFleetReady(ctx, ns, name, 3)
		Expect(steps()).To(Equal([]int32{5, 4, 3}), "the Deployment's replicas must step 5, 4, 3, never jump")
		mon.Check("a two-step contraction")
		expectNoOperatorDeletes(ns, "a Bucket rollout and contraction")
	})

	It("runs the Ordered layout with zones assigned by ordinal and removes the highest ordinal first", func(ctx context.Context) {
		const name = "bo"
		f := bucketFleet(ns, name, 4, v1.BucketWorkloadOrdered)
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 4)
		zones := f.Spec.Placement.Zones
		for i := range 4 {
			p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
			Expect(p.Spec.SchedulingGates).To(BeEmpty(), "the zone gate is released")
			Expect(framework.NodeZone(ctx, p.Spec.NodeName)).To(Equal(zones[i%len(zones)]), "member %d runs in zones[%d mod %d]", i, i, len(zones))
		}
		sts := statefulSetOf(ctx, ns, name)
		Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty())
		Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))

		scale(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, framework.Medium, func() *corev1.Pod { return framework.Pod(ctx, ns, name+"-3") }).Should(BeNil())
		waitFleetReady(ctx, ns, name, 3)
		expectNoOperatorDeletes(ns, "an Ordered contraction")
	})

	It("never adopts a workload somebody else created at its name, nor converts one of the other layout", func(ctx context.Context) {
		foreignTemplate := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "example.invalid/x"}}}}
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}

		By("an unlabelled StatefulSet at the name, which no cache of the fleet's objects holds: found by the create, refused, untouched")
		const taken = "bt"
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: taken},
			Spec: appsv1.StatefulSetSpec{Replicas: new(int32(0)), Selector: selector, Template: foreignTemplate}}
		Expect(kube().Create(ctx, sts)).To(Succeed())
		Expect(kube().Create(ctx, bucketFleet(ns, taken, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(condition(ctx, ns, taken, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonLifecycleBlocked))
			g.Expect(conditionMessage(getFleet(ctx, ns, taken), v1.ConditionBlocked)).To(ContainSubstring("StatefulSet %s/%s", ns, taken))
		}).Should(Succeed())
		got := statefulSetOf(ctx, ns, taken)
		Expect(got.Generation).To(Equal(sts.Generation), "the foreign StatefulSet's spec is untouched")
		Expect(got.Labels).NotTo(HaveKey(v1.LabelFleetUID), "the foreign StatefulSet is not adopted")

		By("a Deployment another fleet of the same name left: the layout is never converted")
		const name = "bx"
		left := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1.LabelFleetUID: "an-earlier-fleet"}},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32(0)), Selector: selector, Template: foreignTemplate},
		}
		Expect(kube().Create(ctx, left)).To(Succeed())
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonLifecycleBlocked))
			g.Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)).To(ContainSubstring("runs as a StatefulSet"))
		}).Should(Succeed())
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.StatefulSet{})).NotTo(Succeed(), "no StatefulSet beside the other layout's Deployment")
		d := deployment(ctx, name)
		Expect(d.Generation).To(Equal(left.Generation), "the Deployment's spec is untouched")
		Expect(d.Labels).To(HaveKeyWithValue(v1.LabelFleetUID, "an-earlier-fleet"), "the Deployment is not adopted")
	})

	It("deletes the workload and the finalizer; the reservation stays", func(ctx context.Context) {
		const name = "bdel"
		f := bucketFleet(ns, name, 3, v1.BucketWorkloadDeployment)
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() error {
			return kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1.CelldFleet{})
		}).Should(MatchError(ContainSubstring("not found")))
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.Deployment{})).NotTo(Succeed())
		Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(f.Spec.Storage.Bucket, "")}, &v1.CelldStorageReservation{})).To(Succeed())
	})
})

// Zone and node faults change the whole cluster, so these specs run alone.
var _ = Describe("Bucket Ordered fleets on lost zones and nodes", Serial, func() {
	It("keeps an Ordered member's zone while its zone is cordoned, and places it there once uncordoned", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "bz")
		const name = "oz"
		f := bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered)
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		zone := f.Spec.Placement.Zones[1]
		Expect(framework.Cluster.Faults.CordonZone(ctx, zone)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed()) })
		Expect(kube().Delete(ctx, framework.Pod(ctx, ns, name+"-1"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, name+"-1")
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("topology.kubernetes.io/zone", zone))
			g.Expect(framework.Condition(p, corev1.PodScheduled).Reason).To(Equal(corev1.PodReasonUnschedulable))
		}).Should(Succeed())
		Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(framework.NodeZone(ctx, framework.Pod(ctx, ns, name+"-1").Spec.NodeName)).To(Equal(zone))
	})

	It("force-deletes an Ordered member stuck terminating on a lost node (MemberForceDeleted)", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "bn")
		const name = "on"
		Expect(kube().Create(ctx, bucketFleet(ns, name, 3, v1.BucketWorkloadOrdered))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		node := framework.Pod(ctx, ns, name+"-2").Spec.NodeName
		old := podUID(ctx, ns, name+"-2")
		Expect(framework.Cluster.Faults.FailNode(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.RecoverNode(ctx, node)).To(Succeed()) })
		framework.EventuallyWithin(ctx, framework.NodeLoss+framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, name+"-2")
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.UID).NotTo(Equal(old))
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		expectEvent(ctx, ns, v1.EventMemberForceDeleted)
	})
})

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// fleetPods lists the fleet's non-terminating Pods.
func fleetPods(ctx context.Context, ns string, f *v1.CelldFleet) []corev1.Pod {
	GinkgoHelper()
	list := &corev1.PodList{}
	Expect(kube().List(ctx, list, client.InNamespace(ns), client.MatchingLabels{v1.LabelFleetUID: string(f.UID)})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}
