package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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

// Helpers of the networking specs.

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

// expectOperatorOwned checks a child's ownership marks: the fleet UID label, no owner reference
// the garbage collector could follow to delete it before the members are gone, and the
// operator as the only writer of its fields (status subresource writers aside).
func expectOperatorOwned(obj client.Object, f *v1.CelldFleet) {
	GinkgoHelper()
	what := fmt.Sprintf("%T %s", obj, obj.GetName())
	Expect(obj.GetLabels()).To(HaveKeyWithValue(v1.LabelFleetUID, string(f.UID)), what)
	Expect(obj.GetOwnerReferences()).NotTo(ContainElement(HaveField("UID", f.UID)), "%s: a cascade would delete it with the fleet", what)
	written := false
	for _, m := range obj.GetManagedFields() {
		if m.Subresource == "" {
			Expect(m.Manager).To(Equal("celld-operator"), "%s has fields managed by %s", what, m.Manager)
			written = true
		}
	}
	Expect(written).To(BeTrue(), "%s has no fields managed by the operator", what)
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
		Egress:              v1.EgressTarget{PodLabels: map[string]v1.LabelValue{"app.kubernetes.io/name": "opentelemetry-collector"}, Namespace: "observability"},
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

// await is first for an event that must have happened: watches deliver asynchronously, so an
// event may arrive after the read that proved its change. It fails after framework.Short.
func (r *recorder) await(ctx context.Context, what string, match func(seen) bool) int64 {
	GinkgoHelper()
	var rev int64
	framework.EventuallyWithin(ctx, framework.Short, func() int64 {
		rev = r.first(match)
		return rev
	}).ShouldNot(BeZero(), "the recorder never saw %s", what)
	return rev
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
			// a member counts as replaced once its new Pod exists: a deleted one not yet recreated
			// (no Pod, zero UID) has not been replaced yet
			if ok && !containsInt(replaced, i) && p.UID != before[i] {
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
	created := rec.await(context.Background(), "the PeerAuthentication of the transition created", func(e seen) bool {
		return e.Kind == "PeerAuthentication" && e.Name == name+"-mesh" && e.Type == watch.Added
	})
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
