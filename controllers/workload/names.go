package workload

import (
	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Names and numbers of the member contract (celld-runtime.md §4). Changing any of them changes
// every fleet's template and rolls every fleet, so they are constants, not options.
const (
	// ContainerName is the one container of a member Pod.
	ContainerName = "celld"
	// DataPath is celld's data directory (CELLD_WATCH), on the claim or the emptyDir.
	DataPath = "/work"

	// ApplicationPort serves the application; PeerPort serves peers and the operator.
	ApplicationPort     int32 = 8080
	PeerPort            int32 = 8081
	ApplicationPortName       = "application"
	PeerPortName              = "peer"

	// HealthPath is celld's readiness endpoint: 200 only after recovery and, for a new node,
	// after the fleet has absorbed the change, so readiness paces every rollout.
	HealthPath = "/.well-known/celld/health"

	// Labels every rendered object and member Pod carries besides the fleet UID label.
	LabelAppName      = "app.kubernetes.io/name"
	LabelAppInstance  = "app.kubernetes.io/instance"
	LabelAppManagedBy = "app.kubernetes.io/managed-by"
	AppName           = "celld"
	ManagedBy         = "celld-operator"

	// Istio keys on the Pod template (reference-operator.md §1.14). They are Istio's, not ours,
	// so they live here rather than in the API package.
	LabelIstioInject               = "sidecar.istio.io/inject"
	AnnotationIstioNativeSidecar   = "sidecar.istio.io/nativeSidecar"
	AnnotationIstioExcludeOutbound = "traffic.sidecar.istio.io/excludeOutboundIPRanges"
)

const (
	// eksPodIdentityAgent is the EKS Pod Identity agent, which must be reached around the
	// sidecar: the proxy would otherwise intercept the members' AWS credential requests.
	eksPodIdentityAgent = "169.254.170.23/32"

	peersServiceSuffix = "-peers"
	memberSeparator    = "-"

	exportVolume = "export-kafka"
	exportPath   = "/etc/celld/export"
	tmpVolume    = "tmp"
	tmpPath      = "/tmp"

	// runtimeUser is the non-root user, group and fsGroup celld runs as.
	runtimeUser int64 = 10001
)

// Selector selects a fleet's Pods: the fleet UID only, so a fleet recreated under the same name
// never adopts its predecessor's Pods or claims. It is the immutable workload selector.
func Selector(f *v1.CelldFleet) map[string]string {
	return map[string]string{v1.LabelFleetUID: string(f.UID)}
}

// Labels are the labels of every rendered workload object: the fleet UID label (selector and
// proof of ownership) and the app.kubernetes.io labels. Member Pods add the mesh labels.
func Labels(f *v1.CelldFleet) map[string]string {
	return map[string]string{
		v1.LabelFleetUID:  string(f.UID),
		LabelAppName:      AppName,
		LabelAppInstance:  f.Name,
		LabelAppManagedBy: ManagedBy,
	}
}

// PeersService is the headless Service that gives PersistentFleet members stable DNS names.
func PeersService(fleet string) string { return fleet + peersServiceSuffix }
