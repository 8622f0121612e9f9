package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// The seeds to the letter (issue 28): behaviours an audit found the operator short of, proven on
// the local cluster.
var _ = Describe("the seeds, to the letter", func() {
	var ns string
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "seed") })

	// Seed 001: "Objects without the fleet's UID label, or with owner references, are refused."
	It("refuses its StatefulSet and its NetworkPolicy once they carry a foreign owner reference, names the owner, and writes neither", func(ctx context.Context) {
		const name = "so"
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := getFleet(ctx, ns, name)
		mon := monitorDown(ctx, ns, f, 3, 1)
		keeper := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keeper"}}
		Expect(kube().Create(ctx, keeper)).To(Succeed())

		By("the StatefulSet: refused with LifecycleBlocked, and a restart is not rolled onto it")
		uids, sts := memberUIDs(ctx, ns, name, 3), statefulSetOf(ctx, ns, name)
		gen := sts.Generation
		Expect(kube().Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q}]}}`, keeper.Name, keeper.UID))),
			client.FieldOwner("e2e-owner-tool"))).To(Succeed())
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "True/"+v1.ReasonLifecycleBlocked)
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)).To(And(
			ContainSubstring("StatefulSet %s/%s", ns, name), ContainSubstring("owner reference to ConfigMap keeper")))
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"while-owned-by-keeper"}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func() bool {
			f := getFleet(ctx, ns, name)
			return f.Status.ObservedGeneration == f.Generation
		}).Should(BeTrue(), "the operator never examined the restart")
		Consistently(ctx, func(g Gomega) {
			g.Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(gen), "the operator wrote a StatefulSet with a foreign owner")
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(Equal("True/" + v1.ReasonLifecycleBlocked))
		}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())
		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(uids), "a member of a refused StatefulSet was restarted")

		By("without the owner reference the StatefulSet is the fleet's again: the restart rolls")
		Expect(kube().Patch(ctx, statefulSetOf(ctx, ns, name), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`)))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Short, func() string {
			return statefulSetOf(ctx, ns, name).Spec.Template.Annotations[v1.AnnotationRestartToken]
		}).Should(Equal("while-owned-by-keeper"))
		rollAll(ctx, ns, name, 3, uids, nil)
		waitFleetReady(ctx, ns, name, 3)

		By("a child, the NetworkPolicy: refused with InfrastructureBlocked, and a hand edit is not undone")
		np := &networkingv1.NetworkPolicy{}
		Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
		np.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: keeper.Name, UID: keeper.UID}}
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: tcp(8081)})
		Expect(kube().Update(ctx, np, client.FieldOwner("e2e-owner-tool"))).To(Succeed())
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "True/"+v1.ReasonInfrastructureBlocked)
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)).To(And(
			ContainSubstring("NetworkPolicy %s/%s", ns, name), ContainSubstring("owner reference to ConfigMap keeper")))
		Consistently(ctx, func(g Gomega) {
			live := &networkingv1.NetworkPolicy{}
			g.Expect(kube().Get(ctx, key(ns, name), live)).To(Succeed())
			g.Expect(live.ResourceVersion).To(Equal(np.ResourceVersion), "the operator wrote a NetworkPolicy with a foreign owner")
		}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())

		By("without the owner reference the policy is the fleet's again and is restored")
		Expect(kube().Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`)))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
			g.Expect(np.Spec).To(Equal(fleetPolicy(f)))
		}).Should(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(HavePrefix("False/"))
		mon.Check("foreign owner references on the StatefulSet and the NetworkPolicy")
		expectNoOperatorDeletes(ns, "foreign owner references")
	})

	// Seed 000: "Routing also closes when fleet deletion starts; it does not delay runtime
	// shutdown."
	DescribeTable("shuts the members down while the route cannot close, and says what holds it",
		func(ctx context.Context, block func(ctx context.Context, ns, route string) (release func(), why string)) {
			const name = "sr"
			f := persistentFleet(ns, name, 3)
			f.Spec.Routing = &v1.RoutingSpec{Hostnames: []string{"app.example.com"}, Ingress: &v1.IngressRouting{ClassName: "nginx"},
				Source: v1.RoutingSource{Namespace: "edge", PodLabels: map[string]v1.LabelValue{"app": "edge"}}}
			Expect(kube().Create(ctx, f)).To(Succeed())
			waitFleetReady(ctx, ns, name, 3)
			route := name + "-routing"
			framework.EventuallyWithin(ctx, framework.Short, func() any { return object(ctx, gvrIngress, ns, route) }).ShouldNot(BeNil())
			expectNoOperatorDeletes(ns, "creating a routed fleet")
			f = getFleet(ctx, ns, name)
			iso := monitorIsolation(ctx, ns, f)
			deleting := recordCondition(ctx, ns, name, v1.ConditionDeleting)
			release, why := block(ctx, ns, route)

			Expect(kube().Delete(ctx, f)).To(Succeed())
			framework.EventuallyWithin(ctx, 2*framework.Medium, func(g Gomega) {
				g.Expect(livePods(ctx, ns, name)).To(BeEmpty(), "members still run")
				err := kube().Get(ctx, key(ns, name), &appsv1.StatefulSet{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the StatefulSet is still there: %v", err)
			}).Should(Succeed(), "the members never shut down while the route could not close")
			Expect(object(ctx, gvrIngress, ns, route)).NotTo(BeNil(), "the route closed after all; the spec proves nothing")
			Expect(deleting()).To(ContainElement(And(ContainSubstring("routing has not closed yet"), ContainSubstring(why))),
				"while the members shut down, the Deleting message never said what held the route")
			framework.EventuallyWithin(ctx, framework.Short, func() string {
				return conditionMessage(getFleet(ctx, ns, name), v1.ConditionDeleting)
			}).Should(And(ContainSubstring("Members and disks are gone"), ContainSubstring(why)), "the fleet waits for the route and says so")

			release()
			framework.EventuallyWithin(ctx, 2*framework.Medium, func() bool {
				return apierrors.IsNotFound(kube().Get(ctx, key(ns, name), &v1.CelldFleet{}))
			}).Should(BeTrue(), "the fleet is gone once the route is")
			Expect(object(ctx, gvrIngress, ns, route)).To(BeNil())
			iso.Check("a deletion whose route could not close")
			for _, d := range operatorDeletes(ns) {
				Expect(d.Kind).To(Equal("PersistentVolumeClaim"), "the operator deleted %s %s during the fleet's deletion", d.Kind, d.Name)
			}
		},
		Entry("a foreign finalizer holds the route", func(ctx context.Context, ns, route string) (func(), string) {
			hold(ctx, gvrIngress, ns, route, true)
			return func() { hold(ctx, gvrIngress, ns, route, false) }, "e2e.celld.eric.dev/hold"
		}),
		Entry("an admission webhook the API server cannot reach fails the route's delete", func(ctx context.Context, ns, route string) (func(), string) {
			wh := unreachableDeleteWebhook(ctx, ns, route)
			return func() { Expect(client.IgnoreNotFound(kube().Delete(ctx, wh))).To(Succeed()) }, "failed calling webhook"
		}),
	)

	// Seed 000: "Invalid routing stored by older schemas or admission bypasses reports
	// RoutingReady=False without blocking runtime operations."
	It("keeps a fleet whose routing the API server admits but the operator refuses Provisioned, its members and its route untouched", func(ctx context.Context) {
		const name = "ir"
		f := persistentFleet(ns, name, 3)
		f.Spec.Routing = &v1.RoutingSpec{Hostnames: []string{"app.example.com"},
			Ingress: &v1.IngressRouting{ClassName: "nginx", Annotations: map[string]string{"example.com/managed": "1"}},
			Source:  v1.RoutingSource{Namespace: "edge", PodLabels: map[string]v1.LabelValue{"app": "edge"}}}
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		route := &networkingv1.Ingress{}
		framework.EventuallyWithin(ctx, framework.Short, func() error { return kube().Get(ctx, key(ns, name+"-routing"), route) }).Should(Succeed())
		expectSettled(ctx, ns, "a routed fleet")
		Expect(kube().Get(ctx, key(ns, name+"-routing"), route)).To(Succeed())
		f = getFleet(ctx, ns, name)
		mon := monitorDown(ctx, ns, f, 3, 1)
		uids, gen := memberUIDs(ctx, ns, name, 3), statefulSetOf(ctx, ns, name).Generation
		untouched := func(g Gomega) {
			live := &networkingv1.Ingress{}
			g.Expect(kube().Get(ctx, key(ns, name+"-routing"), live)).To(Succeed())
			g.Expect(live.ResourceVersion).To(Equal(route.ResourceVersion), "the existing route was written")
			g.Expect(live.DeletionTimestamp).To(BeNil(), "the existing route was deleted")
			g.Expect(condition(ctx, ns, name, v1.ConditionRoutingReady)).To(Equal("False/" + v1.ReasonInvalidConfiguration))
		}

		By("a value of 4,096 characters but more than 4,096 bytes: the CRD counts characters, the operator bytes")
		patchFleet(ctx, ns, name, fmt.Sprintf(`{"spec":{"routing":{"ingress":{"annotations":{"example.com/managed":%q}}}}}`, strings.Repeat("é", 4096)))
		expectCondition(ctx, ns, name, v1.ConditionRoutingReady, "False/"+v1.ReasonInvalidConfiguration)
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionRoutingReady)).To(ContainSubstring("spec.routing.ingress.annotations"))
		Consistently(ctx, func(g Gomega) {
			untouched(g)
			g.Expect(condition(ctx, ns, name, v1.ConditionReady)).To(Equal("True/" + v1.ReasonProvisioned))
			g.Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(HavePrefix("False/"))
			g.Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(gen), "the workload was written")
		}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())
		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(uids), "a member was restarted")

		By("runtime operations go on meanwhile: a restart rolls, and the route stays as it was")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"restartToken":"while-routing-is-invalid"}}}`)
		rollAll(ctx, ns, name, 3, uids, nil)
		waitFleetReady(ctx, ns, name, 3)
		Expect(statefulSetOf(ctx, ns, name).Spec.Template.Annotations).To(HaveKeyWithValue(v1.AnnotationRestartToken, "while-routing-is-invalid"))
		untouched(Default)
		mon.Check("a restart while spec.routing is invalid")
		expectNoOperatorDeletes(ns, "invalid routing")
	})
})

// recordCondition follows a fleet through a watch from now on and returns a func giving every
// distinct message its condition t had, in order: a message held for a moment between two polls
// is still seen.
func recordCondition(ctx context.Context, ns, name, t string) func() []string {
	GinkgoHelper()
	var mu sync.Mutex
	var seen []string
	fleets := framework.Cluster.Dynamic.Resource(v1.GroupVersion.WithResource("celldfleets")).Namespace(ns)
	current, err := fleets.Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	w, err := fleets.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: current.GetResourceVersion()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] != t {
					continue
				}
				msg, _ := m["message"].(string)
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != msg {
					seen = append(seen, msg)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// unreachableDeleteWebhook makes the API server consult an admission webhook it cannot reach,
// failing closed, before deleting the route of namespace ns: the route's delete fails with the
// API server's "failed calling webhook" error, as under a webhook outage. It is removed when the
// spec ends.
func unreachableDeleteWebhook(ctx context.Context, ns, route string) *admissionv1.ValidatingWebhookConfiguration {
	GinkgoHelper()
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	wh := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-route-delete-" + ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "route-delete.e2e.celld.eric.dev",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: new("https://127.0.0.1:1/route-delete")},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Delete}, Rule: admissionv1.Rule{APIGroups: []string{"networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"ingresses"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			MatchConditions:         []admissionv1.MatchCondition{{Name: "the-route", Expression: fmt.Sprintf("oldObject.metadata.name == %q", route)}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          new(int32(2)),
		}},
	}
	Expect(kube().Create(ctx, wh)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { _ = client.IgnoreNotFound(kube().Delete(ctx, wh)) })
	// The API server reads webhook configurations from an informer: wait until this one applies
	// (a dry-run delete is admitted like a real one, and deletes nothing).
	framework.EventuallyWithin(ctx, framework.Short, func() error {
		return kube().Delete(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: route}}, client.DryRunAll)
	}).Should(MatchError(ContainSubstring("failed calling webhook")), "the webhook never applied to the route's delete")
	return wh
}
