package e2e

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

// A proxy gets xDS and certificates from the istiod that injected it. After a
// controlPlaneNamespace change, and while the fleet then leaves the mesh, proxies of the old and
// the new control plane run side by side; each must keep its istiod egress until it exits
// (issue 12, item 6).
var _ = Describe("istiod egress follows the proxies", func() {
	It("keeps egress to every control plane a running proxy uses, across a control plane change and leaving the mesh", func(ctx context.Context) {
		ns := fleetNamespace(ctx, "istiod")
		const name = "ie"
		injector := framework.StartInjector(ctx, ns, framework.NativeSidecar)
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		mon := monitorIstiodEgress(ctx, ns, name)

		By("joining the mesh through istio-system")
		patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{}}}}`)
		rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), meshInvariant(ns, name))
		waitFleetReady(ctx, ns, name, 3)
		Expect(istiodNamespaces(ctx, ns, name)).To(Equal([]string{"istio-system"}))

		By("moving to the istio-canary control plane: members are re-injected one at a time")
		injector.SetControlPlane("istio-canary")
		patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{"controlPlaneNamespace":"istio-canary"}},"maintenance":{"restartToken":"canary"}}}`)
		rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), meshInvariant(ns, name))
		waitFleetReady(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, framework.Medium, func() []string { return istiodNamespaces(ctx, ns, name) }).
			Should(Equal([]string{"istio-canary"}), "egress to istio-system outlived its last proxy")
		Expect(getFleet(ctx, ns, name).Annotations).To(HaveKeyWithValue(v1.AnnotationIstioControlPlane, "istio-canary"),
			"the remembered control plane follows the change")

		By("leaving the mesh: the canary proxies keep their istiod until the last one exits")
		patchFleet(ctx, ns, name, `{"spec":{"mesh":null}}`)
		rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), meshInvariant(ns, name))
		waitFleetReady(ctx, ns, name, 3)
		framework.EventuallyWithin(ctx, framework.Medium, func() []string { return istiodNamespaces(ctx, ns, name) }).
			Should(BeEmpty(), "istiod egress stayed open after the last proxy")

		mon.check()
		Expect(mon.seen()).To(ContainElements("istio-system", "istio-canary"), "the monitor saw proxies of both control planes")
		expectNoOperatorDeletes(ns, "control plane changes")
	})
})

// istiodNamespaces are the namespaces the fleet's NetworkPolicy admits istiod (port 15012) in.
func istiodNamespaces(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	np := &networkingv1.NetworkPolicy{}
	Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
	return egressToIstiod(np)
}

func egressToIstiod(np *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, rule := range np.Spec.Egress {
		if !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.IntVal == 15012 }) {
			continue
		}
		for _, peer := range rule.To {
			if peer.NamespaceSelector != nil {
				out = append(out, peer.NamespaceSelector.MatchLabels[corev1.LabelMetadataName])
			}
		}
	}
	sort.Strings(out)
	return out
}

// istiodMonitor follows the fleet's NetworkPolicy and Pods through watches and, in the API
// server's revision order, checks the one thing that matters: the policy never drops a
// control plane while a Pod whose proxy uses it still exists. (A new control plane is admitted
// just after its first Pod appears: the operator can only react to the Pod.)
type istiodMonitor struct {
	mu     sync.Mutex
	events []istiodEvent
}

type istiodEvent struct {
	revision int64
	policy   []string // set for a NetworkPolicy event
	pod      string   // set for a Pod event
	plane    string   // the Pod's proxy control plane, "" without a proxy
	gone     bool     // the Pod was deleted
	isPolicy bool
}

func monitorIstiodEgress(ctx context.Context, ns, name string) *istiodMonitor {
	GinkgoHelper()
	m := &istiodMonitor{}
	cs := framework.Cluster.Client
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID})
	Expect(err).NotTo(HaveOccurred())
	m.add(istiodEvent{revision: rev(np.ResourceVersion), policy: egressToIstiod(np), isPolicy: true})
	for i := range pods.Items {
		m.add(podEvent(&pods.Items[i], false))
	}
	npw, err := cs.NetworkingV1().NetworkPolicies(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: np.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	pw, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: v1.LabelFleetUID, ResourceVersion: pods.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { npw.Stop(); pw.Stop() })
	go func() {
		for e := range npw.ResultChan() {
			if p, ok := e.Object.(*networkingv1.NetworkPolicy); ok && e.Type != watch.Deleted {
				m.add(istiodEvent{revision: rev(p.ResourceVersion), policy: egressToIstiod(p), isPolicy: true})
			}
		}
	}()
	go func() {
		for e := range pw.ResultChan() {
			if p, ok := e.Object.(*corev1.Pod); ok {
				m.add(podEvent(p, e.Type == watch.Deleted))
			}
		}
	}()
	return m
}

func podEvent(p *corev1.Pod, gone bool) istiodEvent {
	plane := ""
	if planes := children.ProxyControlPlanes([]corev1.Pod{*p}); len(planes) == 1 {
		plane = planes[0]
	}
	return istiodEvent{revision: rev(p.ResourceVersion), pod: p.Name + "/" + string(p.UID), plane: plane, gone: gone}
}

func rev(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

func (m *istiodMonitor) add(e istiodEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

// seen lists the control planes of every proxy the monitor saw.
func (m *istiodMonitor) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.events {
		if e.plane != "" && !slices.Contains(out, e.plane) {
			out = append(out, e.plane)
		}
	}
	return out
}

// check replays the events in revision order and fails on the first policy that dropped a
// control plane a live Pod's proxy still used.
func (m *istiodMonitor) check() {
	GinkgoHelper()
	m.mu.Lock()
	events := slices.Clone(m.events)
	m.mu.Unlock()
	sort.SliceStable(events, func(i, j int) bool { return events[i].revision < events[j].revision })
	live := map[string]string{} // Pod → control plane of its proxy
	var policy []string
	for _, e := range events {
		if !e.isPolicy {
			if e.gone {
				delete(live, e.pod)
			} else {
				live[e.pod] = e.plane
			}
			continue
		}
		for _, dropped := range policy {
			if slices.Contains(e.policy, dropped) {
				continue
			}
			for pod, plane := range live {
				Expect(plane).NotTo(Equal(dropped), "at revision %d the NetworkPolicy dropped istiod egress to %s while Pod %s still ran a proxy of it", e.revision, dropped, pod)
			}
		}
		policy = e.policy
	}
}
