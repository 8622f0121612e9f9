package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/tests/e2e/framework"
)

var (
	gvrHTTPRoute = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	gvrIngress   = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	gvrPolicy    = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	gvrAuthz     = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}
	gvrPeerAuthn = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"}
	gvrPod       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

var _ = Describe("networking", func() {
	var ns string
	const name = "nf"
	BeforeEach(func(ctx context.Context) { ns = fleetNamespace(ctx, "net") })

	It("renders the Services, NetworkPolicy and PDB of a Ready fleet, applied by the operator, kept and settled", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := getFleet(ctx, ns, name)
		members := map[string]string{v1.LabelFleetUID: string(f.UID)}

		app, peers := &corev1.Service{}, &corev1.Service{}
		Expect(kube().Get(ctx, key(ns, name), app)).To(Succeed())
		Expect(app.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(app.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone))
		Expect(app.Spec.Selector).To(Equal(members))
		Expect(app.Spec.Ports).To(ConsistOf(corev1.ServicePort{Name: "application", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)}))
		Expect(kube().Get(ctx, key(ns, name+"-peers"), peers)).To(Succeed())
		Expect(peers.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "the peer Service is headless")
		Expect(peers.Spec.PublishNotReadyAddresses).To(BeTrue(), "peers resolve each other before readiness")
		Expect(peers.Spec.Selector).To(Equal(members))
		Expect(peers.Spec.Ports).To(ConsistOf(corev1.ServicePort{Name: "peer", Protocol: corev1.ProtocolTCP, Port: 8081, TargetPort: intstr.FromInt32(8081), AppProtocol: new("tcp")}))

		np := &networkingv1.NetworkPolicy{}
		Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
		Expect(np.Spec).To(Equal(fleetPolicy(f)), "the fleet NetworkPolicy has exactly the rules of reference §1.15")
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(kube().Get(ctx, key(ns, name), pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable).To(Equal(new(intstr.FromInt32(1))))
		Expect(pdb.Spec.MinAvailable).To(BeNil())
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(members))
		objs := []client.Object{app, peers, np, pdb}
		for _, obj := range objs {
			expectOperatorOwned(obj, f)
		}

		By("a settled fleet rewrites no child")
		expectSettled(ctx, ns, "a settled fleet")
		Consistently(ctx, func(g Gomega) {
			for _, obj := range objs {
				live := obj.DeepCopyObject().(client.Object)
				g.Expect(kube().Get(ctx, client.ObjectKeyFromObject(obj), live)).To(Succeed())
				g.Expect(live.GetResourceVersion()).To(Equal(obj.GetResourceVersion()), "%T %s was rewritten", obj, obj.GetName())
			}
		}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())

		By("a hand edit of the policy is undone")
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: tcp(8081)}) // 8081 from anywhere
		Expect(kube().Update(ctx, np, client.FieldOwner("kubectl-edit"))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
			g.Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
			g.Expect(np.Spec).To(Equal(fleetPolicy(f)))
		}).Should(Succeed())
		expectNoOperatorDeletes(ns, "creation")
	})

	It("refuses a foreign Service named like the fleet and leaves it untouched", func(ctx context.Context) {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"owner": "someone-else"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9999}}, Selector: map[string]string{"app": "other"}},
		}
		Expect(kube().Create(ctx, foreign)).To(Succeed())
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		expectCondition(ctx, ns, name, v1.ConditionBlocked, "True/"+v1.ReasonInfrastructureBlocked)
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionBlocked)).To(ContainSubstring("Service %s/%s", ns, name))
		Consistently(ctx, func(g Gomega) {
			live := &corev1.Service{}
			g.Expect(kube().Get(ctx, key(ns, name), live)).To(Succeed())
			g.Expect(live.ResourceVersion).To(Equal(foreign.ResourceVersion), "the foreign Service was written")
			g.Expect(kube().Get(ctx, key(ns, name), &networkingv1.NetworkPolicy{})).NotTo(Succeed(), "nothing is applied while a child is refused")
			g.Expect(kube().Get(ctx, key(ns, name), &appsv1.StatefulSet{})).NotTo(Succeed(), "no member starts without its Services")
		}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())

		// Once its owner removes it, the fleet provisions normally.
		Expect(kube().Delete(ctx, foreign)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		Expect(condition(ctx, ns, name, v1.ConditionBlocked)).To(HavePrefix("False/"))
	})

	It("adds, accepts, switches and removes routing without restarting members, also while paused", func(ctx context.Context) {
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		f := getFleet(ctx, ns, name)
		uids, stsGen := memberUIDs(ctx, ns, name, 3), statefulSetOf(ctx, ns, name).Generation
		routing := func(want string) { GinkgoHelper(); expectCondition(ctx, ns, name, v1.ConditionRoutingReady, want) }

		patchFleet(ctx, ns, name, `{"spec":{"routing":{"hostnames":["app.example.com"],"gateway":{"name":"public","namespace":"edge","sectionName":"https"},`+
			`"source":{"namespace":"edge","podLabels":{"app":"public-gateway"}}}}}`)
		framework.EventuallyWithin(ctx, framework.Medium, func() any { return object(ctx, gvrHTTPRoute, ns, name+"-routing") }).ShouldNot(BeNil())
		route := object(ctx, gvrHTTPRoute, ns, name+"-routing")
		expectOperatorOwned(route, f)
		Expect(route.Object["spec"]).To(gstruct.MatchKeys(gstruct.IgnoreExtras, gstruct.Keys{
			"hostnames":  ConsistOf("app.example.com"),
			"parentRefs": ConsistOf(And(HaveKeyWithValue("name", "public"), HaveKeyWithValue("namespace", "edge"), HaveKeyWithValue("sectionName", "https"))),
			"rules":      ConsistOf(HaveKeyWithValue("backendRefs", ConsistOf(And(HaveKeyWithValue("name", name), HaveKeyWithValue("port", BeEquivalentTo(8080)))))),
		}))
		rp := &networkingv1.NetworkPolicy{}
		Expect(kube().Get(ctx, key(ns, name+"-routing"), rp)).To(Succeed())
		expectOperatorOwned(rp, f)
		Expect(rp.Spec).To(Equal(networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{v1.LabelFleetUID: string(f.UID)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: tcp(8080), From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: labels(corev1.LabelMetadataName, "edge"), PodSelector: labels("app", "public-gateway")}}}},
		}), "the routing policy admits only TCP 8080 from the named data plane")

		routing("Unknown/" + v1.ReasonAwaitingAcceptance)
		Consistently(ctx, func() string { return condition(ctx, ns, name, v1.ConditionRoutingReady) }).
			WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).Should(Equal("Unknown/"+v1.ReasonAwaitingAcceptance), "no Gateway answered yet")
		setRouteStatus(ctx, ns, name, route.GetGeneration(), "True", "True")
		routing("True/" + v1.ReasonRouteAccepted)
		expectSettled(ctx, ns, "a settled fleet with an accepted route")

		By("a new route generation makes the Gateway's answer stale; a rejection of it is reported")
		patchFleet(ctx, ns, name, `{"spec":{"routing":{"hostnames":["app.example.com","api.example.com"]}}}`)
		routing("Unknown/" + v1.ReasonAwaitingAcceptance)
		route = object(ctx, gvrHTTPRoute, ns, name+"-routing")
		Expect(route.GetGeneration()).To(BeNumerically(">", 1))
		setRouteStatus(ctx, ns, name, route.GetGeneration(), "False", "True")
		routing("False/" + v1.ReasonRouteRejected)
		Expect(conditionMessage(getFleet(ctx, ns, name), v1.ConditionRoutingReady)).To(ContainSubstring("Accepted=False"))

		By("switching to an Ingress while paused: the HTTPRoute, held by a finalizer, is gone before the Ingress exists")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":true}}}`)
		expectCondition(ctx, ns, name, v1.ConditionMaintenancePaused, "True/"+v1.ReasonMaintenancePaused)
		rec := record(ctx, ns, gvrHTTPRoute, gvrIngress, gvrPolicy)
		hold(ctx, gvrHTTPRoute, ns, name+"-routing", true)
		patchFleet(ctx, ns, name, `{"spec":{"routing":{"gateway":null,"ingress":{"className":"nginx","annotations":{"example.com/managed":"1"}}}}}`)
		routing("Unknown/" + v1.ReasonRemovingRoute)
		Consistently(ctx, func(g Gomega) {
			g.Expect(terminating(ctx, gvrHTTPRoute, ns, name+"-routing")).To(BeTrue(), "the HTTPRoute is deleted first, and held")
			g.Expect(object(ctx, gvrIngress, ns, name+"-routing")).To(BeNil(), "the Ingress appeared while the HTTPRoute was still there")
		}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		hold(ctx, gvrHTTPRoute, ns, name+"-routing", false)
		ingress := &networkingv1.Ingress{}
		framework.EventuallyWithin(ctx, framework.Medium, func() error { return kube().Get(ctx, key(ns, name+"-routing"), ingress) }).Should(Succeed())
		routeGone := rec.first(func(e seen) bool { return e.Kind == "HTTPRoute" && e.Type == watch.Deleted })
		Expect(routeGone).NotTo(BeZero(), "the HTTPRoute was deleted")
		Expect(rec.first(func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Added })).To(BeNumerically(">", routeGone),
			"the Ingress was created before the HTTPRoute had disappeared")
		expectOperatorOwned(ingress, f)
		Expect(*ingress.Spec.IngressClassName).To(Equal("nginx"))
		Expect(ingress.Spec.Rules).To(HaveLen(2))
		for _, r := range ingress.Spec.Rules {
			Expect(r.HTTP.Paths).To(ConsistOf(HaveField("Backend.Service", Equal(&networkingv1.IngressServiceBackend{
				Name: name, Port: networkingv1.ServiceBackendPort{Number: 8080}}))))
		}
		Expect(ingress.Annotations).To(HaveKeyWithValue(v1.AnnotationRoutingAnnotationKeys, "example.com/managed"))
		routing("Unknown/" + v1.ReasonAwaitingAddress)
		ingress.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
		Expect(kube().Status().Update(ctx, ingress)).To(Succeed())
		routing("True/" + v1.ReasonAddressAssigned)

		By("a managed annotation removed from the spec is pruned; the controller's own is kept")
		Expect(kube().Patch(ctx, ingress, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"controller.example.com/seen":"yes"}}}`)),
			client.FieldOwner("ingress-controller"))).To(Succeed())
		patchFleet(ctx, ns, name, `{"spec":{"routing":{"ingress":{"annotations":null}}}}`)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(kube().Get(ctx, key(ns, name+"-routing"), ingress)).To(Succeed())
			g.Expect(ingress.Annotations).NotTo(HaveKey("example.com/managed"))
			g.Expect(ingress.Annotations).To(HaveKeyWithValue("controller.example.com/seen", "yes"))
		}).Should(Succeed())

		By("removing routing deletes the route, then, once it is gone, its policy")
		hold(ctx, gvrIngress, ns, name+"-routing", true)
		patchFleet(ctx, ns, name, `{"spec":{"routing":null}}`)
		framework.EventuallyWithin(ctx, framework.Short, func() bool { return terminating(ctx, gvrIngress, ns, name+"-routing") }).
			Should(BeTrue(), "the Ingress is deleted")
		Consistently(ctx, func() any { return object(ctx, gvrPolicy, ns, name+"-routing") }).
			WithTimeout(2*time.Second).WithPolling(200*time.Millisecond).ShouldNot(BeNil(), "the routing policy went while its route was still there")
		hold(ctx, gvrIngress, ns, name+"-routing", false)
		routing("True/" + v1.ReasonRoutingDisabled)
		framework.EventuallyWithin(ctx, framework.Short, func(g Gomega) {
			g.Expect(object(ctx, gvrPolicy, ns, name+"-routing")).To(BeNil())
			g.Expect(object(ctx, gvrIngress, ns, name+"-routing")).To(BeNil())
		}).Should(Succeed())
		ingressGone := rec.first(func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Deleted })
		Expect(ingressGone).NotTo(BeZero())
		Expect(rec.first(func(e seen) bool {
			return e.Kind == "NetworkPolicy" && e.Name == name+"-routing" && e.Type == watch.Deleted
		})).
			To(BeNumerically(">", ingressGone), "the routing policy went before its route")
		Expect(kube().Get(ctx, key(ns, name), &networkingv1.NetworkPolicy{})).To(Succeed(), "the fleet policy stays")

		Expect(memberUIDs(ctx, ns, name, 3)).To(Equal(uids), "routing changes never restart members")
		Expect(statefulSetOf(ctx, ns, name).Generation).To(Equal(stsGen), "routing changes never touch the workload")
		patchFleet(ctx, ns, name, `{"spec":{"maintenance":{"paused":false}}}`)
		waitFleetReady(ctx, ns, name, 3)
		expectNoOperatorDeletes(ns, "routing changes")

		By("deleting the fleet closes routing before any member stops")
		patchFleet(ctx, ns, name, `{"spec":{"routing":{"hostnames":["app.example.com"],"ingress":{"className":"nginx"},"source":{"namespace":"edge","podLabels":{"app":"edge"}}}}}`)
		framework.EventuallyWithin(ctx, framework.Medium, func() any { return object(ctx, gvrIngress, ns, name+"-routing") }).ShouldNot(BeNil())
		rec = record(ctx, ns, gvrIngress, gvrPod)
		Expect(kube().Delete(ctx, getFleet(ctx, ns, name))).To(Succeed())
		framework.EventuallyWithin(ctx, framework.Medium, func() any { return object(ctx, gvrPolicy, ns, name+"-routing") }).Should(BeNil())
		closed := rec.first(func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Deleted })
		Expect(closed).NotTo(BeZero(), "the Ingress was deleted")
		Expect(rec.first(func(e seen) bool { return e.Kind == "Pod" && e.Deleting })).To(Or(BeZero(), BeNumerically(">", closed)),
			"a member stopped while the route still sent it traffic")
	})

	DescribeTable("joins and leaves the Istio mesh one member at a time behind a transitional PeerAuthentication",
		func(ctx context.Context, style framework.SidecarStyle) {
			injector := framework.StartInjector(ctx, ns, style)
			Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
			waitFleetReady(ctx, ns, name, 3)
			f := getFleet(ctx, ns, name)
			identities := []any{fmt.Sprintf("*/ns/%s/sa/%s", ns, f.Spec.ServiceAccountName),
				fmt.Sprintf("*/ns/%s/sa/%s", e2eOptions.OperatorNamespace, e2eOptions.OperatorServiceAccount)}

			By("joining")
			rec := record(ctx, ns, gvrPeerAuthn, gvrPod)
			patchFleet(ctx, ns, name, `{"spec":{"mesh":{"istio":{}}}}`)
			Expect(rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), meshInvariant(ns, name))).To(Equal([]int{2, 1, 0}))
			expectPeerAuthenticationFirst(rec, name)
			for _, p := range livePods(ctx, ns, name) {
				Expect(children.HasProxy(&p.Spec)).To(BeTrue(), "pod %s has no proxy", p.Name)
				Expect(p.Labels).To(And(HaveKeyWithValue(framework.InjectLabel, "true"), HaveKeyWithValue(v1.LabelFleetName, name)))
				Expect(p.Annotations).To(HaveKeyWithValue("sidecar.istio.io/nativeSidecar", "true"))
			}
			Expect(injector.Injected()).To(ConsistOf(name+"-2", name+"-1", name+"-0"))
			framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
				g.Expect(object(ctx, gvrPeerAuthn, ns, name+"-mesh")).To(BeNil(), "the PeerAuthentication outlived the mixed membership")
				ap := object(ctx, gvrAuthz, ns, name+"-mesh")
				g.Expect(ap).NotTo(BeNil())
				g.Expect(peerRule(ap)).To(HaveKeyWithValue("from", ConsistOf(HaveKeyWithValue("source", HaveKeyWithValue("principals", ConsistOf(identities...))))))
			}).Should(Succeed())
			Expect(getFleet(ctx, ns, name).Annotations).To(HaveKeyWithValue(v1.AnnotationIstioControlPlane, "istio-system"))
			Expect(egressPorts(ctx, ns, name)).To(ContainElement(int32(15012)), "members reach istiod")
			waitFleetReady(ctx, ns, name, 3)
			expectSettled(ctx, ns, "a settled meshed fleet")

			By("leaving")
			admitted := injector.Admissions()
			rec = record(ctx, ns, gvrPeerAuthn, gvrPod)
			patchFleet(ctx, ns, name, `{"spec":{"mesh":null}}`)
			Expect(rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), meshInvariant(ns, name))).To(Equal([]int{2, 1, 0}))
			expectPeerAuthenticationFirst(rec, name)
			for _, p := range livePods(ctx, ns, name) {
				Expect(children.HasProxy(&p.Spec)).To(BeFalse(), "pod %s kept a proxy", p.Name)
				Expect(p.Labels).To(HaveKeyWithValue(framework.InjectLabel, "false"), "injection stays explicitly off")
			}
			framework.EventuallyWithin(ctx, framework.Medium, func(g Gomega) {
				g.Expect(object(ctx, gvrPeerAuthn, ns, name+"-mesh")).To(BeNil())
				g.Expect(object(ctx, gvrAuthz, ns, name+"-mesh")).To(BeNil())
				g.Expect(egressPorts(ctx, ns, name)).NotTo(ContainElement(int32(15012)), "istiod egress stays open after the last proxy")
			}).Should(Succeed())
			Expect(getFleet(ctx, ns, name).Annotations).To(HaveKey(v1.AnnotationIstioControlPlane))
			Expect(injector.Admissions()).To(Equal(admitted), "a Pod was sent to the injector after the fleet left the mesh")
			waitFleetReady(ctx, ns, name, 3)
			expectNoOperatorDeletes(ns, "mesh membership changes")
		},
		Entry("with a native sidecar (istio-proxy init container, restartPolicy Always)", framework.NativeSidecar),
		Entry("with a classic istio-proxy container", framework.PlainSidecar),
	)

	It("never writes Secret values into the fleet, its status, events, the StatefulSet, Pods or the operator log", func(ctx context.Context) {
		secrets := sensitiveSecrets(ctx, ns)
		f := persistentFleet(ns, name, 3)
		withTelemetryExportEnv(f, "s1")
		Expect(kube().Create(ctx, f)).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)
		patchFleet(ctx, ns, name, `{"spec":{"env":[{"name":"CELLD_E2E_TOKEN","secretKeyRef":{"name":"e2e-env","key":"token"}},{"name":"CELLD_E2E_MODE","value":"s2"}]}}`)
		waitFleetReady(ctx, ns, name, 3)

		sts := statefulSetOf(ctx, ns, name)
		c := sts.Spec.Template.Spec.Containers[0]
		Expect(c.Env).To(ContainElements(secretEnv("CELLD_E2E_TOKEN", "e2e-env", "token"), secretEnv("OTEL_EXPORTER_OTLP_HEADERS", "e2e-otlp", "headers"),
			corev1.EnvVar{Name: "CELLD_EXPORT_KAFKA_PROPERTIES", Value: "/etc/celld/export/client.properties"}))
		Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "export-kafka", MountPath: "/etc/celld/export", ReadOnly: true}))

		evs, err := framework.Cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		pods := &corev1.PodList{}
		Expect(kube().List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		log, err := os.ReadFile(filepath.Join(artifactsDir(), "operator.log"))
		Expect(err).NotTo(HaveOccurred())
		Expect(log).NotTo(BeEmpty())
		targets := map[string]string{"fleet and status": asJSON(getFleet(ctx, ns, name)), "StatefulSet": asJSON(sts), "events": asJSON(evs),
			"Pods": asJSON(pods), "operator log": string(log)}
		for secret, value := range secrets {
			encoded := base64.StdEncoding.EncodeToString([]byte(value))
			s := &corev1.Secret{}
			Expect(kube().Get(ctx, key(ns, secret), s)).To(Succeed())
			Expect(asJSON(s)).To(ContainSubstring(encoded), "the scan finds a value where it is") // the scan can fail
			for where, data := range targets {
				Expect(data).NotTo(ContainSubstring(value), "the value of Secret %s leaked into the %s", secret, where)
				Expect(data).NotTo(ContainSubstring(encoded), "the base64 value of Secret %s leaked into the %s", secret, where)
			}
		}
	})

	It("rolls telemetry, export and env changes one member at a time and scopes their egress", func(ctx context.Context) {
		sensitiveSecrets(ctx, ns)
		Expect(kube().Create(ctx, persistentFleet(ns, name, 3))).To(Succeed())
		waitFleetReady(ctx, ns, name, 3)

		rec := record(ctx, ns, gvrPolicy, gvrPod)
		changed := persistentFleet(ns, name, 3)
		withTelemetryExportEnv(changed, "t1")
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"telemetry": changed.Spec.Telemetry, "export": changed.Spec.Export, "env": changed.Spec.Env}})
		patchFleet(ctx, ns, name, string(patch))
		Expect(rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), nil)).To(Equal([]int{2, 1, 0}), "members restart highest ordinal first")
		np := &networkingv1.NetworkPolicy{}
		Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
		Expect(np.Spec).To(Equal(fleetPolicy(getFleet(ctx, ns, name),
			networkingv1.NetworkPolicyEgressRule{Ports: tcp(4318), To: []networkingv1.NetworkPolicyPeer{{
				PodSelector: labels("app.kubernetes.io/name", "opentelemetry-collector"), NamespaceSelector: labels(corev1.LabelMetadataName, "observability")}}},
			networkingv1.NetworkPolicyEgressRule{Ports: tcp(9092, 9096), To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}}}},
		)), "one scoped rule for the collector, one with every distinct broker port")
		opened := rec.first(func(e seen) bool { return e.Kind == "NetworkPolicy" && e.Name == name && e.Type == watch.Modified })
		Expect(opened).NotTo(BeZero())
		Expect(rec.first(func(e seen) bool { return e.Kind == "Pod" && e.Deleting })).To(BeNumerically(">", opened),
			"a member restarted before the new egress was in place")
		env := statefulSetOf(ctx, ns, name).Spec.Template.Spec.Containers[0].Env
		Expect(env).To(ContainElements(
			corev1.EnvVar{Name: "CELLD_OTEL", Value: "http://otel-collector.observability.svc:4318"},
			corev1.EnvVar{Name: "CELLD_EXPORT", Value: "1"}, corev1.EnvVar{Name: "CELLD_EXPORT_SINK", Value: "kafka"},
			corev1.EnvVar{Name: "CELLD_E2E_MODE", Value: "t1"}))
		Expect(env).NotTo(ContainElement(HaveField("Name", "CELLD_OTEL_SINK")))
		waitFleetReady(ctx, ns, name, 3)

		By("an env change alone rolls the fleet too")
		patchFleet(ctx, ns, name, `{"spec":{"env":[{"name":"CELLD_E2E_MODE","value":"t2"}]}}`)
		Expect(rollAll(ctx, ns, name, 3, memberUIDs(ctx, ns, name, 3), nil)).To(Equal([]int{2, 1, 0}))
		waitFleetReady(ctx, ns, name, 3)
		expectNoOperatorDeletes(ns, "telemetry, export and env rollouts")
	})
})

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func labels(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func tcp(ports ...int32) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromInt32(p))})
	}
	return out
}

// fleetPolicy is the fleet NetworkPolicy of reference §1.15, followed by the scoped egress rules.
func fleetPolicy(f *v1.CelldFleet, scoped ...networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicySpec {
	members := labels(v1.LabelFleetUID, string(f.UID))
	return networkingv1.NetworkPolicySpec{
		PodSelector: *members,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: tcp(8081), From: []networkingv1.NetworkPolicyPeer{{PodSelector: members},
				{NamespaceSelector: labels(corev1.LabelMetadataName, e2eOptions.OperatorNamespace), PodSelector: labels("app.kubernetes.io/name", "celld-operator")}}},
			{Ports: tcp(8080), From: []networkingv1.NetworkPolicyPeer{{PodSelector: labels("celld.eric.dev/client-of", f.Name)}}},
		},
		Egress: append([]networkingv1.NetworkPolicyEgressRule{
			{Ports: tcp(8081), To: []networkingv1.NetworkPolicyPeer{{PodSelector: members}}},
			{Ports: append(tcp(53), networkingv1.NetworkPolicyPort{Protocol: new(corev1.ProtocolUDP), Port: new(intstr.FromInt32(53))}),
				To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labels(corev1.LabelMetadataName, "kube-system"), PodSelector: labels("k8s-app", "kube-dns")}}},
			{Ports: tcp(443)},
			{Ports: tcp(80), To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "169.254.170.23/32"}}}},
		}, scoped...),
	}
}

// expectOperatorOwned checks a child's ownership marks: the fleet UID label, the fleet as its
// controller, and server-side apply by the operator as the only writer of its fields (status
// subresource writers aside).
func expectOperatorOwned(obj client.Object, f *v1.CelldFleet) {
	GinkgoHelper()
	what := fmt.Sprintf("%T %s", obj, obj.GetName())
	Expect(obj.GetLabels()).To(HaveKeyWithValue(v1.LabelFleetUID, string(f.UID)), what)
	Expect(obj.GetOwnerReferences()).To(ContainElement(And(HaveField("UID", f.UID), HaveField("Controller", HaveValue(BeTrue())))), what)
	applied := false
	for _, m := range obj.GetManagedFields() {
		if m.Subresource == "" {
			Expect(m.Manager).To(Equal("celld-operator"), "%s has fields managed by %s", what, m.Manager)
			applied = applied || m.Operation == metav1.ManagedFieldsOperationApply
		}
	}
	Expect(applied).To(BeTrue(), "%s was not written by server-side apply", what)
}

// sensitiveSecrets creates the Secrets withTelemetryExportEnv refers to, each holding a value
// unique to this run, and returns Secret name to value.
func sensitiveSecrets(ctx context.Context, ns string) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	for _, s := range [][3]string{{"e2e-env", "token", "env-token-"}, {"e2e-otlp", "headers", "authorization=Bearer otlp-"},
		{"e2e-kafka", "client.properties", "sasl.password=kafka-"}} {
		out[s[0]] = s[2] + rand.Text()
		Expect(kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s[0]}, StringData: map[string]string{s[1]: out[s[0]]}})).To(Succeed())
	}
	return out
}

// withTelemetryExportEnv turns on telemetry with a headers Secret, Kafka export with a properties
// Secret, and env with a Secret-backed variable and a literal one set to mode.
func withTelemetryExportEnv(f *v1.CelldFleet, mode string) {
	f.Spec.Telemetry = &v1.TelemetrySpec{
		CollectorURL:        "http://otel-collector.observability.svc:4318",
		Egress:              v1.EgressTarget{PodLabels: map[string]string{"app.kubernetes.io/name": "opentelemetry-collector"}, Namespace: "observability"},
		HeadersSecretKeyRef: &v1.SecretKeyRef{Name: "e2e-otlp", Key: "headers"},
	}
	f.Spec.Export = &v1.ExportSpec{Sink: v1.ExportSinkKafka, Kafka: &v1.ExportKafka{
		Brokers: []string{"b-1.kafka.internal:9092", "b-2.kafka.internal:9096", "b-3.kafka.internal:9096"}, Topic: "celld.changes",
		PropertiesSecretKeyRef: &v1.SecretKeyRef{Name: "e2e-kafka", Key: "client.properties"}, Egress: v1.EgressTarget{CIDR: "10.20.0.0/16"},
	}}
	f.Spec.Env = []v1.EnvVar{{Name: "CELLD_E2E_TOKEN", SecretKeyRef: &v1.SecretKeyRef{Name: "e2e-env", Key: "token"}}, {Name: "CELLD_E2E_MODE", Value: new(mode)}}
}

func secretEnv(name, secret, k string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: k}}}
}

func asJSON(v any) string {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// expectSettled: the operator's writes about the namespace stop within a deadline (a status
// catching up with a finished roll is a write) and then stay stopped over several reconciles (one
// a second here): a settled fleet costs no write at all, and an apply that changes nothing is a
// write too.
func expectSettled(ctx context.Context, ns, what string) {
	GinkgoHelper()
	var since time.Time
	framework.EventuallyWithin(ctx, framework.Medium, func() []writeRecord {
		since = time.Now().Add(-2 * time.Second)
		return operatorWrites(ns, since)
	}).Should(BeEmpty(), "%s never stopped writing", what)
	Consistently(ctx, func() []writeRecord { return operatorWrites(ns, since) }).
		WithTimeout(3*time.Second).WithPolling(500*time.Millisecond).Should(BeEmpty(), "%s wrote", what)
}

func expectCondition(ctx context.Context, ns, name, t, want string) {
	GinkgoHelper()
	framework.EventuallyWithin(ctx, framework.Medium, func() string { return condition(ctx, ns, name, t) }).Should(Equal(want), t)
}

// object reads an object of any kind, nil when it does not exist.
func object(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	GinkgoHelper()
	u, err := framework.Cluster.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred(), "%s %s/%s", gvr.Resource, ns, name)
	return u
}

// terminating: the object exists and is being deleted.
func terminating(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) bool {
	u := object(ctx, gvr, ns, name)
	return u != nil && u.GetDeletionTimestamp() != nil
}

// hold puts a finalizer of the test's on an object, or takes it off, as a controller would to
// delay its deletion.
func hold(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, on bool) {
	GinkgoHelper()
	patch := `{"metadata":{"finalizers":null}}`
	if on {
		patch = `{"metadata":{"finalizers":["e2e.celld.eric.dev/hold"]}}`
	}
	_, err := framework.Cluster.Dynamic.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// setRouteStatus answers for the route's Gateway as a Gateway controller would, for one generation.
func setRouteStatus(ctx context.Context, ns, name string, generation int64, accepted, resolved string) {
	GinkgoHelper()
	cond := func(t, status string) map[string]any {
		return map[string]any{"type": t, "status": status, "reason": t, "message": "e2e gateway says " + status,
			"observedGeneration": generation, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	}
	patch := asJSON(map[string]any{"status": map[string]any{"parents": []any{map[string]any{
		"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public", "namespace": "edge", "sectionName": "https"},
		"controllerName": "example.net/e2e-gateway",
		"conditions":     []any{cond("Accepted", accepted), cond("ResolvedRefs", resolved)},
	}}}})
	_, err := framework.Cluster.Dynamic.Resource(gvrHTTPRoute).Namespace(ns).Patch(ctx, name+"-routing", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	Expect(err).NotTo(HaveOccurred())
}

// seen is one watch event. Revision is the object's resourceVersion, which on this single-etcd
// cluster is the etcd revision of the change, so events of different kinds compare by it.
type seen struct {
	Kind, Name string
	Type       watch.EventType
	Revision   int64
	Deleting   bool
}

type recorder struct {
	mu   sync.Mutex
	seen []seen
}

// record watches the given resources in ns from now until the spec ends.
func record(ctx context.Context, ns string, gvrs ...schema.GroupVersionResource) *recorder {
	GinkgoHelper()
	rec := &recorder{}
	for _, gvr := range gvrs {
		res := framework.Cluster.Dynamic.Resource(gvr).Namespace(ns)
		list, err := res.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					rev, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
					rec.mu.Lock()
					rec.seen = append(rec.seen, seen{Kind: u.GetKind(), Name: u.GetName(), Type: ev.Type, Revision: rev,
						Deleting: ev.Type == watch.Deleted || u.GetDeletionTimestamp() != nil})
					rec.mu.Unlock()
				}
			}
		}()
	}
	return rec
}

// first returns the revision of the earliest recorded event that matches, 0 if none.
func (r *recorder) first(match func(seen) bool) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best int64
	for _, e := range r.seen {
		if match(e) && (best == 0 || e.Revision < best) {
			best = e.Revision
		}
	}
	return best
}

// livePods are the fleet's Pods that have not finished, terminating ones included.
func livePods(ctx context.Context, ns, name string) []corev1.Pod {
	GinkgoHelper()
	list := &corev1.PodList{}
	Expect(kube().List(ctx, list, client.InNamespace(ns), client.HasLabels{v1.LabelFleetUID})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, name+"-") && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func memberUIDs(ctx context.Context, ns, name string, n int) map[int]types.UID {
	GinkgoHelper()
	out := map[int]types.UID{}
	for i := range n {
		out[i] = podUID(ctx, ns, fmt.Sprintf("%s-%d", name, i))
		Expect(out[i]).NotTo(BeEmpty())
	}
	return out
}

// rollAll waits until every member runs in a new Pod and returns the ordinals in the order they
// were replaced. It fails at once when two members are down together or invariant reports a
// violation.
func rollAll(ctx context.Context, ns, name string, n int, before map[int]types.UID, invariant func(context.Context) string) []int {
	GinkgoHelper()
	var replaced []int
	framework.EventuallyWithin(ctx, 4*framework.Medium, func(g Gomega) {
		if invariant != nil {
			if v := invariant(ctx); v != "" {
				StopTrying(v).Now()
			}
		}
		pods := map[string]corev1.Pod{}
		for _, p := range livePods(ctx, ns, name) {
			pods[p.Name] = p
		}
		down := 0
		for i := n - 1; i >= 0; i-- {
			p, ok := pods[fmt.Sprintf("%s-%d", name, i)]
			if !ok || !framework.IsReady(&p) || p.DeletionTimestamp != nil {
				down++
			}
			if !containsInt(replaced, i) && p.UID != before[i] {
				replaced = append(replaced, i)
			}
		}
		if down > 1 {
			StopTrying(fmt.Sprintf("%d members were down at once during a roll", down)).Now()
		}
		g.Expect(replaced).To(HaveLen(n))
	}).Should(Succeed())
	return replaced
}

// meshInvariant: whenever the fleet's Pods are a mix of proxied and unproxied ones, the
// PeerAuthentication exists and the 8081 rule requires no identity. The policies are read before
// the Pods, so a Pod set seen mixed was already mixed when the policies were read.
func meshInvariant(ns, name string) func(context.Context) string {
	return func(ctx context.Context) string {
		pa := object(ctx, gvrPeerAuthn, ns, name+"-mesh")
		ap := object(ctx, gvrAuthz, ns, name+"-mesh")
		proxied, plain := 0, 0
		for _, p := range livePods(ctx, ns, name) {
			if children.HasProxy(&p.Spec) {
				proxied++
			} else {
				plain++
			}
		}
		switch {
		case proxied == 0 || plain == 0:
			return ""
		case pa == nil:
			return fmt.Sprintf("members are mixed (%d with a proxy, %d without) but PeerAuthentication %s-mesh is missing", proxied, plain, name)
		case ap == nil || peerRule(ap) == nil:
			return fmt.Sprintf("members are mixed but AuthorizationPolicy %s-mesh or its 8081 rule is missing", name)
		case peerRule(ap)["from"] != nil:
			return fmt.Sprintf("members are mixed but the 8081 rule still requires an identity: %v", peerRule(ap)["from"])
		}
		return ""
	}
}

// expectPeerAuthenticationFirst: the PeerAuthentication was created before the first member rolled.
func expectPeerAuthenticationFirst(rec *recorder, name string) {
	GinkgoHelper()
	created := rec.first(func(e seen) bool {
		return e.Kind == "PeerAuthentication" && e.Name == name+"-mesh" && e.Type == watch.Added
	})
	Expect(created).NotTo(BeZero(), "no PeerAuthentication appeared for the transition")
	Expect(rec.first(func(e seen) bool { return e.Kind == "Pod" && e.Deleting })).To(BeNumerically(">", created),
		"a member rolled before the PeerAuthentication existed")
}

// peerRule is the AuthorizationPolicy rule for port 8081.
func peerRule(ap *unstructured.Unstructured) map[string]any {
	rules, _, _ := unstructured.NestedSlice(ap.Object, "spec", "rules")
	for _, r := range rules {
		if m, _ := r.(map[string]any); strings.Contains(fmt.Sprint(m["to"]), "8081") {
			return m
		}
	}
	return nil
}

func egressPorts(ctx context.Context, ns, name string) []int32 {
	GinkgoHelper()
	np := &networkingv1.NetworkPolicy{}
	Expect(kube().Get(ctx, key(ns, name), np)).To(Succeed())
	var out []int32
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			out = append(out, p.Port.IntVal)
		}
	}
	return out
}
