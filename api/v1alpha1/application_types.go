package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ApplicationStatus describes the application code the members have loaded, as read from
// each member's /state. It reports observed agreement, not adoption of the latest published
// release; check observedAt and the ApplicationConverged condition's observedGeneration.
type ApplicationStatus struct {
	// observedAt is when the last collection finished.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// expectedNodes is the number of members the fleet should have: the larger of the
	// workload's replicas and status.desiredReplicas.
	// +optional
	ExpectedNodes int32 `json:"expectedNodes,omitempty"`
	// observedNodes counts members with a fresh answer (Converged or CellsTransitioning).
	// +optional
	ObservedNodes int32 `json:"observedNodes,omitempty"`
	// unavailableNodes is the larger of the members without a fresh answer and expectedNodes
	// minus observedNodes.
	// +optional
	UnavailableNodes int32 `json:"unavailableNodes,omitempty"`
	// pendingCells sums resident cells whose generation differs from their node's current one
	// (fresh samples only).
	// +optional
	PendingCells int64 `json:"pendingCells,omitempty"`
	// swappingCells sums cells being swapped (fresh samples only).
	// +optional
	SwappingCells int64 `json:"swappingCells,omitempty"`
	// observedVersion is present only with complete fresh coverage and agreement on version
	// and prefix.
	// +optional
	ObservedVersion *ApplicationVersion `json:"observedVersion,omitempty"`
	// versions groups fresh samples by loaded version and prefix.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Versions []ApplicationVersionCount `json:"versions,omitempty"`
	// nodes holds per-Pod diagnostics, at most 100.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Nodes []ApplicationNode `json:"nodes,omitempty"`
}

// ApplicationVersion is a loaded application version and its artifact prefix.
type ApplicationVersion struct {
	// version is the application version the members report having loaded.
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`
	// prefix is the artifact prefix that version was loaded from.
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix"`
}

// ApplicationVersionCount is a version, its prefix and how many members loaded it.
type ApplicationVersionCount struct {
	// version is an application version reported by at least one freshly observed member.
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`
	// prefix is the artifact prefix that version was loaded from.
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix"`
	// nodes counts the freshly observed members that reported this version and prefix.
	Nodes int32 `json:"nodes"`
}

// ApplicationNode is one member's observation.
type ApplicationNode struct {
	// name is the member Pod's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the member Pod's UID.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	UID string `json:"uid,omitempty"`
	// runtimeGeneration identifies the celld process that answered (new for every process);
	// set only for a fresh answer.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	RuntimeGeneration string `json:"runtimeGeneration,omitempty"`
	// version is the application version the member reported having loaded; set only for a
	// fresh answer.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Version string `json:"version,omitempty"`
	// reason is Converged, CellsTransitioning, Unavailable, Unsupported, Malformed or
	// StaleOrIncomplete.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
}
