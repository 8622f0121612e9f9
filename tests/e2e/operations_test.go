package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

var _ = Describe("operations on a running fleet", func() {
	var ns string
	const name = "op"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "ops") })

	It("serves /scale with the replicas and the label selector an HPA reads", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := getFleet(ctx, ns, name)
		scale := &autoscalingv1.Scale{}
		Expect(kube().SubResource("scale").Get(ctx, f, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(3)))
		Expect(scale.Status.Replicas).To(Equal(int32(3)))
		sel, err := klabels.Parse(scale.Status.Selector)
		Expect(err).NotTo(HaveOccurred(), "status.labelSelector %q", scale.Status.Selector)
		pods := &corev1.PodList{}
		Expect(kube().List(ctx, pods, &client.ListOptions{Namespace: ns, LabelSelector: sel})).To(Succeed())
		var selected []string
		for _, p := range pods.Items {
			selected = append(selected, p.Name)
		}
		Expect(selected).To(ConsistOf(name+"-0", name+"-1", name+"-2"), "the /scale selector must select exactly the members")
	})

	It("drains members through the Eviction API one at a time, as the PDB allows", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		before := memberUIDs(ctx, ns, name, 3)
		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)
		refused := 0
		for i := range 3 {
			pod := fmt.Sprintf("%s-%d", name, i)
			// kubectl drain retries a refused eviction; so does this.
			framework.EventuallyWithin(ctx, 2*framework.Medium, func() error {
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
				err := framework.Cluster.Client.CoreV1().Pods(ns).EvictV1(ctx, ev)
				if apierrors.IsTooManyRequests(err) {
					refused++
				}
				return err
			}).WithPolling(500*time.Millisecond).Should(Succeed(), "evict %s", pod)
		}
		// The last eviction has only just been admitted: its member may not exist for a moment,
		// and the fleet's status may not have seen it go yet.
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			for i := range 3 {
				p := framework.Pod(ctx, ns, fmt.Sprintf("%s-%d", name, i))
				g.Expect(p).NotTo(BeNil(), "member %d has no Pod yet", i)
				g.Expect(p.UID).NotTo(Equal(before[i]), "member %d was not evicted", i)
			}
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("a drain through the Eviction API")
		Expect(refused).To(BeNumerically(">", 0), "the PDB never refused an eviction: members were not drained one at a time")
		AddReportEntry("evictions refused by the PDB during the drain", refused)
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "evicted members return on their own disks")
		expectNoOperatorDeletes(ns, "a drain")
	})

	It("restarts every member killed at once on its own disk, replacing nobody", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		claims := claimUIDs(ctx, ns)
		pods := memberUIDs(ctx, ns, name, 3)
		restarts := restartCounts(ctx, ns, name)
		killed := time.Now()
		for i := range 3 {
			Expect(framework.Cluster.Faults.KillMember(ctx, ns, fmt.Sprintf("%s-%d", name, i))).To(Succeed())
		}
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			now := restartCounts(ctx, ns, name)
			for pod, n := range restarts {
				g.Expect(now[pod]).To(BeNumerically(">", n), "%s has not restarted yet", pod)
			}
			g.Expect(membersDown(ctx, ns, name, 3)).To(BeZero())
		}).Should(Succeed())
		AddReportEntry("every member restarted and Ready after being killed at once", time.Since(killed).String())
		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(pods), "killed members restart in their own Pods; none is recreated")
		waitFleetReady(ctx, ns, name, 3)
		Expect(claimUIDs(ctx, ns)).To(Equal(claims), "every member returns on its own disk")
		expectNoOperatorDeletes(ns, "every member killed at once")
	})

	It("stays Provisioning, saying why, when the mesh is requested and no proxy is injected", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{}}}}`) // and no injector runs here
		waiting := func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionProgressing)).To(Equal("True/" + v1.ReasonProvisioning))
			g.Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionProgressing)).To(ContainSubstring("verify Istio injection"))
		}
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			waiting(g)
			pods := livePods(ctx, ns, name)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(p.Labels).To(HaveKeyWithValue(framework.InjectLabel, "true"), "member %s is not on the meshed template yet", p.Name)
				g.Expect(children.HasProxy(&p.Spec)).To(BeFalse(), "member %s has a proxy, but no injector runs", p.Name)
			}
		}).Should(Succeed())
		Consistently(ctx, waiting).WithTimeout(3*time.Second).WithPolling(framework.Poll).Should(Succeed(), "the fleet stopped saying why it waits")
	})

	It("reports Deleting while the fleet is deleted", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		for i := range 3 {
			setKnob(ctx, ns, fmt.Sprintf("%s-%d", name, i), "CELLD_SIM_DRAIN_MS", "8000")
		}
		Expect(condition(ctx, ns, name, v1.ConditionDeleting)).To(Equal("False/" + v1.ReasonNotDeleting))
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(condition(ctx, ns, name, v1.ConditionDeleting)).To(Equal("True/" + v1.ReasonDeleting))
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("False/" + v1.ReasonDeleting))
		}).Should(Succeed())
		framework.EventuallyWithin(ctx, 2*framework.Medium, func() bool {
			return apierrors.IsNotFound(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1.CelldFleet{}))
		}).Should(BeTrue())
	})
})
