package children

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// istioProxy is the name Istio's injector gives the sidecar, as a container or, for a native
// sidecar, as an init container that keeps running.
const istioProxy = "istio-proxy"

// MeshMixed reports whether a fleet's membership differs from the wanted one: the live Pod
// template, or any of the fleet's Pods, is meshed while the fleet should not be, or the other
// way round. It looks at real proxy containers, not at injection labels or annotations,
// because a label says what the injector was asked, not what it did. Terminating Pods count:
// a member still handing off over SIGTERM speaks to peers with the membership it started with.
// Pods that have finished (Succeeded, Failed) run no proxy and no celld, so they do not count.
//
// The reconciler should pass the result as OperatorFacts.MeshMixed only for a fleet the mesh
// concerns (spec.mesh.istio set, or the celld.eric.dev/istio-control-plane annotation present);
// the chart ignores it otherwise, so namespace-wide injection of a never-meshed fleet is left
// alone.
func MeshMixed(pods []corev1.Pod, wantMeshed bool, liveTemplateMeshed bool) bool {
	if liveTemplateMeshed != wantMeshed {
		return true
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if HasProxy(&p.Spec) != wantMeshed {
			return true
		}
	}
	return false
}

// HasProxy reports whether a Pod spec runs an Istio proxy: a container named istio-proxy, or a
// native sidecar (an init container named istio-proxy with restartPolicy Always). A plain init
// container of that name runs to completion before celld starts and proxies nothing.
func HasProxy(spec *corev1.PodSpec) bool {
	for i := range spec.Containers {
		if spec.Containers[i].Name == istioProxy {
			return true
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.Name == istioProxy && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// ProxyControlPlanes returns, sorted and without repeats, the namespaces of the istiod that the
// fleet's running proxies were injected to talk to. The injector writes the discovery address
// into the proxy's environment (PROXY_CONFIG's discoveryAddress, or CA_ADDR), for example
// istiod.istio-system.svc:15012; the namespace is its second label. A proxy whose address
// names no namespace contributes nothing. Finished Pods run no proxy.
//
// The fleet's NetworkPolicy keeps istiod egress to each of these namespaces, so a proxy keeps
// its xDS and certificates until it exits, whatever spec.mesh says now: after a
// controlPlaneNamespace change, and while the fleet leaves the mesh.
func ProxyControlPlanes(pods []corev1.Pod) []string {
	var out []string
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ns := proxyControlPlane(&p.Spec); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

func proxyControlPlane(spec *corev1.PodSpec) string {
	var env []corev1.EnvVar
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			if list[i].Name == istioProxy {
				env = list[i].Env
			}
		}
	}
	addr := ""
	for _, e := range env {
		switch e.Name {
		case "PROXY_CONFIG":
			var pc struct {
				DiscoveryAddress string `json:"discoveryAddress"`
			}
			if json.Unmarshal([]byte(e.Value), &pc) == nil && pc.DiscoveryAddress != "" {
				addr = pc.DiscoveryAddress
			}
		case "CA_ADDR":
			if addr == "" {
				addr = e.Value
			}
		}
	}
	return addressNamespace(addr)
}

// addressNamespace is the namespace of a Service address SERVICE.NAMESPACE.svc[.DOMAIN][:port];
// an IP address or a short name names none.
func addressNamespace(addr string) string {
	host, _, _ := strings.Cut(addr, ":")
	labels := strings.Split(host, ".")
	if len(labels) < 3 || labels[2] != "svc" || !dnsLabel(labels[1]) {
		return ""
	}
	return labels[1]
}
