package v1alpha1

// EnvVar is one CELLD_ variable added to every member: a literal value or a reference to a
// key of a Secret in the fleet namespace. Secret values never enter the fleet, its status or
// the operator's logs; Kubernetes resolves the reference when a Pod starts. Variables celld
// removed are refused (celld would refuse to start; an empty CELLD_WORKER_LOADER, which celld
// tolerates, is accepted).
//
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.secretKeyRef)",reason="FieldValueInvalid",message="spec.env entries need exactly one of value or secretKeyRef; keep one"
// +kubebuilder:validation:XValidation:rule="!(self.name in ['CELLD_NODE', 'CELLD_ADVERTISE', 'CELLD_BUCKET', 'CELLD_DURABILITY', 'CELLD_ADDR', 'CELLD_INTERNAL_ADDR', 'CELLD_WATCH', 'CELLD_TTL_MS', 'CELLD_SHUTDOWN_TOTAL_MS', 'CELLD_TOKIO_THREADS', 'CELLD_MAX_RESIDENT_CELLS', 'CELLD_IDLE_EVICT_S'])",fieldPath=".name",reason="FieldValueForbidden",message="spec.env name is owned by the operator (identity, network, durability, storage and tuning settings); use the dedicated spec field instead"
// +kubebuilder:validation:XValidation:rule="!['CELLD_REEXEC_', 'CELLD_STRICT_', 'CELLD_OTEL', 'CELLD_EXPORT', 'CELLD_UNSAFE_', 'CELLD_TEST_'].exists(p, self.name.startsWith(p))",fieldPath=".name",reason="FieldValueForbidden",message="spec.env name uses a reserved prefix (CELLD_REEXEC_, CELLD_STRICT_, CELLD_OTEL, CELLD_EXPORT, CELLD_UNSAFE_, CELLD_TEST_); use spec.telemetry or spec.export, or another name"
// +kubebuilder:validation:XValidation:rule="!(self.name in ['CELLD_AI_BINDING', 'CELLD_AI_URL', 'CELLD_PACED_HANDOFF', 'CELLD_LOG_GROUP_COMMIT_MS', 'CELLD_QUEUE_PRODUCER_GROUP_MS', 'CELLD_LOG_BUNDLE', 'CELLD_PRESENCE_SHADOW', 'CELLD_STORAGE_PROBE', 'CELLD_EVICTIONS', 'CELLD_LOG_CAPTURE_WORKERS', 'CELLD_REBALANCE_BATCH_CELLS', 'CELLD_CLOUD_RESTART_ON_DEPLOY', 'CELLD_OUTPUT_GATE', 'CELLD_DRAIN_TOKEN_WAIT_MS', 'CELLD_SHUTDOWN_DRAIN_MS', 'CELLD_MAX_LOADED_WORKERS', 'CELLD_WORKER_LOADER', 'CELLD_VARS_FILE'] || self.name.startsWith('CELLD_VAR_')) || (self.name == 'CELLD_WORKER_LOADER' && has(self.value) && size(self.value) == 0)",fieldPath=".name",reason="FieldValueForbidden",message="spec.env name is a variable celld removed (CELLD_VAR_*, CELLD_VARS_FILE, CELLD_OUTPUT_GATE, CELLD_SHUTDOWN_DRAIN_MS and the others of its removed list); celld refuses to start while it is set, so remove the entry"
type EnvVar struct {
	// name is the variable name, CELLD_ followed by upper-case letters, digits and '_'.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^CELLD_[A-Z][A-Z0-9_]*$`
	// +required
	Name string `json:"name"`
	// value is a literal value of at most 4096 bytes; empty is allowed.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Value *string `json:"value,omitempty"`
	// secretKeyRef reads the value from a key of a Secret in the fleet namespace.
	// +optional
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the fleet namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
	// key is the key within the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// TelemetrySampler is an OpenTelemetry trace sampler name.
// +kubebuilder:validation:Enum=always_on;always_off;parentbased_always_on;parentbased_always_off;traceidratio;parentbased_traceidratio
type TelemetrySampler string

// TelemetrySpec enables OTLP export from celld to one collector.
//
// +kubebuilder:validation:XValidation:rule="has(self.sampler) && (self.sampler == 'traceidratio' || self.sampler == 'parentbased_traceidratio') ? has(self.samplerArg) : !has(self.samplerArg)",fieldPath=".samplerArg",reason="FieldValueInvalid",message="spec.telemetry.samplerArg is required for the ratio samplers (traceidratio, parentbased_traceidratio) and not allowed for the others; set or remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.egress.cidr) || self.egress.cidr.endsWith('/32') || self.egress.cidr.endsWith('/128')",fieldPath=".egress.cidr",reason="FieldValueInvalid",message="spec.telemetry.egress.cidr must be a single address (/32 or /128); use podLabels to select collector Pods"
// +kubebuilder:validation:XValidation:rule="!has(self.egress.cidr) || !self.collectorURL.substring(self.collectorURL.indexOf('://') + 3).matches('^([0-9]+[.][0-9]+[.][0-9]+[.][0-9]+([:/]|$)|[[])') || self.collectorURL.substring(self.collectorURL.indexOf('://') + 3) == self.egress.cidr.split('/')[0] || self.collectorURL.substring(self.collectorURL.indexOf('://') + 3).startsWith(self.egress.cidr.split('/')[0] + ':') || self.collectorURL.substring(self.collectorURL.indexOf('://') + 3).startsWith(self.egress.cidr.split('/')[0] + '/') || self.collectorURL.substring(self.collectorURL.indexOf('://') + 3).startsWith('[' + self.egress.cidr.split('/')[0] + ']')",fieldPath=".egress.cidr",reason="FieldValueInvalid",message="spec.telemetry.egress.cidr must be the collectorURL's address when the URL names an IP; make them match"
type TelemetrySpec struct {
	// collectorURL is the OTLP collector, http or https, with no credentials, query or
	// fragment, and a port (if any) from 1 to 65535. The host is a DNS name (letters, digits,
	// '.', '-', '_') or a bracketed IPv6 address; the path uses URL characters and %XX escapes. The administrator must ensure it resolves to the egress destination.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?$`
	// +required
	CollectorURL string `json:"collectorURL"`
	// egress adds one TCP rule on the URL's port to one IP (cidr /32 or /128) or to labelled
	// collector Pods.
	// +required
	Egress EgressTarget `json:"egress"`
	// sampler is the trace sampler.
	// +optional
	Sampler TelemetrySampler `json:"sampler,omitempty"`
	// samplerArg is the sampling ratio, a decimal in [0,1], for the ratio samplers only.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	// +optional
	SamplerArg string `json:"samplerArg,omitempty"`
	// flushMilliseconds is celld's OTLP flush interval (CELLD_OTEL_FLUSH_MS).
	// +kubebuilder:validation:Minimum=1
	// +optional
	FlushMilliseconds *int32 `json:"flushMilliseconds,omitempty"`
	// flushBytes is celld's OTLP flush size (CELLD_OTEL_FLUSH_BYTES).
	// +kubebuilder:validation:Minimum=1
	// +optional
	FlushBytes *int64 `json:"flushBytes,omitempty"`
	// headersSecretKeyRef supplies OTEL_EXPORTER_OTLP_HEADERS from a Secret key. Rotate it with
	// a restart so new Pods read it.
	// +optional
	HeadersSecretKeyRef *SecretKeyRef `json:"headersSecretKeyRef,omitempty"`
}

// EgressTarget is one NetworkPolicy egress destination: an address range, or labelled Pods in
// the fleet namespace or in namespace.
//
// +kubebuilder:validation:XValidation:rule="has(self.cidr) != has(self.podLabels)",reason="FieldValueInvalid",message="egress needs exactly one of cidr or podLabels; keep one"
// +kubebuilder:validation:XValidation:rule="!has(self.namespace) || has(self.podLabels)",fieldPath=".namespace",reason="FieldValueInvalid",message="egress namespace only applies with podLabels; remove namespace or select Pods"
// +kubebuilder:validation:XValidation:rule="!has(self.cidr) || isCIDR(self.cidr)",fieldPath=".cidr",reason="FieldValueInvalid",message="egress cidr must be a CIDR such as 10.0.0.5/32; fix the address"
type EgressTarget struct {
	// cidr is an address range.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// podLabels selects destination Pods, 1 to 16, each a valid label key and value.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, (!k.contains('/') || k.indexOf('/') <= 253) && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",reason="FieldValueInvalid",message="podLabels keys must be label keys: an optional DNS-subdomain prefix of at most 253 characters and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit; fix the key"
	// +optional
	PodLabels map[string]LabelValue `json:"podLabels,omitempty"`
	// namespace is where the podLabels Pods run; the fleet namespace when omitted.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}
