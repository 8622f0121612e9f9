package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// Self-healing, row by row of the seed's table (seeds/001 "Self-healing"), with the operator's
// windows shortened: replacement delay 20 s, absorb window 8 s, termination margin 5 s.
var _ = Describe("self-healing", func() {
	var ns string
	const name = "sh"
	member := func(i int) string { return fmt.Sprintf("%s-%d", name, i) }
	claim := func(i int) string { return "data-" + member(i) }

	BeforeEach(func(ctx context.Context) {
		ns = fleetNamespace(ctx, "sh")
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
	})

	It("replaces a member whose volume no longer exists on a fresh disk (MemberDiskLost)", func(ctx context.Context) {
		before := claimUIDs(ctx, ns)
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, claim(1))).To(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			now := claimUIDs(ctx, ns)
			g.Expect(now).To(HaveKey(claim(1)))
			g.Expect(now[claim(1)]).NotTo(Equal(before[claim(1)]), "member 1 must get a fresh disk")
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		after := claimUIDs(ctx, ns)
		Expect(after[claim(0)]).To(Equal(before[claim(0)]), "other members keep their disks")
		Expect(after[claim(2)]).To(Equal(before[claim(2)]), "other members keep their disks")
		expectEvent(ctx, ns, v1.EventMemberDiskLost)
		expectOnlyClaimDeletes(ns, claim(1))
	})

	It("leaves two members that are down alone, and both return on their own disks", func(ctx context.Context) {
		before := claimUIDs(ctx, ns)
		for _, i := range []int{1, 2} {
			Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(i), true)).To(Succeed())
		}
		framework.EventuallyWithin(ctx, framework.Short, func() int { return membersDown(ctx, ns, name, 3) }).Should(Equal(2))
		// Past the replacement delay and the absorb window, nobody is replaced.
		Consistently(ctx, func() []deleteRecord { return operatorDeletes(ns) }).
			WithTimeout(e2eOptions.MemberReplacementDelay+e2eOptions.AbsorbWindow+5*time.Second).WithPolling(time.Second).
			Should(BeEmpty(), "a member was replaced while another member was down")
		for _, i := range []int{1, 2} {
			Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(i), false)).To(Succeed())
		}
		waitFleetReady(ctx, ns, name, 3)
		Expect(claimUIDs(ctx, ns)).To(Equal(before))
	})

	It("replaces the one member down past the replacement delay while the rest is ready (MemberReplaced)", func(ctx context.Context) {
		// A disk made for the member's current Pod is never replaced (a fresh disk would not
		// help), so first let the claims age past a minute and roll every member once.
		created := getFleet(ctx, ns, name).CreationTimestamp.Time
		framework.EventuallyWithin(ctx, 2*time.Minute, func() bool { return time.Since(created) > 65*time.Second }).Should(BeTrue())
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"age"}}}`)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, member(0)) // absent for a moment while it is recreated
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "age"))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		before := claimUIDs(ctx, ns)

		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(2), true)).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionReady)).To(
				ContainSubstring("member %s is down; it is replaced on a fresh disk at", member(2)))
		}).Should(Succeed())
		framework.EventuallyWithin(ctx, e2eOptions.MemberReplacementDelay+e2eOptions.AbsorbWindow+framework.Medium, func(g Gomega) {
			g.Expect(claimUIDs(ctx, ns)[claim(2)]).NotTo(Equal(before[claim(2)]))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		expectEvent(ctx, ns, v1.EventMemberReplaced)
		expectOnlyClaimDeletes(ns, claim(2))
	})

	It("finishes or aborts a replacement the operator crashed in, and never deletes a second claim", func(ctx context.Context) {
		before := claimUIDs(ctx, ns)
		victim := podUID(ctx, ns, member(0))
		marker := filepath.Join(artifactsDir(), "crash-"+ns)
		Expect(os.WriteFile(marker, nil, 0o644)).To(Succeed())
		Expect(framework.Cluster.Faults.LoseVolume(ctx, ns, claim(0))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func() bool {
			_, err := os.Stat(marker)
			return os.IsNotExist(err)
		}).Should(BeTrue(), "the replacement must reach the crash point")
		// Finished: the member runs as a new Pod on a new claim. A deleted claim alone is not
		// enough, the victim (held) may still be terminating then.
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			uid := claimUIDs(ctx, ns)[claim(0)]
			g.Expect(uid).NotTo(BeEmpty(), "the member's claim is recreated")
			g.Expect(uid).NotTo(Equal(before[claim(0)]))
			g.Expect(podUID(ctx, ns, member(0))).NotTo(BeElementOf(victim, types.UID("")), "the member returns as a new Pod")
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		p := framework.Pod(ctx, ns, member(0))
		Expect(p.Finalizers).NotTo(ContainElement(v1.FinalizerReplacingDisk), "the hold is released")
		expectOnlyClaimDeletes(ns, claim(0))
	})
})

// Node and zone faults change the whole cluster, so these specs run alone.
var _ = Describe("self-healing on lost nodes and zones", Serial, func() {
	var ns string
	const name = "nl"
	member := func(i int) string { return fmt.Sprintf("%s-%d", name, i) }

	BeforeEach(func(ctx context.Context) {
		ns = fleetNamespace(ctx, "nl")
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
	})

	It("force-deletes a member stuck terminating on a lost node, and the member keeps its disk (MemberForceDeleted)", func(ctx context.Context) {
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
		waitFleetReady(ctx, ns, name, 3)
		Expect(claimUIDs(ctx, ns)).To(Equal(before), "the member returns on its own disk")
		expectEvent(ctx, ns, v1.EventMemberForceDeleted)
		for _, d := range operatorDeletes(ns) {
			Expect(d.Kind).To(Equal("Pod"), "a force-delete deletes no claim")
			Expect(d.Force).To(BeTrue())
		}
	})

	It("reports a member the scheduler cannot place as Blocked MemberUnschedulable while another member is down", func(ctx context.Context) {
		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(1), true)).To(Succeed())
		zone := framework.NodeZone(ctx, framework.Pod(ctx, ns, member(2)).Spec.NodeName)
		Expect(framework.Cluster.Faults.CordonZone(ctx, zone)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed()) })
		Expect(kube().Delete(ctx, framework.Pod(ctx, ns, member(2)))).To(Succeed()) // a drain, say
		deleted := time.Now()
		// The scheduler's reason shows at once, long before the member blocks the fleet.
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionProgressing)).
				To(ContainSubstring("the scheduler has found no node for member %s", member(2)))
		}).Should(Succeed())
		Expect(time.Since(deleted)).To(BeNumerically("<", e2eOptions.MemberReplacementDelay), "the scheduler's reason came only with the replacement delay")
		framework.EventuallyWithin(ctx, e2eOptions.MemberReplacementDelay+framework.Medium, func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonMemberUnschedulable))
			msg := conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)
			g.Expect(msg).To(ContainSubstring("Member %s has not been scheduled since", member(2)))
			g.Expect(msg).To(ContainSubstring("it is not replaced while member %s is also down", member(1)))
		}).Should(Succeed())
		Expect(operatorDeletes(ns)).To(BeEmpty(), "nothing is replaced while two members are down")

		Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed())
		Expect(framework.Cluster.Faults.Unhealthy(ctx, ns, member(1), false)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(HavePrefix("False/"))
	})
})

// expectOnlyClaimDeletes: the operator deleted exactly the one claim it replaced, once, and
// only Pods besides.
func expectOnlyClaimDeletes(ns, claim string) {
	GinkgoHelper()
	var claims []string
	for _, d := range operatorDeletes(ns) {
		if d.Kind == "PersistentVolumeClaim" {
			claims = append(claims, d.Name)
		}
	}
	Expect(claims).To(Equal([]string{claim}), "the operator must delete exactly one claim, %s", claim)
}
