package e2e

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// A blocker holds provisioning back; it never switches off the healing of members that already
// run on their own disks (docs/lifecycle.md, "What a blocker stops, and what goes on"). Each
// spec blocks a Ready fleet for a reason unrelated to its members, breaks a member, and checks
// that the member is healed while the fleet still reports the blocker, and that nothing else
// was written to the workload.
var _ = Describe("healing under an unrelated blocker", func() {
	var ns string
	const name = "bh"
	member := func(i int) string { return fmt.Sprintf("%s-%d", name, i) }
	claim := func(i int) string { return "data-" + member(i) }

	BeforeEach(func(ctx context.Context) {
		ns = fleetNamespace(ctx, "bh")
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
	})

	// The fleet is raised to 4 while blocked, so its growth is held at the applied 3: the
	// healing plan and its confirmation once planned at different counts there, disagreed, and
	// no member was ever healed (a lost disk stayed Lost, a member stayed down past the delay).
	It("replaces a lost disk and a member down past the replacement delay while growth is held by InfrastructureBlocked (applied 3, spec 4)", func(ctx context.Context) {
		By("a hand edit takes the fleet's PodDisruptionBudget away from it, and the fleet is raised to 4")
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pdb)).To(Succeed())
		delete(pdb.Labels, v1.LabelFleetUID)
		Expect(kube().Update(ctx, pdb)).To(Succeed())
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "True/"+v1.ReasonInfrastructureBlocked)
		scale(ctx, ns, name, 4)
		framework.EventuallyWithin(ctx, framework.Short, func() int64 { return getFleet(ctx, ns, name).Status.ObservedGeneration }).
			Should(Equal(getFleet(ctx, ns, name).Generation), "the operator must have seen the raise")
		sts := statefulSetOf(ctx, ns, name)
		Expect(*sts.Spec.Replicas).To(Equal(int32(3)), "growth is held by the blocker")
		monitor := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)

		By("a member loses its volume and gets a fresh disk, the blocker notwithstanding")
		before := claimUIDs(ctx, ns)
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, claim(1))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			now := claimUIDs(ctx, ns)
			g.Expect(now).To(HaveKey(claim(1)))
			g.Expect(now[claim(1)]).NotTo(Equal(before[claim(1)]), "member 1 must get a fresh disk")
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/"+v1.ReasonInfrastructureBlocked), "the blocker is still reported")
		}).Should(Succeed())
		expectEvent(ctx, ns, v1.EventMemberDiskLost)
		expectOnlyClaimDeletes(ns, claim(1))
		framework.EventuallyWithin(ctx, framework.Medium, func() int32 { return statefulSetOf(ctx, ns, name).Status.ReadyReplicas }).Should(Equal(int32(3)))

		By("a member stays down past the replacement delay and gets a fresh disk, the blocker notwithstanding")
		recreateOnAgedDisk(ctx, ns, name, member(2))
		before = claimUIDs(ctx, ns)
		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(2), true)).To(Succeed())
		downSince := notReadySince(ctx, ns, member(2))
		expectFreshClaimAfterDelay(ctx, ns, claim(2), before, downSince)
		expectEvent(ctx, ns, v1.EventMemberReplaced)
		framework.EventuallyWithin(ctx, framework.Medium, func() int32 { return statefulSetOf(ctx, ns, name).Status.ReadyReplicas }).Should(Equal(int32(3)))
		Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/"+v1.ReasonInfrastructureBlocked), "the blocker is still reported")
		after := statefulSetOf(ctx, ns, name)
		Expect(after.Generation).To(Equal(sts.Generation), "a blocked fleet's StatefulSet spec is not written")
		Expect(*after.Spec.Replicas).To(Equal(int32(3)), "growth stays held")
		monitor.Check("healing under a blocker that holds growth")

		By("the foreign object goes, and the fleet grows to 4 on its own")
		Expect(kube().Delete(ctx, pdb)).To(Succeed())
		waitFleetReady(ctx, ns, name, 4)
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "False/"+v1.ReasonProvisioned)
	})

	// Serial: failing a node evicts every Pod on it, the members of specs running alongside
	// included (a parallel creation spec once saw its member force-deleted).
	It("force-deletes a member stuck on a lost node while a foreign claim refuses growth (StorageIdentityConflict)", Serial, func(ctx context.Context) {
		By("growth is refused onto a claim that is not the fleet's")
		foreign := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim(3)},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceGi(1)}}},
		}
		Expect(kube().Create(ctx, foreign)).To(Succeed())
		scale(ctx, ns, name, 4)
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "True/"+v1.ReasonStorageIdentityConflict)
		sts := statefulSetOf(ctx, ns, name)

		By("a member's node fails; its Pod is force-deleted and returns on its own disk")
		before := claimUIDs(ctx, ns)
		node := framework.Pod(ctx, ns, member(1)).Spec.NodeName
		Expect(framework.Cluster.Faults.FailNode(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.RecoverNode(ctx, node)).To(Succeed()) })
		old := podUID(ctx, ns, member(1))
		framework.EventuallyWithin(ctx, framework.NodeLoss+framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, member(1))
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.UID).NotTo(Equal(old), "the stuck Pod must be force-deleted and recreated")
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
			g.Expect(p.Spec.NodeName).NotTo(Equal(node))
		}).Should(Succeed())
		expectEvent(ctx, ns, v1.EventMemberForceDeleted)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(statefulSetOf(ctx, ns, name).Status.ReadyReplicas).To(Equal(int32(3)))
		}).Should(Succeed())
		Expect(claimUIDs(ctx, ns)).To(Equal(before), "the member returns on its own disk")
		Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/"+v1.ReasonStorageIdentityConflict), "the blocker is still reported")
		after := statefulSetOf(ctx, ns, name)
		Expect(after.Generation).To(Equal(sts.Generation), "a blocked fleet's StatefulSet spec is not written")
		Expect(*after.Spec.Replicas).To(Equal(int32(3)), "no member is added onto the foreign claim")
		for _, d := range operatorDeletes(ns) {
			Expect(d.Kind).To(Equal("Pod"), "a force-delete deletes no claim")
			Expect(d.Force).To(BeTrue())
		}
	})
})
