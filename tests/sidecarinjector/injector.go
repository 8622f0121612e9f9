// Package sidecarinjector stands in for Istio's sidecar injector on a test cluster that has no
// Istio: a mutating admission webhook served on loopback by the test process, registered with
// the API server through a MutatingWebhookConfiguration. Every Pod created in one of its
// namespaces with sidecar.istio.io/inject=true gets an istio-proxy sidecar (a native sidecar or
// a plain container) whose environment names the istiod it talks to, as Istio's injector writes
// it.
//
// It is plain Go (errors and contexts, an explicit Stop), so the Ginkgo e2e suites
// (tests/e2e/framework wraps it) and plain `go test` harnesses such as the fault campaign
// (tests/chaos) share it.
package sidecarinjector

import (
	"cmp"
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

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ProxyContainer is the name Istio's injector gives its sidecar.
const ProxyContainer = "istio-proxy"

// InjectLabel is the Pod label Istio's injector selects on.
const InjectLabel = "sidecar.istio.io/inject"

// DefaultControlPlane is the namespace of the istiod injected proxies talk to unless
// SetControlPlane changes it.
const DefaultControlPlane = "istio-system"

// Style is how the injector adds the proxy.
type Style int

const (
	// NativeSidecar adds istio-proxy as an init container with restartPolicy Always, as Istio
	// does with sidecar.istio.io/nativeSidecar (Kubernetes 1.29+).
	NativeSidecar Style = iota
	// PlainSidecar adds istio-proxy as an ordinary container, as Istio did before native sidecars.
	PlainSidecar
)

// Options configures an injector.
type Options struct {
	// Namespaces are the namespaces whose Pods the injector sees (at least one).
	Namespaces []string
	// Style is how the proxy is added.
	Style Style
	// Name is the MutatingWebhookConfiguration's name; it must not be in use. Default:
	// test-sidecar-injector-FIRST-NAMESPACE.
	Name string
	// FailurePolicy of the webhook. Default Ignore. Istio's own injector uses Fail: a Pod
	// the injector could not answer for is refused (its workload controller retries) rather
	// than created without a proxy the fleet then waits for forever.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// ReadyTimeout bounds how long Start waits for the API server to call the injector in
	// every namespace. Default 45 s.
	ReadyTimeout time.Duration
}

// Injector is a running injector. Stop it exactly once (Stop is safe to call again).
type Injector struct {
	opts    Options
	clients kubernetes.Interface
	srv     *http.Server
	stop    sync.Once
	stopErr error

	mu       sync.Mutex
	injected []types.NamespacedName // Pods that got a proxy, first admission first (dry runs excluded)
	admitted int                    // Pod creates that got a proxy (dry runs excluded)
	// controlPlane is the namespace of the istiod this injector stands in for.
	controlPlane string
}

// Start serves the injector, registers it with the API server and returns once the API server
// calls it for a Pod of every namespace in opts. On error nothing is left registered or
// served.
func Start(ctx context.Context, clients kubernetes.Interface, opts Options) (*Injector, error) {
	if len(opts.Namespaces) == 0 {
		return nil, errors.New("the injector needs at least one namespace")
	}
	if opts.Name == "" {
		opts.Name = "test-sidecar-injector-" + opts.Namespaces[0]
	}
	if opts.FailurePolicy == "" {
		opts.FailurePolicy = admissionregistrationv1.Ignore
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 45 * time.Second
	}
	in := &Injector{opts: opts, clients: clients}
	caPEM, serving, err := webhookCertificates()
	if err != nil {
		return nil, fmt.Errorf("generate the injector's certificates: %w", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("listen on loopback: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/inject", in.serve)
	in.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = in.srv.Serve(ln) }()

	if _, err := clients.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, in.configuration(ln.Addr().String(), caPEM), metav1.CreateOptions{}); err != nil {
		_ = in.srv.Close()
		return nil, fmt.Errorf("register the injector: %w", err)
	}
	if err := in.waitCalled(ctx); err != nil {
		return nil, errors.Join(err, in.Stop(context.WithoutCancel(ctx)))
	}
	return in, nil
}

func (in *Injector) configuration(addr string, caPEM []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	url := fmt.Sprintf("https://%s/inject", addr)
	none := admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: in.opts.Name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "sidecar-injector.tests.celld.eric.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           new(in.opts.FailurePolicy),
			TimeoutSeconds:          new(int32(5)),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(in.opts.Namespaces),
			}}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{InjectLabel: "true"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: new(admissionregistrationv1.NamespacedScope),
				},
			}},
		}},
	}
}

// waitCalled polls until the API server calls the injector in every namespace. The API server
// picks webhook configurations up asynchronously: a dry-run Pod create (allowed because the
// webhook declares no side effects) shows when the injector is live.
func (in *Injector) waitCalled(ctx context.Context) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "injector-probe-", Labels: map[string]string{InjectLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example.invalid/probe:1"}}},
	}
	for _, ns := range in.opts.Namespaces {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, in.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := in.clients.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case err != nil:
				last = err
			case !HasProxy(&got.Spec):
				last = errors.New("the API server does not call the injector yet")
			default:
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("the injector is not called for Pods of namespace %s: %w (last: %v)", ns, err, last)
		}
	}
	return nil
}

// Stop unregisters the injector, then stops serving: with FailurePolicy Fail, a Pod create
// that meets the webhook in between would be refused. It returns the unregistration's error
// (a configuration already gone is not one).
func (in *Injector) Stop(ctx context.Context) error {
	in.stop.Do(func() {
		err := in.clients.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, in.opts.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			in.stopErr = fmt.Errorf("unregister the injector %s: %w", in.opts.Name, err)
		}
		_ = in.srv.Close()
	})
	return in.stopErr
}

// Namespaces returns the namespaces the injector serves.
func (in *Injector) Namespaces() []string { return slices.Clone(in.opts.Namespaces) }

// ControlPlane is the namespace of the istiod the injected proxies talk to
// (DefaultControlPlane unless SetControlPlane changed it).
func (in *Injector) ControlPlane() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.controlPlane == "" {
		return DefaultControlPlane
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

// Admissions counts the Pod creates the injector gave a proxy, in every namespace.
func (in *Injector) Admissions() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.admitted
}

// Injected returns the Pods the injector gave a proxy, each once, in the order of their first
// admission. A create the API server then refused (a workload controller retrying
// AlreadyExists) is admitted, and counted, all the same.
func (in *Injector) Injected() []types.NamespacedName {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.injected)
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
	if err := json.Unmarshal(review.Request.Object.Raw, pod); err == nil && !HasProxy(&pod.Spec) {
		resp.Patch, _ = json.Marshal(in.patch(pod))
		resp.PatchType = new(admissionv1.PatchTypeJSONPatch)
		if review.Request.DryRun == nil || !*review.Request.DryRun {
			// a Pod created by a workload controller has only a generated name in the request
			name := types.NamespacedName{Namespace: review.Request.Namespace, Name: cmp.Or(pod.Name, review.Request.Name)}
			in.mu.Lock()
			in.admitted++
			if !slices.Contains(in.injected, name) {
				in.injected = append(in.injected, name)
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
	if in.opts.Style == PlainSidecar {
		return []jsonPatchOp{status, {Op: "add", Path: "/spec/containers/-", Value: proxy}}
	}
	proxy.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	if len(pod.Spec.InitContainers) == 0 {
		return []jsonPatchOp{status, {Op: "add", Path: "/spec/initContainers", Value: []corev1.Container{proxy}}}
	}
	// Istio starts the proxy before any other init container.
	return []jsonPatchOp{status, {Op: "add", Path: "/spec/initContainers/0", Value: proxy}}
}

// HasProxy reports whether a Pod spec runs an Istio proxy, as the operator counts one: an
// istio-proxy container, or an istio-proxy init container that keeps running (restartPolicy
// Always). It is the test side's own statement of it, not the operator's code.
func HasProxy(spec *corev1.PodSpec) bool {
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
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test sidecar injector CA"},
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
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
