package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

var _ = Describe("crash-looping members", func() {
	var ns string
	const name = "cl"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "crash") })

	It("leaves a member that keeps exiting on a new template on its disk, and recreates it from the reverted spec", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		goodEnv, err := json.Marshal(getFleet(ctx, ns, name).Spec.Env)
		Expect(err).NotTo(HaveOccurred())

		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)

		By("a value celld refuses at start rolls to the highest member, which keeps exiting")
		patchFleet(ctx, ns, name, `{"spec":{"env":[{"name":"CELLD_LTX_PAGED","value":"yes"}]}}`)
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			f := getFleet(ctx, ns, name)
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonMemberCrashLooping))
			g.Expect(conditionMessage(f, v1.ConditionBlocked)).To(And(ContainSubstring("Member "+name+"-2"), ContainSubstring("keeps exiting with code 1")))
		}).Should(Succeed())

		By("past the replacement delay and the absorb window it is still on its own disk, and never two members are down")
		hold := e2eOptions.MemberReplacementDelay + e2eOptions.AbsorbWindow + 5*time.Second
		Consistently(ctx, func(g Gomega) {
			g.Expect(membersDown(ctx, ns, name, 3)).To(BeNumerically("<=", 1), "two members were down at once")
			g.Expect(claimUIDs(ctx, ns)).To(Equal(claims), "a crash-looping member was given a fresh disk")
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/"+v1.ReasonMemberCrashLooping), "the fleet stopped saying why")
		}).WithTimeout(hold).WithPolling(framework.Poll).Should(Succeed())
		Expect(operatorDeletes(ns)).To(BeEmpty(), "the operator deleted a Pod or claim of a crash-looping member")
		// The wait proves something only if the member aged past the delay: its Ready condition
		// keeps the time it turned not Ready through every restart, as the kubelet keeps it.
		since := framework.Condition(framework.Pod(ctx, ns, name+"-2"), corev1.PodReady).LastTransitionTime.Time
		Expect(time.Since(since)).To(BeNumerically(">", e2eOptions.MemberReplacementDelay),
			"the member must have been down longer than the replacement delay (down since %s)", since)

		By("the spec is reverted: the member is recreated from it without anyone deleting a Pod by hand")
		patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"env":%s}}`, goodEnv))
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			if down := membersDown(ctx, ns, name, 3); down > 1 {
				StopTrying(fmt.Sprintf("%d members were down at once while the member was recreated", down)).Now()
			}
			g.Expect(condition(ctx, ns, name, v1.ConditionReady)).To(Equal("True/" + v1.ReasonProvisioned))
		}).Should(Succeed())
		mon.Check("a crash loop and its recovery")
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member keeps its disk")
		// With Parallel pod management the StatefulSet controller itself deletes the highest
		// member left on a stale revision; the operator's rule (MemberRecreated) covers the
		// StatefulSets it does not (OnDelete, OrderedReady). Whoever acts, only that Pod goes.
		deletes := operatorDeletes(ns)
		Expect(len(deletes)).To(BeNumerically("<=", 1), "the operator deleted more than the stuck member's Pod: %+v", deletes)
		for _, d := range deletes {
			Expect(d.Kind).To(Equal("Pod"), "the operator deleted a claim: %+v", d)
			Expect(d.Name).To(Equal(name+"-2"), "the operator deleted another member's Pod: %+v", d)
			Expect(d.Force).To(BeFalse())
		}
		AddReportEntry("stuck member recreated by", map[bool]string{true: "the operator", false: "the StatefulSet controller"}[len(deletes) == 1])
	})
})
