package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// driftBound is how soon a widened NetworkPolicy must be back: a few of the e2e operator's
// one-second passes, with room for a loaded machine. The measured times are reported.
const driftBound = 10 * time.Second

var _ = Describe("drift repair", func() {
	var ns string
	const name = "df"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "drift") })

	It("restores a NetworkPolicy widened inside an existing rule, restarting no member", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := getFleet(ctx, ns, name)
		members := memberUIDs(ctx, ns, name, 3)
		restarts := restartCounts(ctx, ns, name)

		for _, edit := range []struct {
			what  string
			apply func(np *networkingv1.NetworkPolicy)
		}{
			{"namespaceSelector {} beside the fleet peer's podSelector (8081 from every namespace)", func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
			}},
			{"endPort 65535 on the 8080 port (8080-65535 open)", func(np *networkingv1.NetworkPolicy) {
				np.Spec.Ingress[1].Ports[0].EndPort = new(int32(65535))
			}},
		} {
			By(edit.what)
			np := &networkingv1.NetworkPolicy{}
			Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
			edit.apply(np)
			Expect(kube().Update(ctx, np, client.FieldOwner("kubectl-edit"))).To(Succeed())
			start := time.Now()
			// The update's answer is what the API server stored; a fresh read could already see
			// the repair (it has taken as little as 11 ms).
			Expect(np.Spec).NotTo(Equal(fleetPolicy(f)), "the edit must have widened the live policy")
			framework.EventuallyWithin(ctx, driftBound, func(g Gomega) {
				g.Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
				g.Expect(np.Spec).To(Equal(fleetPolicy(f)))
			}).Should(Succeed(), "the widened policy was not restored within %s", driftBound)
			took := time.Since(start)
			AddReportEntry("NetworkPolicy restored after: "+edit.what, took.String())
			GinkgoWriter.Printf("restored %q in %s\n", edit.what, took)
		}
		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(members), "repairing a NetworkPolicy must not restart a member")
		Expect(restartCounts(ctx, ns, name)).To(Equal(restarts), "repairing a NetworkPolicy must not restart a container")
		expectSettled(ctx, ns, "the repaired fleet")
		expectNoOperatorDeletes(ns, "a NetworkPolicy repair")
	})

	// Seed 001 makes Services verify-only; the operator corrects them instead (docs/networking.md,
	// "Drift"). A correction sets the Service's spec back to the rendering, whole, and keeps what
	// other controllers write on a Service: its metadata (annotations, labels, finalizers) and
	// what the API server allocated (the cluster IP). The Service is never recreated.
	It("corrects a hand edit of a Service's rendered field and keeps what other controllers wrote on it", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		members := memberUIDs(ctx, ns, name, 3)

		By("a load-balancer controller annotates, labels and finalizes the Service, and someone sets sessionAffinity")
		const finalizer = "service.kubernetes.io/load-balancer-cleanup"
		svc := &corev1.Service{}
		Expect(kube().Get(ctx, key(ns, name), svc)).To(Succeed())
		clusterIP := svc.Spec.ClusterIP
		metav1.SetMetaDataAnnotation(&svc.ObjectMeta, "lb.example.com/id", "lb-42")
		metav1.SetMetaDataLabel(&svc.ObjectMeta, "team", "edge")
		svc.Finalizers = append(svc.Finalizers, finalizer)
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		Expect(kube().Update(ctx, svc, client.FieldOwner("lb-controller"))).To(Succeed())
		DeferCleanup(func(ctx context.Context) { // let the namespace go
			live := &corev1.Service{}
			if err := kube().Get(ctx, key(ns, name), live); err == nil {
				live.Finalizers = nil
				Expect(client.IgnoreNotFound(kube().Update(ctx, live))).To(Succeed())
			}
		})

		By("a hand edit points the application port elsewhere")
		// the operator may be correcting sessionAffinity at this moment: edit what is there then
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := kube().Get(ctx, key(ns, name), svc); err != nil {
				return err
			}
			svc.Spec.Ports[0].TargetPort.IntVal = 9090
			return kube().Update(ctx, svc, client.FieldOwner("kubectl-edit"))
		})).To(Succeed())
		framework.EventuallyWithin(ctx, driftBound, func(g Gomega) {
			g.Expect(kube().Get(ctx, key(ns, name), svc)).To(Succeed())
			g.Expect(svc.Spec.Ports[0].TargetPort.IntVal).To(Equal(int32(8080)))
		}).Should(Succeed(), "the hand-edited targetPort was not corrected within %s", driftBound)

		Expect(svc.Annotations).To(HaveKeyWithValue("lb.example.com/id", "lb-42"), "another controller's annotation was removed")
		Expect(svc.Labels).To(HaveKeyWithValue("team", "edge"), "another controller's label was removed")
		Expect(svc.Finalizers).To(ContainElement(finalizer), "another controller's finalizer was removed")
		Expect(svc.Spec.SessionAffinity).To(Equal(corev1.ServiceAffinityNone), "the spec is the rendering, whole: a spec field set by hand is reset too")
		Expect(svc.Spec.ClusterIP).To(Equal(clusterIP), "the Service was recreated")
		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(members), "correcting a Service restarts no member")
		expectNoOperatorDeletes(ns, "a Service correction")
	})

	It("reverts a template edit made in the same second as its own write, one member at a time", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		before := memberUIDs(ctx, ns, name, 3)
		mon := monitorDown(ctx, ns, getFleet(ctx, ns, name), 3, 1)

		By("the operator writes the StatefulSet for a restart, and a hand edit follows in the same second")
		var sameSecond bool
		for attempt := range 3 {
			// Start just after a second begins, so the operator's write and the edit share it.
			framework.EventuallyWithin(ctx, 2*time.Second, func() bool {
				return time.Now().Nanosecond() < int(50*time.Millisecond)
			}).WithPolling(5 * time.Millisecond).Should(BeTrue())
			token := fmt.Sprintf("drift-%d", attempt)
			patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"maintenance":{"restartToken":%q}}}`, token))
			sts := &appsv1.StatefulSet{}
			framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
				g.Expect(kube().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sts)).To(Succeed())
				g.Expect(sts.Spec.Template.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, token))
			}).WithPolling(10 * time.Millisecond).Should(Succeed())
			c := &sts.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "HAND_EDIT", Value: token})
			if err := kube().Update(ctx, sts, client.FieldOwner("kubectl-edit")); apierrors.IsConflict(err) {
				continue // the operator wrote again in between; try the next second
			} else {
				Expect(err).NotTo(HaveOccurred())
			}
			ours, theirs := managedTimes(sts)
			GinkgoWriter.Printf("attempt %d: operator's write at %s, the edit at %s\n", attempt, ours, theirs)
			if sameSecond = ours.Equal(theirs); sameSecond {
				break
			}
		}
		Expect(sameSecond).To(BeTrue(), "the edit never landed in the same second as the operator's write; the spec did not test that case")

		By("every member rolls onto the operator's template, never two down at once")
		rollAll(ctx, ns, name, 3, before, nil)
		framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
			if down := membersDown(ctx, ns, name, 3); down > 1 {
				StopTrying(fmt.Sprintf("%d members were down at once while the edit was reverted", down)).Now()
			}
			sts := statefulSetOf(ctx, ns, name)
			g.Expect(envNames(sts.Spec.Template.Spec.Containers[0])).NotTo(ContainElement("HAND_EDIT"), "the StatefulSet template still has the hand edit")
			for _, p := range livePods(ctx, ns, name) {
				g.Expect(envNames(p.Spec.Containers[0])).NotTo(ContainElement("HAND_EDIT"), "member %s still runs the hand-edited template", p.Name)
				g.Expect(framework.IsReady(&p)).To(BeTrue(), "member %s", p.Name)
			}
			g.Expect(sts.Status.UpdatedReplicas).To(Equal(int32(3)))
			g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		mon.Check("a hand edit and its repair")
		expectNoOperatorDeletes(ns, "a template repair")
	})
})

// restartCounts maps each member Pod to its containers' restart count.
func restartCounts(ctx context.Context, ns, name string) map[string]int32 {
	GinkgoHelper()
	out := map[string]int32{}
	for _, p := range livePods(ctx, ns, name) {
		for _, s := range p.Status.ContainerStatuses {
			out[p.Name] += s.RestartCount
		}
	}
	return out
}

// managedTimes are the times of the operator's and the hand edit's last writes of the spec.
func managedTimes(sts *appsv1.StatefulSet) (ours, theirs time.Time) {
	for _, m := range sts.ManagedFields {
		if m.Time == nil || m.Subresource != "" {
			continue
		}
		switch m.Manager {
		case "celld-operator":
			if m.Time.After(ours) {
				ours = m.Time.Time
			}
		case "kubectl-edit":
			theirs = m.Time.Time
		}
	}
	return ours, theirs
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}
