package v1alpha1

// RoutingSpec creates FLEET-routing: one Gateway API v1 HTTPRoute or one Ingress forwarding /
// for explicit hostnames to FLEET:8080, and a NetworkPolicy admitting only the selected
// data-plane Pods on TCP 8080. Routing never exposes 8081 and never restarts members.
//
// +kubebuilder:validation:XValidation:rule="has(self.gateway) != has(self.ingress)",reason="FieldValueInvalid",message="spec.routing needs exactly one of gateway or ingress; to switch modes replace the whole routing block"
type RoutingSpec struct {
	// hostnames are 1 to 16 unique DNS names served by the route; a leading '*.' wildcard is
	// allowed, IP addresses are not.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self.all(h, !h.matches('^[0-9.]+$'))",reason="FieldValueInvalid",message="spec.routing.hostnames must be DNS names, not IP addresses; use a hostname"
	// +listType=set
	// +required
	Hostnames []string `json:"hostnames"`
	// source selects the data-plane Pods (namespace and labels) allowed to reach 8080.
	// +required
	Source RoutingSource `json:"source"`
	// gateway routes through an existing Gateway with an HTTPRoute.
	// +optional
	Gateway *GatewayRouting `json:"gateway,omitempty"`
	// ingress routes through an Ingress of an installed controller.
	// +optional
	Ingress *IngressRouting `json:"ingress,omitempty"`
}

// RoutingSource selects the Pods that send routed traffic.
type RoutingSource struct {
	// namespace of the data-plane Pods.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
	// podLabels of the data-plane Pods, 1 to 16, each a valid label key and value.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, (!k.contains('/') || k.indexOf('/') <= 253) && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",reason="FieldValueInvalid",message="podLabels keys must be label keys: an optional DNS-subdomain prefix of at most 253 characters and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit; fix the key"
	// +required
	PodLabels map[string]LabelValue `json:"podLabels"`
}

// LabelValue is a Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' and
// '.' that start and end with a letter or digit. A selector's values are checked as the API
// server checks them on the NetworkPolicy that carries the selector.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// GatewayRouting names the parent Gateway.
type GatewayRouting struct {
	// name of the Gateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// namespace of the Gateway; the fleet namespace when omitted. Its listener's allowedRoutes
	// must admit the fleet namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// sectionName is the listener to attach to.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// IngressRouting configures an Ingress.
type IngressRouting struct {
	// className is the IngressClass (ingressClassName; the legacy class annotation is refused).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClassName string `json:"className"`
	// tlsSecretName is a same-namespace TLS Secret covering every hostname; HTTP only when
	// omitted.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// annotations are up to 16 controller annotations set on the Ingress; removed ones are
	// pruned, others' annotations kept. celld.eric.dev/* and kubernetes.io/ingress.class are
	// refused, keys must be annotation keys, and each value is at most 4096 bytes.
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('celld.eric.dev/') && k != 'kubernetes.io/ingress.class')",reason="FieldValueInvalid",message="spec.routing.ingress.annotations cannot set celld.eric.dev/* (operator-owned) or kubernetes.io/ingress.class (use className); remove them"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 4096)",reason="FieldValueInvalid",message="spec.routing.ingress.annotations values must be at most 4096 bytes; shorten the value"
	// +kubebuilder:validation:XValidation:rule="self.all(k, (!k.contains('/') || k.indexOf('/') <= 253) && k.lowerAscii().matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",reason="FieldValueInvalid",message="spec.routing.ingress.annotations keys must be annotation keys: an optional DNS-subdomain prefix of at most 253 characters and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit; fix the key"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
