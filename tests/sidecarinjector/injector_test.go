package sidecarinjector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/tests/apiserver"
)

var clients kubernetes.Interface

// TestMain starts one etcd and kube-apiserver (bin/, built by make tools; a missing binary is
// a failure, never a skip): the API server must really call the webhook.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cfg, stop, err := apiserver.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests/sidecarinjector:", err)
		return 1
	}
	defer stop()
	clients = kubernetes.NewForConfigOrDie(cfg)
	return m.Run()
}

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := clients.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inject-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// createPod creates a Pod (no scheduler runs: it stays Pending) and returns it as admitted.
func createPod(t *testing.T, ns, name string, inject bool, annotations map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "example.invalid/setup:1"}},
			Containers:     []corev1.Container{{Name: "celld", Image: "example.invalid/celld:1"}},
		},
	}
	if inject {
		p.Labels = map[string]string{InjectLabel: "true"}
	}
	got, err := clients.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return got
}

func discoveryAddress(t *testing.T, c corev1.Container) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == "PROXY_CONFIG" {
			var pc struct {
				DiscoveryAddress string `json:"discoveryAddress"`
			}
			if err := json.Unmarshal([]byte(e.Value), &pc); err != nil {
				t.Fatal(err)
			}
			return pc.DiscoveryAddress
		}
	}
	return ""
}

func TestTheInjectorServesEveryNamespaceItIsGivenAndNoOther(t *testing.T) {
	a, b, other := namespace(t), namespace(t), namespace(t)
	in, err := Start(t.Context(), clients, Options{Namespaces: []string{a, b}, Name: "inject-" + a, FailurePolicy: admissionregistrationv1.Fail})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })

	pa := createPod(t, a, "m-0", true, nil)
	in.SetControlPlane("istio-canary")
	pb := createPod(t, b, "m-0", true, map[string]string{"keep": "me"})
	for _, p := range []*corev1.Pod{pa, pb} {
		if !HasProxy(&p.Spec) {
			t.Fatalf("pod %s/%s got no proxy: %+v", p.Namespace, p.Name, p.Spec.InitContainers)
		}
		// a native sidecar goes before every other init container, and the status annotation
		// joins the Pod's own
		if first := p.Spec.InitContainers[0]; first.Name != ProxyContainer || len(p.Spec.InitContainers) != 2 {
			t.Fatalf("pod %s/%s: the proxy is not the first init container: %+v", p.Namespace, p.Name, p.Spec.InitContainers)
		}
		if p.Annotations["sidecar.istio.io/status"] == "" {
			t.Fatalf("pod %s/%s has no injection status: %v", p.Namespace, p.Name, p.Annotations)
		}
	}
	if pb.Annotations["keep"] != "me" {
		t.Fatalf("the injector dropped the Pod's annotations: %v", pb.Annotations)
	}
	if got := discoveryAddress(t, pa.Spec.InitContainers[0]); got != "istiod.istio-system.svc:15012" {
		t.Fatalf("the first proxy talks to %q", got)
	}
	if got := discoveryAddress(t, pb.Spec.InitContainers[0]); got != "istiod.istio-canary.svc:15012" {
		t.Fatalf("a proxy injected after SetControlPlane talks to %q", got)
	}

	if p := createPod(t, a, "plain", false, nil); HasProxy(&p.Spec) {
		t.Fatal("a Pod without the inject label got a proxy")
	}
	if p := createPod(t, other, "m-0", true, nil); HasProxy(&p.Spec) {
		t.Fatal("a Pod of a namespace the injector does not serve got a proxy")
	}
	want := []types.NamespacedName{{Namespace: a, Name: "m-0"}, {Namespace: b, Name: "m-0"}}
	if got := in.Injected(); !slices.Equal(got, want) || in.Admissions() != 2 {
		t.Fatalf("Injected() = %v, Admissions() = %d; want %v and 2 (the readiness probes are dry runs and do not count)", got, in.Admissions(), want)
	}

	if err := in.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := in.Stop(t.Context()); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	if _, err := clients.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "inject-"+a, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the configuration outlived Stop: %v", err)
	}
}

func TestAPlainSidecarIsAContainer(t *testing.T) {
	ns := namespace(t)
	in, err := Start(t.Context(), clients, Options{Namespaces: []string{ns}, Style: PlainSidecar})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	p := createPod(t, ns, "m-0", true, nil)
	if len(p.Spec.Containers) != 2 || p.Spec.Containers[1].Name != ProxyContainer || len(p.Spec.InitContainers) != 1 {
		t.Fatalf("want istio-proxy as a second container, the init containers untouched: %+v %+v", p.Spec.Containers, p.Spec.InitContainers)
	}
}

func TestHasProxyCountsOnlyARunningProxy(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range []struct {
		spec corev1.PodSpec
		want bool
	}{
		{corev1.PodSpec{Containers: []corev1.Container{{Name: "celld"}, {Name: ProxyContainer}}}, true},
		{corev1.PodSpec{InitContainers: []corev1.Container{{Name: ProxyContainer, RestartPolicy: &always}}}, true},
		{corev1.PodSpec{InitContainers: []corev1.Container{{Name: ProxyContainer}}}, false}, // runs to completion first
		{corev1.PodSpec{Containers: []corev1.Container{{Name: "celld"}}}, false},
	} {
		if got := HasProxy(&c.spec); got != c.want {
			t.Errorf("HasProxy(%+v) = %v, want %v", c.spec, got, c.want)
		}
	}
}

func TestStartFailsCleanly(t *testing.T) {
	if _, err := Start(t.Context(), clients, Options{}); err == nil {
		t.Fatal("Start without a namespace succeeded")
	}
	ns := namespace(t)
	first, err := Start(t.Context(), clients, Options{Namespaces: []string{ns}, Name: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop(context.Background()) })
	if _, err := Start(t.Context(), clients, Options{Namespaces: []string{ns}, Name: "taken"}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("a second injector under a taken name: %v, want AlreadyExists", err)
	}
	// never called (no such namespace): Start gives up after ReadyTimeout and unregisters
	_, err = Start(t.Context(), clients, Options{Namespaces: []string{"no-such-namespace"}, Name: "never-called", ReadyTimeout: time.Second})
	if err == nil {
		t.Fatal("Start returned an injector the API server never called")
	}
	if _, err := clients.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "never-called", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a failed Start left its configuration registered: %v", err)
	}
}
