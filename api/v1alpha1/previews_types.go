package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// FleetPreviewsSpec configures preview fleets of this fleet: cheap, isolated Bucket fleets on a
// separate preview bucket, one per CelldPreview (docs/previews.md).
type FleetPreviewsSpec struct {
	// runtimeImage is the preview fleets' celld image, digest-pinned like spec.runtimeImage.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^(localhost|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+)(:[0-9]{1,5})?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+@sha256:[a-f0-9]{64}$`
	// +optional
	RuntimeImage string `json:"runtimeImage,omitempty"`
	// serviceAccountName runs the preview fleets.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// storage is the preview bucket, which must differ from the fleet bucket.
	// +required
	Storage PreviewStorage `json:"storage"`
	// zone is the one zone preview fleets run in.
	// +kubebuilder:validation:MaxLength=33
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$`
	// +optional
	Zone string `json:"zone,omitempty"`
	// routing publishes each preview under baseDomain.
	// +optional
	Routing *PreviewRouting `json:"routing,omitempty"`
	// execution overrides the preview fleets' resources.
	// +optional
	Execution *PreviewExecution `json:"execution,omitempty"`
	// scratch sizes the preview fleets' disk-backed emptyDir.
	// +optional
	Scratch *ScratchSpec `json:"scratch,omitempty"`
	// seeding authorizes previews to ask for a seed (CelldPreview spec.seed): the trusted
	// executor and the approved sources. Without it, a seeded preview is Blocked.
	// +optional
	Seeding *PreviewSeeding `json:"seeding,omitempty"`
}

// PreviewStorage is the preview bucket.
type PreviewStorage struct {
	// bucket is the preview bucket, 3 to 63 lower-case letters, digits and '-'; it must differ
	// from the fleet bucket.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*[a-z0-9]$`
	// +required
	Bucket string `json:"bucket"`
	// region is the preview bucket's region, for example us-east-1.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +optional
	Region string `json:"region,omitempty"`
	// endpoint is a custom S3-compatible endpoint serving the preview bucket.
	// +optional
	Endpoint *StorageEndpoint `json:"endpoint,omitempty"`
}

// PreviewRouting publishes previews as PREFIX.baseDomain.
// +kubebuilder:validation:XValidation:rule="!(has(self.gateway) && has(self.ingress))",reason="FieldValueInvalid",message="spec.previews.routing allows at most one of gateway or ingress; keep one"
type PreviewRouting struct {
	// baseDomain is the DNS domain under which each preview is published as PREFIX.baseDomain.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	BaseDomain string `json:"baseDomain"`
	// scheme is the URL scheme previews are published with: https (default) or http.
	// +kubebuilder:validation:Enum=http;https
	// +kubebuilder:default=https
	// +optional
	Scheme string `json:"scheme,omitempty"`
	// source selects the data-plane Pods (namespace and labels) allowed to reach previews.
	// +required
	Source RoutingSource `json:"source"`
	// gateway routes previews through an existing Gateway.
	// +optional
	Gateway *GatewayRouting `json:"gateway,omitempty"`
	// ingress routes previews through an Ingress of an installed controller.
	// +optional
	Ingress *IngressRouting `json:"ingress,omitempty"`
}

// PreviewExecution sets preview fleets' resources; limits are checked when a preview fleet is
// generated, against the generated fleet's own admission rules.
type PreviewExecution struct {
	// cpuRequest is each preview member's CPU request.
	// +optional
	CPURequest *resource.Quantity `json:"cpuRequest,omitempty"`
	// memoryRequest is each preview member's memory request.
	// +optional
	MemoryRequest *resource.Quantity `json:"memoryRequest,omitempty"`
	// memoryLimit is each preview member's memory limit.
	// +optional
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`
}
