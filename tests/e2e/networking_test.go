package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/controllers/children"
	"github.com/celld/celld-operator/tests/e2e/framework"
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
			// The fleet's other children may have been created beside the foreign Service (its
			// create is what found it); they are the fleet's own.
			if np := (&networkingv1.NetworkPolicy{}); kube().Get(ctx, key(ns, name), np) == nil {
				g.Expect(np.Labels).To(HaveKeyWithValue(v1.LabelFleetUID, string(getFleet(ctx, ns, name).UID)), "a NetworkPolicy at the fleet's name that is not the fleet's")
			}
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
		routeGone := rec.await(ctx, "the HTTPRoute deleted", func(e seen) bool { return e.Kind == "HTTPRoute" && e.Type == watch.Deleted })
		ingressAdded := rec.await(ctx, "the Ingress created", func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Added })
		Expect(ingressAdded).To(BeNumerically(">", routeGone), "the Ingress was created before the HTTPRoute had disappeared")
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
		ingressGone := rec.await(ctx, "the Ingress deleted", func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Deleted })
		Expect(rec.await(ctx, "the routing policy deleted", func(e seen) bool {
			return e.Kind == "NetworkPolicy" && e.Name == name+"-routing" && e.Type == watch.Deleted
		})).To(BeNumerically(">", ingressGone), "the routing policy went before its route")
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
		closed := rec.await(ctx, "the Ingress deleted", func(e seen) bool { return e.Kind == "Ingress" && e.Type == watch.Deleted })
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
		opened := rec.await(ctx, "the fleet policy modified", func(e seen) bool { return e.Kind == "NetworkPolicy" && e.Name == name && e.Type == watch.Modified })
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
