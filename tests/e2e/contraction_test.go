package e2e

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/tests/e2e/framework"
)

// A contraction of several members, in make test (the 60-member one is a scale run): each
// step removes one member, the highest, and is written only once the previous change rolled
// out; the survivors are never down (a continuous monitor), and every removed member keeps its
// claim.
var _ = Describe("contraction", func() {
	It("removes one member per step, each after the previous change rolled out, keeping every claim", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "contract")
		const name = "ct"
		Expect(kube().Create(ctx, persistentFleet(ns, name, 5))).To(Succeed())
		waitFleetReady(ctx, ns, name, 5)
		claims := claimUIDs(ctx, ns)
		Expect(claims).To(HaveLen(5))

		survivors := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 0) // the three that stay never go down
		steps := recordSteps(ctx, ns, name)
		scale(ctx, ns, name, 3)
		waitFleetReady(ctx, ns, name, 3)

		got := steps()
		Expect(got).To(HaveLen(2), "5 to 3 is two steps: %+v", got)
		for i, s := range got {
			Expect(s.To).To(Equal(s.From-1), "step %d removes exactly one member: %+v", i, s)
			Expect(s.From).To(Equal(int32(5-i)), "the steps go 5, 4, 3: %+v", got)
			Expect(s.ObservedBefore).To(BeTrue(), "step %d was written before the StatefulSet observed the previous change: %+v", i, s)
			Expect(s.ReadyBefore).To(Equal(s.From), "step %d was written before the previous change rolled out (%d of %d Ready): %+v", i, s.ReadyBefore, s.From, s)
		}
		survivors.Check("a contraction from 5 to 3")
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every removed member keeps its claim")
		for _, i := range []int{3, 4} {
			Expect(framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))).To(BeNil(), "the highest ordinals go")
		}
		expectNoOperatorDeletes(ns, "a contraction")
	})
})

// replicaStep is one change of a StatefulSet's spec.replicas, with the status the StatefulSet
// showed when the change was written: whether it had observed the previous spec, and how many
// members were Ready.
type replicaStep struct {
	From, To       int32
	ObservedBefore bool
	ReadyBefore    int32
}

// recordSteps follows the fleet's StatefulSet through a watch from now on and returns a func
// giving every change of spec.replicas with the status it was written over. The event of a
// replica write carries the status as it was just before it (status is written by the
// StatefulSet controller afterwards), so each step says what the operator acted on.
func recordSteps(ctx context.Context, ns, name string) func() []replicaStep {
	GinkgoHelper()
	var mu sync.Mutex
	var steps []replicaStep
	sets := framework.Cluster.Client.AppsV1().StatefulSets(ns)
	current, err := sets.Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	last := *current.Spec.Replicas
	w, err := sets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: current.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			sts, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok || sts.Spec.Replicas == nil || *sts.Spec.Replicas == last {
				continue
			}
			mu.Lock()
			steps = append(steps, replicaStep{From: last, To: *sts.Spec.Replicas,
				ObservedBefore: sts.Status.ObservedGeneration == sts.Generation-1, ReadyBefore: sts.Status.ReadyReplicas})
			last = *sts.Spec.Replicas
			mu.Unlock()
		}
	}()
	return func() []replicaStep {
		mu.Lock()
		defer mu.Unlock()
		return append([]replicaStep(nil), steps...)
	}
}
