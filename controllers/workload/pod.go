package workload

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Options are the operator-wide facts a rendering needs beyond the fleet.
type Options struct {
	// OperatorNamespace and OperatorServiceAccount identify the operator (for the mesh policy
	// and the peer NetworkPolicy that other packages render). The workload does not use them.
	OperatorNamespace      string
	OperatorServiceAccount string
	// NodeLossTolerationSeconds overrides how long members tolerate an unreachable or not-ready
	// node before eviction (e2e shortens it); nil keeps the Kubernetes defaults.
	NodeLossTolerationSeconds *int64
	// ReservationName is the name of the fleet's CelldStorageReservation, written on the
	// PersistentFleet claim template as celld.eric.dev/storage-reservation. Claim templates are
	// immutable, so it must be the same on every render; it is derived from the bucket, which is
	// fixed at creation. Empty omits the annotation.
	ReservationName string
}

// Probe timing: celld answers health from memory, so one second is ample; three misses two
// seconds apart take a member out of its Services within about six seconds.
const (
	readinessPeriodSeconds  = 2
	readinessTimeoutSeconds = 1
	readinessFailures       = 3
)

// PodTemplate is the one Pod template for every profile and layout. It has no liveness probe:
// a member that stops answering is recovering or handing off, and a kubelet restart would only
// interrupt that; readiness alone keeps traffic and rollouts away from it.
func PodTemplate(f *v1.CelldFleet, o Options) corev1.PodTemplateSpec {
	s := &f.Spec
	spec := corev1.PodSpec{
		ServiceAccountName:           s.ServiceAccountName,
		AutomountServiceAccountToken: new(false),
		// celld reads no Service environment variables, and a Service named celld-var-... would
		// inject CELLD_VAR_* variables that celld refuses to boot with.
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: new(int64(graceSeconds(f))),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:      new(runtimeUser),
			RunAsGroup:     new(runtimeUser),
			FSGroup:        new(runtimeUser),
			RunAsNonRoot:   new(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers:                []corev1.Container{container(f)},
		Volumes:                   volumes(f),
		Affinity:                  affinity(f),
		TopologySpreadConstraints: spread(f),
		Tolerations:               tolerations(o),
		SchedulingGates:           schedulingGates(f),
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels(f), Annotations: podAnnotations(f)},
		Spec:       spec,
	}
}

func container(f *v1.CelldFleet) corev1.Container {
	return corev1.Container{
		Name:            ContainerName,
		Image:           f.Spec.RuntimeImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Ports: []corev1.ContainerPort{
			{Name: ApplicationPortName, ContainerPort: ApplicationPort, Protocol: corev1.ProtocolTCP},
			{Name: PeerPortName, ContainerPort: PeerPort, Protocol: corev1.ProtocolTCP},
		},
		Env:       env(f),
		Resources: resources(f),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: HealthPath, Port: intstr.FromInt32(ApplicationPort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds:    readinessPeriodSeconds,
			TimeoutSeconds:   readinessTimeoutSeconds,
			FailureThreshold: readinessFailures,
		},
		VolumeMounts: mounts(f),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   new(true),
		},
	}
}

// resources renders execution. A Bucket member's data directory is an emptyDir, so its size is
// also requested and limited as ephemeral storage: the scheduler places it where the disk fits
// and the kubelet evicts it rather than let it fill the node.
func resources(f *v1.CelldFleet) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if x := f.Spec.Execution; x != nil {
		put(r.Requests, corev1.ResourceCPU, x.CPURequest)
		put(r.Requests, corev1.ResourceMemory, x.MemoryRequest)
		put(r.Limits, corev1.ResourceCPU, x.CPULimit)
		put(r.Limits, corev1.ResourceMemory, x.MemoryLimit)
	}
	if f.Spec.Profile == v1.ProfileBucket {
		request, limit := scratch(f)
		r.Requests[corev1.ResourceEphemeralStorage] = request
		r.Limits[corev1.ResourceEphemeralStorage] = limit
	}
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
	return r
}

func put(l corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
	if q != nil {
		l[name] = q.DeepCopy()
	}
}

// scratch is the Bucket data emptyDir's request and limit: sizeGiB, or a preview fleet's
// storage.scratch (a missing request follows the limit).
func scratch(f *v1.CelldFleet) (request, limit resource.Quantity) {
	limit = gibibytes(f.Spec.Storage.SizeGiB)
	if sc := f.Spec.Storage.Scratch; sc != nil && sc.Limit != nil {
		limit = sc.Limit.DeepCopy()
	}
	request = limit.DeepCopy()
	if sc := f.Spec.Storage.Scratch; sc != nil && sc.Request != nil {
		request = sc.Request.DeepCopy()
	}
	return request, limit
}

func gibibytes(n int32) resource.Quantity {
	return *resource.NewQuantity(int64(n)<<30, resource.BinarySI)
}

// volumes: the Bucket data emptyDir (PersistentFleet's comes from the claim template), /tmp for
// the read-only root filesystem, and the Kafka properties Secret when export uses one.
func volumes(f *v1.CelldFleet) []corev1.Volume {
	v := make([]corev1.Volume, 0, 3)
	if f.Spec.Profile == v1.ProfileBucket {
		_, limit := scratch(f)
		v = append(v, corev1.Volume{Name: v1.ClaimTemplateName, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit},
		}})
	}
	v = append(v, corev1.Volume{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if r := kafkaProperties(f); r != nil {
		// Every key is mounted so a CA or client certificate in the same Secret can be named
		// from the properties; owner and group (fsGroup) read only.
		v = append(v, corev1.Volume{Name: exportVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: r.Name, DefaultMode: new(int32(0o440))},
		}})
	}
	return v
}

func mounts(f *v1.CelldFleet) []corev1.VolumeMount {
	m := make([]corev1.VolumeMount, 0, 3)
	m = append(m,
		corev1.VolumeMount{Name: v1.ClaimTemplateName, MountPath: DataPath},
		corev1.VolumeMount{Name: tmpVolume, MountPath: tmpPath})
	if kafkaProperties(f) != nil {
		m = append(m, corev1.VolumeMount{Name: exportVolume, MountPath: exportPath, ReadOnly: true})
	}
	return m
}

func kafkaProperties(f *v1.CelldFleet) *v1.SecretKeyRef {
	if x := f.Spec.Export; x != nil && x.Kafka != nil {
		return x.Kafka.PropertiesSecretKeyRef
	}
	return nil
}

// podLabels are the object labels plus the mesh membership labels.
func podLabels(f *v1.CelldFleet) map[string]string {
	l := Labels(f)
	switch {
	case meshed(f):
		l[LabelIstioInject] = "true"
		l[v1.LabelFleetName] = f.Name
	case hasKey(f.Annotations, v1.AnnotationIstioControlPlane):
		// The fleet was meshed once: keep injection off explicitly, so a replacement Pod in a
		// namespace labelled for injection does not rejoin the mesh after the fleet left it.
		l[LabelIstioInject] = "false"
	}
	return l
}

// podAnnotations: the restart token (a new token is a new template, so the workload controller
// restarts every member once and never replays a completed restart) and the mesh annotations.
// The native sidecar starts before celld and stops after it, so peer RPC works through recovery
// and the SIGTERM handoff; the EKS Pod Identity agent is reached around the proxy.
func podAnnotations(f *v1.CelldFleet) map[string]string {
	a := map[string]string{}
	if m := f.Spec.Maintenance; m != nil && m.RestartToken != "" {
		a[v1.AnnotationRestartToken] = m.RestartToken
	}
	if meshed(f) {
		a[AnnotationIstioNativeSidecar] = "true"
		a[AnnotationIstioExcludeOutbound] = eksPodIdentityAgent
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

func meshed(f *v1.CelldFleet) bool { return f.Spec.Mesh != nil && f.Spec.Mesh.Istio != nil }

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
