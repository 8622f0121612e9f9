package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// Scale runs measure the operator at the size the local cluster allows (about 70 pods/s on two
// cores). They are labelled "scale": make test leaves them out, make test-scale runs them, and
// each reports its numbers (docs/performance.md records them).
var _ = Describe("scale", Label("scale"), Serial, func() {
	It("brings 30 three-member PersistentFleets to Ready together, then writes nothing", func(ctx context.Context) {
		const fleets = 30
		var namespaces []string
		start := time.Now()
		for i := range fleets {
			ns := fleetNamespace(ctx, "sc")
			namespaces = append(namespaces, ns)
			Expect(kube().Create(ctx, persistentFleet(ns, fmt.Sprintf("s%d", i), 3))).To(Succeed())
		}
		for i, ns := range namespaces {
			waitFleetReadyWithin(ctx, ns, fmt.Sprintf("s%d", i), 3, 5*time.Minute)
		}
		ready := time.Since(start)
		writes := 0
		for _, ns := range namespaces {
			writes += len(operatorWrites(ns, start))
		}
		report("30 fleets x 3 members: creation to all Ready", ready.Round(100*time.Millisecond))
		report("30 fleets x 3 members: operator writes to Ready", writes)

		for i, ns := range namespaces {
			framework.EventuallyWithin(ctx, framework.Medium, func() string {
				return condition(ctx, ns, fmt.Sprintf("s%d", i), v1.ConditionApplicationConverged)
			}).Should(Equal("True/" + v1.ReasonConverged))
		}
		settled := time.Now()
		Consistently(ctx, func() int {
			n := 0
			for _, ns := range namespaces {
				n += len(operatorWrites(ns, settled))
			}
			return n
		}).WithTimeout(10*time.Second).WithPolling(time.Second).Should(BeZero(), "30 settled fleets must cost no write")
	})

	It("rolls and contracts a 60-member Relaxed fleet one member at a time", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "big")
		const name, members = "big", 60
		f := persistentFleet(ns, name, members)
		f.Spec.Placement.Mode = v1.PlacementRelaxed // six nodes cannot hold sixty members one per node
		start := time.Now()
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReadyWithin(ctx, ns, name, members, 5*time.Minute)
		report("60-member fleet: creation to Ready", time.Since(start).Round(100*time.Millisecond))

		start = time.Now()
		roll := monitorDown(ctx, ns, getFleet(ctx, ns, name), members, 1) // a rollout takes down at most one member
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"scale"}}}`)
		framework.EventuallyWithin(ctx, 10*time.Minute, func(g Gomega) {
			for _, p := range fleetPods(ctx, ns, getFleet(ctx, ns, name)) {
				g.Expect(p.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "scale"))
			}
		}).Should(Succeed())
		waitFleetReadyWithin(ctx, ns, name, members, 5*time.Minute)
		roll.Check("a 60-member rolling restart")
		report("60-member fleet: rolling restart", time.Since(start).Round(100*time.Millisecond))

		start = time.Now()
		survivors := monitorDown(ctx, ns, getFleet(ctx, ns, name), members-5, 0)
		steps := recordSteps(ctx, ns, name)
		scale(ctx, ns, name, members-5)
		waitFleetReadyWithin(ctx, ns, name, members-5, 5*time.Minute)
		report("60-member fleet: scale-in by 5, one step at a time", time.Since(start).Round(100*time.Millisecond))
		got := steps()
		Expect(got).To(HaveLen(5), "a scale-in by 5 is five steps: %+v", got)
		for i, s := range got {
			Expect(s.To).To(Equal(s.From-1), "step %d removes exactly one member: %+v", i, s)
			Expect(s.ObservedBefore && s.ReadyBefore == s.From).To(BeTrue(), "step %d was written before the previous change rolled out: %+v", i, s)
		}
		survivors.Check("a 60-member contraction")
		Expect(claimUIDs(ctx, ns)).To(HaveLen(members), "scale-in keeps every claim")
		expectNoOperatorDeletes(ns, "a rollout and contraction at scale")
	})
})

// waitFleetReadyWithin is waitFleetReady with a deadline sized for scale runs.
func waitFleetReadyWithin(ctx context.Context, ns, name string, n int32, d time.Duration) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, d, func(g Gomega) {
		f := getFleet(ctx, ns, name)
		g.Expect(condition(ctx, ns, name, v1.ConditionReady)).To(Equal("True/" + v1.ReasonProvisioned))
		g.Expect(f.Status.ReadyReplicas).To(Equal(n))
		g.Expect(f.Status.ObservedGeneration).To(Equal(f.Generation))
	}).Should(Succeed())
}

func report(what string, v any) {
	AddReportEntry(what, v)
	GinkgoWriter.Printf("scale: %s: %v\n", what, v)
}
