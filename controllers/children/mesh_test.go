package children

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

func pod(phase corev1.PodPhase, terminating bool, containers, sidecars []string) corev1.Pod {
	p := corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{}
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n})
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, n := range sidecars {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, RestartPolicy: &always})
	}
	return p
}

func TestMeshMixedLooksAtRealProxies(t *testing.T) {
	plainInit := pod(corev1.PodRunning, false, []string{"celld"}, nil)
	plainInit.Spec.InitContainers = []corev1.Container{{Name: "istio-proxy"}} // runs to completion: no proxy
	labelledOnly := pod(corev1.PodRunning, false, []string{"celld"}, nil)
	labelledOnly.Labels = map[string]string{"sidecar.istio.io/inject": "true"}
	cases := []struct {
		name             string
		pods             []corev1.Pod
		want, liveMeshed bool
		mixed            bool
	}{
		{"every member runs a classic sidecar", []corev1.Pod{pod(corev1.PodRunning, false, []string{"celld", "istio-proxy"}, nil)}, true, true, false},
		{"every member runs a native sidecar", []corev1.Pod{pod(corev1.PodRunning, false, []string{"celld"}, []string{"istio-proxy"})}, true, true, false},
		{"an init container named istio-proxy without restartPolicy Always is no proxy", []corev1.Pod{plainInit}, true, true, true},
		{"an injection label without a proxy is not membership", []corev1.Pod{labelledOnly}, true, true, true},
		{"the template is not meshed yet", []corev1.Pod{pod(corev1.PodRunning, false, []string{"celld", "istio-proxy"}, nil)}, true, false, true},
		{"leaving: a terminating member still runs its proxy", []corev1.Pod{pod(corev1.PodRunning, false, []string{"celld"}, nil), pod(corev1.PodRunning, true, []string{"celld"}, []string{"istio-proxy"})}, false, false, true},
		{"leaving: the last proxy is gone", []corev1.Pod{pod(corev1.PodRunning, false, []string{"celld"}, nil)}, false, false, false},
		{"a finished Pod does not count", []corev1.Pod{pod(corev1.PodSucceeded, false, []string{"celld", "istio-proxy"}, nil)}, false, false, false},
		{"no Pods and a matching template", nil, true, true, false},
	}
	for _, c := range cases {
		if got := MeshMixed(c.pods, c.want, c.liveMeshed); got != c.mixed {
			t.Errorf("%s: MeshMixed = %v, want %v", c.name, got, c.mixed)
		}
	}
}

func principals(t *testing.T, ap *unstructured.Unstructured) (peerFrom bool, appRule bool) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(ap.Object, "spec", "rules")
	for _, r := range rules {
		m := r.(map[string]any)
		ports, _, _ := unstructured.NestedSlice(m["to"].([]any)[0].(map[string]any), "operation", "ports")
		switch ports[0] {
		case "8081":
			_, peerFrom = m["from"]
		case "8080":
			appRule = true
		}
	}
	return peerFrom, appRule
}

func hasIstiodEgress(t *testing.T, np *unstructured.Unstructured) bool {
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
	return slices.ContainsFunc(rules, func(r any) bool {
		ports, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
		return len(ports) == 1 && ports[0].(map[string]any)["port"] == int64(15012)
	})
}

func TestMeshTransitionsAddAndRemoveThePeerAuthentication(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t, c)
	f := fleetIn(t, "bucket", ns)
	mesh := f.Name + "-mesh"
	facts := testFacts()
	converge(t, c, f, facts)
	if live(t, c, gvkAuthorizationPolicy, ns, mesh) != nil {
		t.Fatal("a fleet outside the mesh got an AuthorizationPolicy")
	}

	// Joining: the template asks for the mesh, members do not have proxies yet.
	f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{ControlPlaneNamespace: "istio-system", ApplicationAccess: v1.ApplicationAccessPolicies}}
	f.Annotations = map[string]string{v1.AnnotationIstioControlPlane: "istio-system"}
	facts.MeshMixed = true
	converge(t, c, f, facts)
	mustExist(t, c, gvkPeerAuthentication, ns, mesh)
	if from, app := principals(t, mustExist(t, c, gvkAuthorizationPolicy, ns, mesh)); from || app {
		t.Errorf("while mixed the peer rule must admit any source (from=%v) and Policies opens no 8080 rule (app=%v)", from, app)
	}
	if !hasIstiodEgress(t, mustExist(t, c, gvkNetworkPolicy, ns, f.Name)) {
		t.Error("a joining fleet has no istiod egress")
	}

	// Every member runs a proxy: the identity rule returns, the PeerAuthentication goes.
	facts.MeshMixed = false
	res := converge(t, c, f, facts)
	if !slices.Contains(res.Deleted, "PeerAuthentication/"+mesh) {
		t.Errorf("settled mesh: deleted %v; want the PeerAuthentication", res.Deleted)
	}
	if from, _ := principals(t, mustExist(t, c, gvkAuthorizationPolicy, ns, mesh)); !from {
		t.Error("a settled meshed fleet's peer rule must require the fleet's and operator's identities")
	}

	// Leaving: proxies remain, so the relaxed policy, the PeerAuthentication and istiod egress stay.
	f.Spec.Mesh = nil
	facts.MeshMixed = true
	converge(t, c, f, facts)
	mustExist(t, c, gvkPeerAuthentication, ns, mesh)
	if from, app := principals(t, mustExist(t, c, gvkAuthorizationPolicy, ns, mesh)); from || !app {
		t.Errorf("leaving with proxies: from=%v app=%v; want no identity requirement and 8080 open as outside the mesh", from, app)
	}
	if !hasIstiodEgress(t, mustExist(t, c, gvkNetworkPolicy, ns, f.Name)) {
		t.Error("old sidecars lost istiod egress before the last proxy exited")
	}

	// The last proxy is gone: both mesh objects are deleted and istiod egress closes.
	facts.MeshMixed = false
	converge(t, c, f, facts)
	eventually(t, "the mesh objects are gone", func() (bool, error) {
		a, err := getLive(context.Background(), c, gvkAuthorizationPolicy, ns, mesh)
		if err != nil {
			return false, err
		}
		p, err := getLive(context.Background(), c, gvkPeerAuthentication, ns, mesh)
		return a == nil && p == nil, err
	})
	if hasIstiodEgress(t, mustExist(t, c, gvkNetworkPolicy, ns, f.Name)) {
		t.Error("istiod egress stayed open after the fleet left the mesh")
	}
}

func TestProxyControlPlanesReadsTheInjectedDiscoveryAddress(t *testing.T) {
	proxy := func(env ...corev1.EnvVar) corev1.Pod {
		return corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld"}, {Name: istioProxy, Env: env}}}}
	}
	native := func(env ...corev1.EnvVar) corev1.Pod {
		always := corev1.ContainerRestartPolicyAlways
		return corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: istioProxy, RestartPolicy: &always, Env: env}}}}
	}
	config := func(addr string) corev1.EnvVar {
		return corev1.EnvVar{Name: "PROXY_CONFIG", Value: `{"discoveryAddress":"` + addr + `","proxyMetadata":{}}`}
	}
	finished := proxy(config("istiod.istio-old.svc:15012"))
	finished.Status.Phase = corev1.PodSucceeded
	for _, c := range []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"no proxy", []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "celld"}}}}}, nil},
		{"PROXY_CONFIG", []corev1.Pod{proxy(config("istiod.istio-system.svc:15012"))}, []string{"istio-system"}},
		{"a revision's istiod, full domain", []corev1.Pod{native(config("istiod-1-22.istio-canary.svc.cluster.local:15012"))}, []string{"istio-canary"}},
		{"CA_ADDR when PROXY_CONFIG names none", []corev1.Pod{proxy(corev1.EnvVar{Name: "CA_ADDR", Value: "istiod.mesh-ca.svc:15012"})}, []string{"mesh-ca"}},
		{"PROXY_CONFIG wins over CA_ADDR", []corev1.Pod{proxy(corev1.EnvVar{Name: "CA_ADDR", Value: "istiod.mesh-ca.svc:15012"}, config("istiod.istio-system.svc:15012"))}, []string{"istio-system"}},
		{"two control planes, sorted, once each", []corev1.Pod{proxy(config("istiod.istio-system.svc:15012")), proxy(config("istiod.istio-canary.svc:15012")), proxy(config("istiod.istio-system.svc:15012"))}, []string{"istio-canary", "istio-system"}},
		{"an IP or a short name names no namespace", []corev1.Pod{proxy(config("10.0.0.7:15012")), proxy(config("istiod:15012"))}, nil},
		{"a finished Pod runs no proxy", []corev1.Pod{finished}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ProxyControlPlanes(c.pods); !slices.Equal(got, c.want) {
				t.Fatalf("ProxyControlPlanes = %v, want %v", got, c.want)
			}
		})
	}
}
