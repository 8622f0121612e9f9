package children

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// OperatorFacts are what the chart needs to know beyond the fleet spec. The reconciler decides
// each one (from flags, discovery and the fleet's Pods) and passes them in; templates never look
// anything up, so a render is a pure function of (fleet, facts).
type OperatorFacts struct {
	// Namespace and ServiceAccount of the operator Pods: the fleet policy admits them to 8081
	// and the mesh policy admits their identity.
	Namespace      string
	ServiceAccount string
	// NetworkPolicyEnforced is the administrator's attestation (--network-policy-enforced).
	// Without it nothing renders: Render returns a BlockedError with IsolationUnverified.
	NetworkPolicyEnforced bool
	// GatewayAPIInstalled: gateway.networking.k8s.io/v1 HTTPRoute is served (see APIs).
	GatewayAPIInstalled bool
	// IstioInstalled: security.istio.io/v1 AuthorizationPolicy and PeerAuthentication are
	// served (see APIs).
	IstioInstalled bool
	// MeshMixed: some member Pod or the live Pod template differs from the wanted mesh
	// membership (see MeshMixed). It keeps the PeerAuthentication, the relaxed peer rule and,
	// for a departing fleet, the istiod egress.
	MeshMixed bool
	// ProxyControlPlanes are the istiod namespaces the fleet's running proxies use (see
	// ProxyControlPlanes): istiod egress covers each of them until its last proxy exits.
	ProxyControlPlanes []string
}

// Routing modes as the chart spells them.
const (
	modeGateway = "gateway"
	modeIngress = "ingress"
)

// chartValues computes the chart values for a fleet. Every key is always present (the chart
// renders in strict mode), and the map holds only JSON-encodable scalars, maps and slices so
// its encoding is a stable cache key.
func chartValues(f *v1.CelldFleet, facts OperatorFacts) (map[string]any, error) {
	s := &f.Spec
	vals := map[string]any{
		"fleet": map[string]any{
			"name":               f.Name,
			"namespace":          f.Namespace,
			"uid":                string(f.UID),
			"serviceAccountName": s.ServiceAccountName,
		},
		"operator": map[string]any{
			"namespace":             facts.Namespace,
			"serviceAccount":        facts.ServiceAccount,
			"networkPolicyEnforced": facts.NetworkPolicyEnforced,
			"gatewayAPIInstalled":   facts.GatewayAPIInstalled,
			"istioInstalled":        facts.IstioInstalled,
			"meshMixed":             facts.MeshMixed,
			"meshRemembered":        meshRemembered(f),
		},
	}

	egress := map[string]any{}
	var err error
	var telemetry, storage *v1.EgressTarget
	var telemetryPorts, storagePorts, kafkaPorts []int64
	if t := s.Telemetry; t != nil {
		telemetry = &t.Egress
		if telemetryPorts, err = urlPort(t.CollectorURL); err != nil {
			return nil, fmt.Errorf("spec.telemetry.collectorURL: %w", err)
		}
	}
	if e := s.Storage.Endpoint; e != nil && e.Egress != nil {
		storage = e.Egress
		if storagePorts, err = urlPort(e.URL); err != nil {
			return nil, fmt.Errorf("spec.storage.endpoint.url: %w", err)
		}
	}
	var kafka *v1.EgressTarget
	if x := s.Export; x != nil && x.Sink == v1.ExportSinkKafka && x.Kafka != nil {
		kafka = &x.Kafka.Egress
		if kafkaPorts, err = brokerPorts(x.Kafka.Brokers); err != nil {
			return nil, fmt.Errorf("spec.export.kafka.brokers: %w", err)
		}
	}
	egress["telemetry"] = egressValues(telemetry, telemetryPorts)
	egress["storageEndpoint"] = egressValues(storage, storagePorts)
	egress["kafka"] = egressValues(kafka, kafkaPorts)
	vals["egress"] = egress

	vals["routing"] = routingValues(f)
	vals["mesh"] = meshValues(f, facts.ProxyControlPlanes)
	return vals, nil
}

func egressValues(t *v1.EgressTarget, ports []int64) map[string]any {
	if t == nil {
		return map[string]any{"enabled": false, "ports": []any{}, "cidr": "", "podLabels": map[string]any{}, "namespace": ""}
	}
	ps := make([]any, len(ports))
	for i, p := range ports {
		ps[i] = p
	}
	return map[string]any{
		"enabled":   true,
		"ports":     ps,
		"cidr":      t.CIDR,
		"podLabels": stringMap(t.PodLabels),
		"namespace": t.Namespace,
	}
}

// routingValues renders routing only while the fleet is not being deleted: routing closes as
// soon as deletion starts and never delays the runtime's shutdown.
func routingValues(f *v1.CelldFleet) map[string]any {
	r := f.Spec.Routing
	v := map[string]any{
		"enabled":   false,
		"mode":      modeGateway,
		"hostnames": []any{},
		"gateway":   map[string]any{"name": "", "namespace": "", "sectionName": ""},
		"ingress":   map[string]any{"className": "", "tlsSecretName": "", "annotations": map[string]any{}},
		"source":    map[string]any{"namespace": "", "podLabels": map[string]any{}},
	}
	if r == nil || f.DeletionTimestamp != nil {
		return v
	}
	v["enabled"] = true
	hosts := make([]any, len(r.Hostnames))
	for i, h := range r.Hostnames {
		hosts[i] = h
	}
	v["hostnames"] = hosts
	v["source"] = map[string]any{"namespace": r.Source.Namespace, "podLabels": stringMap(r.Source.PodLabels)}
	switch {
	case r.Gateway != nil:
		v["gateway"] = map[string]any{"name": r.Gateway.Name, "namespace": r.Gateway.Namespace, "sectionName": r.Gateway.SectionName}
	case r.Ingress != nil:
		v["mode"] = modeIngress
		v["ingress"] = map[string]any{
			"className":     r.Ingress.ClassName,
			"tlsSecretName": r.Ingress.TLSSecretName,
			"annotations":   stringMap(r.Ingress.Annotations),
		}
	}
	return v
}

// meshValues reads spec.mesh.istio, or for a fleet that left the mesh the control plane it
// remembered (the celld.eric.dev/istio-control-plane annotation's value). istiodNamespaces, the
// targets of istiod egress, add the namespaces the running proxies actually use (inUse), so a
// proxy keeps its xDS until it exits even after a controlPlaneNamespace change. A departing
// fleet keeps the default AllowAll: its remaining proxies belong to members being rolled out of
// the mesh, and outside the mesh 8080 is open to every caller the NetworkPolicy admits.
func meshValues(f *v1.CelldFleet, inUse []string) map[string]any {
	v := map[string]any{
		"enabled":           false,
		"applicationAccess": string(v1.ApplicationAccessAllowAll),
	}
	cp := v1.DefaultControlPlaneNamespace
	if m := f.Spec.Mesh; m != nil && m.Istio != nil {
		v["enabled"] = true
		if m.Istio.ControlPlaneNamespace != "" {
			cp = m.Istio.ControlPlaneNamespace
		}
		if m.Istio.ApplicationAccess != "" {
			v["applicationAccess"] = string(m.Istio.ApplicationAccess)
		}
	} else if ns := f.Annotations[v1.AnnotationIstioControlPlane]; ns != "" && dnsLabel(ns) {
		cp = ns
	}
	namespaces := []any{cp}
	for _, ns := range inUse {
		if ns != cp && dnsLabel(ns) {
			namespaces = append(namespaces, ns)
		}
	}
	v["istiodNamespaces"] = namespaces
	return v
}

func meshRemembered(f *v1.CelldFleet) bool {
	_, ok := f.Annotations[v1.AnnotationIstioControlPlane]
	return ok
}

// urlPort is the TCP port of an http(s) URL: the explicit one, or the scheme's default.
func urlPort(raw string) ([]int64, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not between 1 and 65535", p)
		}
		return []int64{n}, nil
	}
	switch u.Scheme {
	case "http":
		return []int64{80}, nil
	case "https":
		return []int64{443}, nil
	}
	return nil, fmt.Errorf("scheme %q is neither http nor https", u.Scheme)
}

// brokerPorts are the distinct ports of host:port brokers, in ascending order, so one rule
// covers every broker and the rendering does not depend on the brokers' order.
func brokerPorts(brokers []string) ([]int64, error) {
	var ports []int64
	for _, b := range brokers {
		_, p, err := net.SplitHostPort(b)
		if err != nil {
			return nil, fmt.Errorf("broker %q: %w", b, err)
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("broker %q: port is not between 1 and 65535", b)
		}
		ports = append(ports, n)
	}
	slices.Sort(ports)
	return slices.Compact(ports), nil
}

func stringMap[V ~string](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}
