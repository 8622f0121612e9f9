package framework

import (
	"context"

	. "github.com/onsi/ginkgo/v2" //nolint:revive
	. "github.com/onsi/gomega"    //nolint:revive

	"github.com/celld/celld-operator/tests/sidecarinjector"
)

// ProxyContainer is the name Istio's injector gives its sidecar.
const ProxyContainer = sidecarinjector.ProxyContainer

// InjectLabel is the Pod label Istio's injector selects on.
const InjectLabel = sidecarinjector.InjectLabel

// SidecarStyle is how the injector adds the proxy.
type SidecarStyle = sidecarinjector.Style

const (
	// NativeSidecar adds istio-proxy as an init container with restartPolicy Always.
	NativeSidecar = sidecarinjector.NativeSidecar
	// PlainSidecar adds istio-proxy as an ordinary container.
	PlainSidecar = sidecarinjector.PlainSidecar
)

// Injector is the spec's stand-in for Istio's sidecar injector in one namespace
// (tests/sidecarinjector): every Pod created there with sidecar.istio.io/inject=true gets an
// istio-proxy sidecar.
type Injector struct {
	*sidecarinjector.Injector
	Namespace string
}

// Injected returns the names of the Pods of the namespace the injector gave a proxy, each
// once, in the order of their first admission.
func (in *Injector) Injected() []string {
	var out []string
	for _, p := range in.Injector.Injected() {
		if p.Namespace == in.Namespace {
			out = append(out, p.Name)
		}
	}
	return out
}

// StartInjector serves the injector for namespace ns and returns once the API server calls it;
// it is unregistered and stops serving when the spec ends.
func StartInjector(ctx context.Context, ns string, style SidecarStyle) *Injector {
	GinkgoHelper()
	in, err := sidecarinjector.Start(ctx, Cluster.Client, sidecarinjector.Options{
		Namespaces: []string{ns}, Style: style, Name: "e2e-istio-injector-" + ns, ReadyTimeout: Medium,
	})
	Expect(err).NotTo(HaveOccurred(), "start the sidecar injector")
	DeferCleanup(func(ctx context.Context) { _ = in.Stop(ctx) })
	return &Injector{Injector: in, Namespace: ns}
}
