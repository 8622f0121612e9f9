package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/preview"
	"github.com/celld/celld-operator/controllers/reservation"
	"github.com/celld/celld-operator/tests/e2e/framework"
	"github.com/celld/celld-operator/tests/seedexecutor"
)

// Preview seeding on the local cluster (issue 14, item 5): the request recorded on the child's
// reservation, the child starting nothing until the test executor (tests/seedexecutor) reports
// success there, a failed seed blocking the child for good, and deletion cancelling a seed: by
// the operator when no executor claimed it, by the executor's acknowledgement when one runs
// it, and SeedCancellationBlocked while a running executor does not answer.
var _ = Describe("Previews", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "seed") })

	It("seeds a preview through its executor: nothing starts before the seed succeeded, a failed seed blocks, deletion cancels a seed", func(ctx context.Context) {
		mon := watchPreviewSafety(ctx, ns)
		executor := "e2e-" + ns
		parent := previewParentWith(ctx, ns, "dev", func(f *v1.CelldFleet) string {
			return fmt.Sprintf(`,"seeding":{"executor":%q,"sources":[{"name":"production","fleetRef":{"namespace":%q,"name":%q,"uid":%q}}]}`,
				executor, f.Namespace, f.Name, f.UID)
		})
		bucket := parent.Spec.Previews.Storage.Bucket
		seed := func(ids ...string) *v1.PreviewSeed {
			s := &v1.PreviewSeed{Source: "production"}
			for _, id := range ids {
				s.Objects = append(s.Objects, v1.SeedObject{Class: "Cart", ID: id})
			}
			return s
		}
		reservationOf := func(p *v1.CelldPreview) *v1.CelldStorageReservation {
			GinkgoHelper()
			res := &v1.CelldStorageReservation{}
			Expect(kube().Get(ctx, types.NamespacedName{Name: reservation.Name(bucket, preview.FleetName(p))}, res)).To(Succeed())
			return res
		}
		awaitState := func(name, want string) {
			GinkgoHelper()
			framework.EventuallyWithin(ctx, 2*framework.Medium, func() string { return previewState(ctx, ns, name) }).Should(Equal(want))
		}
		awaitRunning := func(p *v1.CelldPreview) {
			GinkgoHelper()
			framework.EventuallyWithin(ctx, framework.Medium, func() v1.SeedPhase {
				if s := reservationOf(p).Status.Seed; s != nil {
					return s.Phase
				}
				return ""
			}).Should(Equal(v1.SeedRunning), "the executor claims the seed")
		}
		initializing := string(v1.PreviewInitializing) + "/" + v1.ReasonSeedInitializing
		expectGone := func(name string) {
			GinkgoHelper()
			framework.EventuallyWithin(ctx, 2*framework.Medium, func() error { return kube().Get(ctx, key(ns, name), &v1.CelldPreview{}) }).
				Should(MatchError(ContainSubstring("not found")))
		}

		By("without an executor, a seeded preview's fleet and reservation exist with the request, and nothing else does")
		seeded := createPreview(ctx, ns, "seeded", "dev", 0, seed("c-1", "c-2"))
		unclaimed := createPreview(ctx, ns, "unclaimed", "dev", 0, seed("c-3"))
		awaitState("seeded", initializing)
		awaitState("unclaimed", initializing)
		child := getFleet(ctx, ns, preview.FleetName(seeded))
		Expect(child.Spec.Storage.Seed).NotTo(BeNil())
		Expect(child.Spec.Storage.Seed.Executor).To(Equal(executor))
		Expect(child.Spec.Storage.Seed.SourceFleet.UID).To(Equal(string(parent.UID)))
		res := reservationOf(seeded)
		Expect(res.Spec.Seed).To(Equal(child.Spec.Storage.Seed), "the request is recorded on the child's reservation")
		Expect(res.Spec.FleetUID).To(Equal(string(child.UID)))
		Expect(res.Status.Seed).To(BeNil())
		Expect(condition(ctx, ns, child.Name, v1.ConditionReady)).To(Equal("False/" + v1.ReasonSeedInitializing))
		Expect(condition(ctx, ns, child.Name, v1.ConditionBlocked)).To(Equal("False/"+v1.ReasonSeedInitializing), "waiting for a seed is not blocked")
		Consistently(ctx, func(g Gomega) {
			for _, p := range []*v1.CelldPreview{seeded, unclaimed} {
				f := getFleet(ctx, ns, preview.FleetName(p))
				for _, obj := range []string{f.Name, f.Name + "-routing"} {
					g.Expect(object(ctx, gvrIngress, ns, obj)).To(BeNil(), "no route before the seed")
				}
				expectNoResourcesFor(ctx, g, ns, f.Name, f.UID)
			}
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("deleting a preview whose seed nobody claimed: the operator records it Canceled, closes the gate and releases the fleet")
		Expect(reservationOf(unclaimed).Status.Seed).To(BeNil(), "no executor runs yet")
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "unclaimed"))).To(Succeed())
		expectGone("unclaimed")
		unclaimedRes := reservationOf(unclaimed)
		Expect(unclaimedRes.Status.Seed).NotTo(BeNil())
		Expect(unclaimedRes.Status.Seed.Phase).To(Equal(v1.SeedCanceled))
		Expect(unclaimedRes.Status.Seed.ExecutorID).To(BeEmpty())
		Expect(unclaimedRes.Annotations).To(HaveKeyWithValue(v1.AnnotationSeedGate, v1.SeedGateClosed))

		By("the executor runs: the seed succeeds, the gate opens and the preview becomes Ready")
		runCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		exec := &seedexecutor.Executor{Client: kube(), Name: executor, Worker: executor + "-0", Period: 200 * time.Millisecond,
			Log: func(format string, args ...any) { GinkgoWriter.Printf(format+"\n", args...) }}
		go exec.Run(runCtx)
		awaitPreviewReady(ctx, ns, "seeded")
		res = reservationOf(seeded)
		Expect(res.Status.Seed.Phase).To(Equal(v1.SeedSucceeded))
		Expect(res.Status.Seed.ExecutorID).To(Equal(executor + "-0"))
		Expect(res.Status.Seed.Objects).To(HaveLen(2))
		Expect(res.Annotations).To(HaveKeyWithValue(v1.AnnotationSeedGate, v1.SeedGateOpen))
		waitFleetReady(ctx, ns, child.Name, 1)

		By("a failed seed blocks its fleet for good (SeedReservationBlocked) and starts nothing")
		broken := createPreview(ctx, ns, "broken", "dev", 0, seed("fail-1"))
		awaitState("broken", string(v1.PreviewBlocked)+"/"+v1.ReasonFleetBlocked)
		Expect(conditionOfPreview(getPreview(ctx, ns, "broken")).Message).To(And(ContainSubstring(v1.ReasonSeedReservationBlocked), ContainSubstring("never retried")))
		brokenFleet := getFleet(ctx, ns, preview.FleetName(broken))
		Expect(condition(ctx, ns, brokenFleet.Name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonSeedReservationBlocked))
		Expect(reservationOf(broken).Status.Seed.Phase).To(Equal(v1.SeedFailed))
		Consistently(ctx, func(g Gomega) { expectNoResourcesFor(ctx, g, ns, brokenFleet.Name, brokenFleet.UID) }).
			WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("deleting a preview whose seed runs: the operator asks, the executor acknowledges, the fleet is released")
		held := createPreview(ctx, ns, "held", "dev", 0, seed("hold-1"))
		awaitState("held", initializing)
		awaitRunning(held)
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "held"))).To(Succeed())
		expectGone("held")
		heldRes := reservationOf(held)
		Expect(heldRes.Status.Seed.Phase).To(Equal(v1.SeedCanceled))
		Expect(heldRes.Status.Seed.CancelRequestedAt).NotTo(BeNil())
		Expect(heldRes.Annotations).To(HaveKeyWithValue(v1.AnnotationSeedGate, v1.SeedGateClosed))

		By("a running seed whose executor never answers holds deletion (SeedCancellationBlocked) until an administrator records it Failed")
		stuck := createPreview(ctx, ns, "stuck", "dev", 0, seed("stuck-1"))
		awaitState("stuck", initializing)
		stuckFleet := preview.FleetName(stuck)
		awaitRunning(stuck)
		Expect(kube().Delete(ctx, getPreview(ctx, ns, "stuck"))).To(Succeed())
		expectCondition(ctx, ns, stuckFleet, v1.ConditionBlocked, "True/"+v1.ReasonSeedCancellationBlocked)
		Expect(conditionMessage(getFleet(ctx, ns, stuckFleet), v1.ConditionBlocked)).To(And(ContainSubstring(executor+"-0"), ContainSubstring("record the seed Failed")))
		Expect(previewState(ctx, ns, "stuck")).To(Equal(string(v1.PreviewDeleting) + "/" + v1.ReasonPreviewDeleting))
		framework.EventuallyWithin(ctx, framework.Short, func() error {
			r := reservationOf(stuck)
			r.Status.Seed.Phase, r.Status.Seed.Message = v1.SeedFailed, "executor gone; recorded by the administrator"
			return kube().Status().Update(ctx, r)
		}).Should(Succeed())
		expectGone("stuck")
		Expect(reservationOf(stuck).Annotations).To(HaveKeyWithValue(v1.AnnotationSeedGate, v1.SeedGateClosed))

		Expect(previewState(ctx, ns, "seeded")).To(Equal(string(v1.PreviewReady)+"/"+v1.ReasonPreviewReady), "the seeded preview is untouched")
		mon.Check("preview seeding")
		expectDeletesByPreviewRules(ns, mon)
	})
})
