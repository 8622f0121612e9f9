package e2e

import (
	"context"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/controllers/workload"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// launcherGate is the scheduling gate v0.0.5's launcher held members with until it had proven
// their disk exclusive (reference-operator.md §1.26).
const launcherGate = "celld.eric.dev/exclusive-volume"

// Upgrading from v0.0.5 (seed 001 "Upgrading from earlier releases"). The fleet's objects are
// built as v0.0.5 left them: an OnDelete StatefulSet whose template carries the launcher's
// gate, one member still held by it (down), the strict executor's operation in flight on the
// reservation, and the conditions that release wrote. The operator then takes the fleet over.
var _ = Describe("upgrade from v0.0.5", func() {
	It("adopts a strict-executor fleet with a member down: every Pod replaced one at a time on its disk, no claim deleted, Ready", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "upgrade")
		const name = "up"
		By("the fleet as v0.0.5 left it")
		f := persistentFleet(ns, name, 3)
		f.Spec.Maintenance = &v1.MaintenanceSpec{Paused: true} // the operator leaves it alone until the old objects exist
		Expect(kube().Create(ctx, f)).To(Succeed())
		f = getFleet(ctx, ns, name)
		d := f.DeepCopy()
		d.Default()
		sts := workload.StatefulSet(d, workload.Options{ReservationName: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix),
			NodeLossTolerationSeconds: e2eOptions.NodeLossTolerationSeconds}, 3)
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		sts.Spec.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: launcherGate}}
		if sts.Spec.Template.Annotations == nil {
			sts.Spec.Template.Annotations = map[string]string{}
		}
		sts.Spec.Template.Annotations["celld.eric.dev/launcher"] = "v0.0.5"
		Expect(kube().Create(ctx, sts, client.FieldOwner("celld-operator-v0.0.5"))).To(Succeed())
		// The launcher let members 0 and 1 start; member 2's disk was retired, so it stays held.
		for i := range 2 {
			member := fmt.Sprintf("%s-%d", name, i)
			framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
				p := &corev1.Pod{}
				g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: member}, p)).To(Succeed())
				p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == launcherGate })
				g.Expect(kube().Update(ctx, p)).To(Succeed())
			}).Should(Succeed())
		}
		framework.EventuallyWithin(ctx, framework.Medium, func() int32 { return statefulSetOf(ctx, ns, name).Status.ReadyReplicas }).Should(Equal(int32(2)))
		Expect(framework.Pod(ctx, ns, name+"-2").Spec.SchedulingGates).NotTo(BeEmpty(), "member 2 is held by the launcher")
		// The operator writes both objects too (the tuning record, the paused fleet's status):
		// each write is made on a fresh read until it does not conflict.
		res := &v1.CelldStorageReservation{}
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(d.Spec.Storage.Bucket, d.Spec.Storage.Prefix)}, res)).To(Succeed())
			if res.Annotations == nil {
				res.Annotations = map[string]string{}
			}
			res.Annotations[v1.AnnotationCurrentOperation] = `{"operation":{"kind":"Replace","id":"op-60","phase":"AwaitingEvidence","member":"up-2"},"claims":{"data-up-2":"retired"},"disruptions":{"up-2":"2026-11-01T00:00:00Z"}}`
			g.Expect(kube().Update(ctx, res)).To(Succeed())
		}).Should(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			live := getFleet(ctx, ns, name)
			for _, c := range []string{"LifecycleBlocked", "ProductionQualified", "DiskCleanupPending"} {
				live.Status.Conditions = append(live.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Earlier", Message: "written by v0.0.5", LastTransitionTime: metav1.Now()})
			}
			g.Expect(kube().Status().Update(ctx, live)).To(Succeed())
		}).Should(Succeed())
		claims := claimUIDs(ctx, ns)
		Expect(claims).To(HaveLen(3))

		By("the operator takes over: RollingUpdate, highest ordinal first, one member down at a time")
		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("the upgrade from v0.0.5")
		after := statefulSetOf(ctx, ns, name)
		Expect(after.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
		for i := range 3 {
			p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
			Expect(p.Spec.SchedulingGates).To(BeEmpty(), "%s still carries the launcher gate", p.Name)
			Expect(p.Annotations).NotTo(HaveKey("celld.eric.dev/launcher"), "%s was not replaced", p.Name)
		}
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member keeps its disk")
		// The rollout itself deletes nothing; a member stuck on a node another spec failed may be
		// force-deleted by self-healing, which keeps its disk. No claim is ever deleted.
		for _, d := range operatorDeletes(ns) {
			Expect(d.Kind).To(Equal("Pod"), "the upgrade deleted claim %s", d.Name)
			Expect(d.Force).To(BeTrue(), "the upgrade deleted Pod %s: the StatefulSet alone replaces members", d.Name)
		}

		By("the earlier release's records are gone, its operation reported superseded")
		expectEvent(ctx, ns, v1.EventOperationSuperseded)
		Expect(kube().Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
		Expect(res.Annotations).NotTo(HaveKey(v1.AnnotationCurrentOperation))
		for _, c := range getFleet(ctx, ns, name).Status.Conditions {
			Expect([]string{"LifecycleBlocked", "ProductionQualified", "DiskCleanupPending"}).NotTo(ContainElement(c.Type))
		}
	})
})
