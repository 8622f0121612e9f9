package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:revive
	. "github.com/onsi/gomega"    //nolint:revive

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProxyContainer is the name Istio's injector gives its sidecar.
const ProxyContainer = "istio-proxy"

// InjectLabel is the Pod label Istio's injector selects on.
const InjectLabel = "sidecar.istio.io/inject"

// SidecarStyle is how the injector adds the proxy.
type SidecarStyle int

const (
	// NativeSidecar adds istio-proxy as an init container with restartPolicy Always, as Istio
	// does with sidecar.istio.io/nativeSidecar (Kubernetes 1.29+).
	NativeSidecar SidecarStyle = iota
	// PlainSidecar adds istio-proxy as an ordinary container, as Istio did before native sidecars.
	PlainSidecar
)

// Injector is a mutating admission webhook served on loopback that stands in for Istio's sidecar
// injector in one namespace: every Pod created there with sidecar.istio.io/inject=true gets an
// istio-proxy sidecar. It registers itself with a MutatingWebhookConfiguration (caBundle from a
// CA generated here, clientConfig.url on 127.0.0.1, failurePolicy Ignore, sideEffects None) and
// removes it, and stops serving, when the spec ends.
type Injector struct {
	Namespace string
	style     SidecarStyle

	mu       sync.Mutex
	injected []string // names of the Pods that got a proxy, first admission first (dry runs excluded)
	admitted int      // Pod creates that got a proxy (dry runs excluded)
	// controlPlane is the namespace of the istiod this injector stands in for.
	controlPlane string
}

// ControlPlane is the namespace of the istiod the injected proxies talk to (istio-system
// unless SetControlPlane changed it).
func (in *Injector) ControlPlane() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.controlPlane == "" {
		return "istio-system"
	}
	return in.controlPlane
}

// SetControlPlane makes the Pods injected from now on talk to the istiod in namespace ns, as a
// move to another Istio revision or control plane does.
func (in *Injector) SetControlPlane(ns string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.controlPlane = ns
}

// Admissions counts the Pod creates the injector gave a proxy.
func (in *Injector) Admissions() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.admitted
}

// Injected returns the names of the Pods the injector gave a proxy, each once, in the order of
// their first admission. A create the API server then refused (a workload controller retrying
// AlreadyExists) is admitted, and counted, all the same.
func (in *Injector) Injected() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.injected...)
}

// StartInjector serves the injector for namespace ns and returns once the API server calls it.
func StartInjector(ctx context.Context, ns string, style SidecarStyle) *Injector {
	GinkgoHelper()
	in := &Injector{Namespace: ns, style: style}
	caPEM, serving, err := webhookCertificates()
	Expect(err).NotTo(HaveOccurred(), "generate the injector's certificates")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12})
	Expect(err).NotTo(HaveOccurred(), "listen on loopback")
	mux := http.NewServeMux()
	mux.HandleFunc("/inject", in.serve)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(func() { _ = srv.Close() })

	url := fmt.Sprintf("https://%s/inject", ln.Addr().String())
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-istio-injector-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "sidecar-injector.e2e.celld.eric.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			TimeoutSeconds:          new(int32(5)),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{InjectLabel: "true"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: new(admissionregistrationv1.NamespacedScope),
				},
			}},
		}},
	}
	hooks := Cluster.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err = hooks.Create(ctx, cfg, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "register the injector")
	DeferCleanup(func(ctx context.Context) { _ = hooks.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })

	// The API server picks webhook configurations up asynchronously: a dry-run Pod create
	// (allowed because the webhook declares no side effects) shows when the injector is live.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "injector-probe-", Labels: map[string]string{InjectLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example.invalid/probe:1"}}},
	}
	EventuallyWithin(ctx, Medium, func(g Gomega) {
		got, err := Cluster.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(hasProxy(&got.Spec)).To(BeTrue(), "the API server does not call the injector yet")
	}).Should(Succeed())
	return in
}

// serve answers one AdmissionReview: a Pod without a proxy gets one by JSON patch.
func (in *Injector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	review := &admissionv1.AdmissionReview{}
	if err == nil {
		err = json.Unmarshal(body, review)
	}
	if err == nil && review.Request == nil {
		err = errors.New("AdmissionReview without a request")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(review.Request.Object.Raw, pod); err == nil && !hasProxy(&pod.Spec) {
		resp.Patch, _ = json.Marshal(in.patch(pod))
		resp.PatchType = new(admissionv1.PatchTypeJSONPatch)
		if review.Request.DryRun == nil || !*review.Request.DryRun {
			in.mu.Lock()
			in.admitted++
			if !slices.Contains(in.injected, pod.Name) {
				in.injected = append(in.injected, pod.Name)
			}
			in.mu.Unlock()
		}
	}
	out, _ := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

func (in *Injector) patch(pod *corev1.Pod) []jsonPatchOp {
	proxy := corev1.Container{
		Name:  ProxyContainer,
		Image: "istio/proxyv2:1.24.0",
		Args:  []string{"proxy", "sidecar"},
		// As Istio's injector does: the proxy's istiod, where it gets xDS and certificates.
		Env:   []corev1.EnvVar{{Name: "PROXY_CONFIG", Value: fmt.Sprintf(`{"discoveryAddress":"istiod.%s.svc:15012"}`, in.ControlPlane())}},
		Ports: []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090, Protocol: corev1.ProtocolTCP}},
	}
	status := jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`}}
	if len(pod.Annotations) > 0 {
		status = jsonPatchOp{Op: "add", Path: "/metadata/annotations/sidecar.istio.io~1status", Value: `{"containers":["istio-proxy"]}`}
	}
	if in.style == PlainSidecar {
		return []jsonPatchOp{status, {Op: "add", Path: "/spec/containers/-", Value: proxy}}
	}
	proxy.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	if len(pod.Spec.InitContainers) == 0 {
		return []jsonPatchOp{status, {Op: "add", Path: "/spec/initContainers", Value: []corev1.Container{proxy}}}
	}
	// Istio starts the proxy before any other init container.
	return []jsonPatchOp{status, {Op: "add", Path: "/spec/initContainers/0", Value: proxy}}
}

// hasProxy mirrors what the operator counts as a proxy: an istio-proxy container, or an
// istio-proxy init container that keeps running (restartPolicy Always).
func hasProxy(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if c.Name == ProxyContainer {
			return true
		}
	}
	for _, c := range spec.InitContainers {
		if c.Name == ProxyContainer && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// webhookCertificates returns a fresh CA (PEM, for caBundle) and a serving certificate for
// 127.0.0.1 signed by it.
func webhookCertificates() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e sidecar injector CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: nil}, nil
}
