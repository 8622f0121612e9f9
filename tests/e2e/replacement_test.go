package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/celldsim"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The members the replacement rule exists for: one that keeps exiting on a revision the other
// members run Ready (its trouble is its own, its disk say), and one Pending in a zone with no
// room for it. Both stop running, and on Kubernetes 1.37 the unused-since controller then
// writes their claim's status: the replacement's claim delete met that write in 3 runs of 5,
// and the member came back on its old disk after MemberReplaced was told. Every spec here arms
// the suite's hook that writes the claim's status between the replacement's Pod delete and its
// claim delete, so the race is met on every run.
var _ = Describe("replacing a member that cannot come back", func() {
	const name = "rp"
	member := func(i int) string { return fmt.Sprintf("%s-%d", name, i) }
	claim := func(i int) string { return "data-" + member(i) }

	It("gives a member crash-looping on a revision the others run Ready a fresh claim after the replacement delay, not before", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "rp-crash")
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		recreateOnAgedDisk(ctx, ns, name, member(2))
		before := claimUIDs(ctx, ns)
		monitor := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)
		armClaimStatusWrite(ns)

		By("the member's celld exits at every start, on the revision the other two run Ready")
		Expect(framework.Cluster.Faults.SetKnob(ctx, ns, member(2), celldsim.KnobCrashAfterMS, "0")).To(Succeed())
		Expect(framework.Cluster.Faults.KillMember(ctx, ns, member(2))).To(Succeed())
		downSince := notReadySince(ctx, ns, member(2))
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, member(2))
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 2), "the member must keep exiting")
		}).Should(Succeed())

		expectFreshClaimAfterDelay(ctx, ns, claim(2), before, downSince)
		waitFleetReady(ctx, ns, name, 3)
		expectEvent(ctx, ns, v1.EventMemberReplaced)
		expectClaimStatusWritten(ns)
		expectOnlyClaimDeletes(ns, claim(2))
		Expect(eventReasons(ctx, ns)).NotTo(ContainElement(v1.EventReplacementAbandoned), "a status write must not cancel the replacement")
		after := claimUIDs(ctx, ns)
		Expect(after[claim(0)]).To(Equal(before[claim(0)]), "other members keep their disks")
		Expect(after[claim(1)]).To(Equal(before[claim(1)]), "other members keep their disks")
		monitor.Check("the replacement of a crash-looping member")
	})

	// Serial: cordoning a zone changes where every spec's members may go.
	It("gives a member Pending in a zone with no room a fresh claim in another zone after the replacement delay, not before", Serial, func(ctx context.Context) {
		ns := fleetNamespace(ctx, "rp-zone")
		f := persistentFleet(ns, name, 3)
		// Relaxed: a strict spread counts the cordoned zone through minDomains and would keep the
		// fresh member Pending too; the replacement itself is the same in both modes.
		f.Spec.Placement.Mode = v1.PlacementRelaxed
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		recreateOnAgedDisk(ctx, ns, name, member(2))
		before := claimUIDs(ctx, ns)
		monitor := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)
		armClaimStatusWrite(ns)

		By("the member's zone has no room left, and its Pod is evicted (a drain, say)")
		zone := framework.NodeZone(ctx, framework.Pod(ctx, ns, member(2)).Spec.NodeName)
		Expect(framework.Cluster.Faults.CordonZone(ctx, zone)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(framework.Cluster.Faults.UncordonZone(ctx, zone)).To(Succeed()) })
		old := podUID(ctx, ns, member(2))
		Expect(kube().Delete(ctx, framework.Pod(ctx, ns, member(2)))).To(Succeed())
		var downSince time.Time
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, member(2))
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.UID).NotTo(Equal(old))
			g.Expect(framework.Condition(p, corev1.PodScheduled).Reason).To(Equal(corev1.PodReasonUnschedulable), "the member must be Pending for want of room")
			downSince = p.CreationTimestamp.Time
		}).Should(Succeed())

		expectFreshClaimAfterDelay(ctx, ns, claim(2), before, downSince)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			p := framework.Pod(ctx, ns, member(2))
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
			g.Expect(framework.NodeZone(ctx, p.Spec.NodeName)).NotTo(Equal(zone), "the fresh disk is placed where there is room")
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		expectEvent(ctx, ns, v1.EventMemberReplaced)
		expectClaimStatusWritten(ns)
		expectOnlyClaimDeletes(ns, claim(2))
		monitor.Check("the replacement of a member stranded in a full zone")
	})
})

// recreateOnAgedDisk waits until the fleet's claims are more than a minute old and recreates
// the member's Pod by hand: a member on a disk made for its current Pod is never replaced (a
// fresh disk would not help it), so a replacement needs a Pod younger than its claim. It
// returns once every member of the three is Ready again (the fleet may report a blocker).
func recreateOnAgedDisk(ctx context.Context, ns, name, member string) {
	GinkgoHelper()
	created := getFleet(ctx, ns, name).CreationTimestamp.Time
	framework.EventuallyWithin(ctx, 2*time.Minute, func() bool { return time.Since(created) > 65*time.Second }).Should(BeTrue())
	old := podUID(ctx, ns, member)
	Expect(kube().Delete(ctx, framework.Pod(ctx, ns, member))).To(Succeed())
	framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
		p := framework.Pod(ctx, ns, member)
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.UID).NotTo(Equal(old))
		g.Expect(framework.IsReady(p)).To(BeTrue())
		g.Expect(membersDown(ctx, ns, name, 3)).To(BeZero())
	}).Should(Succeed())
}

// notReadySince waits for the member to turn not Ready and returns when it did, as its Ready
// condition says (the time the replacement delay counts from).
func notReadySince(ctx context.Context, ns, member string) time.Time {
	GinkgoHelper()
	var since time.Time
	framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
		p := framework.Pod(ctx, ns, member)
		g.Expect(p).NotTo(BeNil())
		c := framework.Condition(p, corev1.PodReady)
		g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
		since = c.LastTransitionTime.Time
	}).Should(Succeed())
	return since
}

// expectFreshClaimAfterDelay checks that the claim keeps its UID until the replacement delay
// has passed since downSince, then gets a new one (the member's fresh disk), and that the
// operator's first delete came no earlier than the delay.
func expectFreshClaimAfterDelay(ctx context.Context, ns, claim string, before map[string]types.UID, downSince time.Time) {
	GinkgoHelper()
	delay := e2eOptions.MemberReplacementDelay
	By(fmt.Sprintf("the member keeps its disk until %s after it went down", delay))
	if hold := time.Until(downSince.Add(delay - 2*time.Second)); hold > 0 {
		Consistently(ctx, func() types.UID { return claimUIDs(ctx, ns)[claim] }).
			WithTimeout(hold).WithPolling(framework.Poll).Should(Equal(before[claim]), "the member was replaced before the delay")
	}
	By("then it returns on a fresh claim")
	framework.EventuallyWithin(ctx, delay+e2eOptions.AbsorbWindow+2*framework.Medium, func(g Gomega) {
		uid, ok := claimUIDs(ctx, ns)[claim]
		g.Expect(ok).To(BeTrue(), "the member's fresh claim")
		g.Expect(uid).NotTo(Equal(before[claim]), "the member must return on a fresh claim, not its old one")
	}).Should(Succeed())
	var first *deleteRecord
	for _, d := range operatorDeletes(ns) {
		if d.Name == claim || "data-"+d.Name == claim { // the member's Pod or its claim
			first = &d
			break
		}
	}
	Expect(first).NotTo(BeNil(), "the operator deleted neither the member's Pod nor its claim")
	// The Ready condition's time has a resolution of a second.
	Expect(first.At).To(BeTemporally(">=", downSince.Add(delay-time.Second)), "the operator acted before the replacement delay")
}

// armClaimStatusWrite asks the operator's test hook to write the replaced claim's status
// between the replacement's Pod delete and its claim delete (writeClaimStatusIfArmed).
func armClaimStatusWrite(ns string) {
	GinkgoHelper()
	Expect(os.WriteFile(filepath.Join(artifactsDir(), "claim-status-"+ns), nil, 0o644)).To(Succeed())
}

// expectClaimStatusWritten: the hook ran and its write succeeded, so the spec met the race.
func expectClaimStatusWritten(ns string) {
	GinkgoHelper()
	_, err := os.Stat(filepath.Join(artifactsDir(), "claim-status-"+ns))
	Expect(os.IsNotExist(err)).To(BeTrue(), "the claim's status was never written at the replacement's Pod delete: the spec did not meet the race")
	failed, err := os.ReadFile(filepath.Join(artifactsDir(), "claim-status-failed-"+ns))
	Expect(os.IsNotExist(err)).To(BeTrue(), "the claim's status write failed: %s", failed)
}
