package workload

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Fixed runtime settings (celld-runtime.md §1.2, §1.3, §4). The listeners bind every address so
// the Pod IP and the Services reach them; CELLD_ADVERTISE is then mandatory.
const (
	listenAddr   = "0.0.0.0:8080"
	internalAddr = "0.0.0.0:8081"
	// leaseTTLMillis is celld's node lease lifetime; the operator pins the documented default
	// so a runtime release that changes it does not change failover timing under a fleet.
	leaseTTLMillis = "10000"
	// tokioThreads keeps celld's worker pool at the size the default CPU request was sized for.
	tokioThreads = "2"
)

// Durability per profile: Bucket acknowledges a write once the bucket has it; PersistentFleet
// once every follower has fsynced it on its retained disk.
const (
	durabilityBucket = "bucket"
	durabilityFleet  = "fleet"
)

// env renders the member environment in a fixed order: identity and network, storage, runtime
// settings, the user's entries in spec order, then telemetry and export. Kubernetes expands
// $(VAR) only from entries defined earlier, so POD_IP, POD_NAME and CELLD_NODE come first.
// Secret values are never read: user, telemetry and endpoint secrets are secretKeyRefs that the
// kubelet resolves when the Pod starts.
func env(f *v1.CelldFleet) []corev1.EnvVar {
	s := &f.Spec
	e := make([]corev1.EnvVar, 0, 24+len(s.Env))
	e = append(e, fieldEnv("POD_IP", "status.podIP"))
	if s.Telemetry != nil {
		e = append(e, fieldEnv("POD_NAME", "metadata.name"))
	}
	if s.Profile == v1.ProfilePersistentFleet {
		// A stable node name and ordinal DNS let a restarted member find the followers of its
		// previous session even when its IP changed; the peers Service publishes not-ready
		// addresses because recovery happens before readiness.
		e = append(e,
			fieldEnv("CELLD_NODE", "metadata.name"),
			valueEnv("CELLD_ADVERTISE", "$(CELLD_NODE)."+PeersService(f.Name)+"."+f.Namespace+".svc:"+port(PeerPort)))
	} else {
		e = append(e,
			fieldEnv("CELLD_NODE", "metadata.uid"),
			valueEnv("CELLD_ADVERTISE", "$(POD_IP):"+port(PeerPort)))
	}
	e = append(e, valueEnv("CELLD_BUCKET", bucketURL(&s.Storage)), valueEnv("AWS_REGION", s.Storage.Region))
	e = appendEndpoint(e, s.Storage.Endpoint)
	durability := durabilityBucket
	if s.Profile == v1.ProfilePersistentFleet {
		durability = durabilityFleet
	}
	e = append(e,
		valueEnv("CELLD_DURABILITY", durability),
		valueEnv("CELLD_ADDR", listenAddr),
		valueEnv("CELLD_INTERNAL_ADDR", internalAddr),
		valueEnv("CELLD_WATCH", DataPath),
		valueEnv("CELLD_TTL_MS", leaseTTLMillis),
		valueEnv("CELLD_SHUTDOWN_TOTAL_MS", itoa(int64(shutdownSeconds(f))*1000)),
		valueEnv("CELLD_TOKIO_THREADS", tokioThreads))
	if x := s.Execution; x != nil {
		e = appendInt(e, "CELLD_MAX_RESIDENT_CELLS", x.MaxResidentCells)
		e = appendInt(e, "CELLD_IDLE_EVICT_S", x.IdleEvictSeconds)
	}
	for _, u := range s.Env {
		if u.SecretKeyRef != nil {
			e = append(e, secretEnv(u.Name, u.SecretKeyRef))
		} else if u.Value != nil {
			e = append(e, valueEnv(u.Name, *u.Value))
		}
	}
	e = appendTelemetry(e, f)
	return appendExport(e, s.Export)
}

// appendEndpoint renders a preview fleet's custom S3 endpoint. The Secret holds the access key
// pair under the standard AWS variable names, referenced key by key (never envFrom, which would
// let a stray key such as CELLD_VAR_X refuse the boot or override an operator setting).
func appendEndpoint(e []corev1.EnvVar, ep *v1.StorageEndpoint) []corev1.EnvVar {
	if ep == nil {
		return e
	}
	return append(e,
		valueEnv("S3_ENDPOINT", ep.URL),
		secretEnv("AWS_ACCESS_KEY_ID", &v1.SecretKeyRef{Name: ep.CredentialsSecretName, Key: "AWS_ACCESS_KEY_ID"}),
		secretEnv("AWS_SECRET_ACCESS_KEY", &v1.SecretKeyRef{Name: ep.CredentialsSecretName, Key: "AWS_SECRET_ACCESS_KEY"}))
}

// appendTelemetry renders OTLP export (celld-runtime.md §1.4). CELLD_OTEL_SINK was removed from
// celld and refuses the boot, so it is never emitted.
func appendTelemetry(e []corev1.EnvVar, f *v1.CelldFleet) []corev1.EnvVar {
	t := f.Spec.Telemetry
	if t == nil {
		return e
	}
	e = append(e,
		valueEnv("CELLD_OTEL", t.CollectorURL),
		valueEnv("OTEL_RESOURCE_ATTRIBUTES",
			"k8s.namespace.name="+f.Namespace+",k8s.pod.name=$(POD_NAME),celld.fleet.name="+f.Name))
	if t.Sampler != "" {
		e = append(e, valueEnv("OTEL_TRACES_SAMPLER", string(t.Sampler)))
	}
	if t.SamplerArg != "" {
		e = append(e, valueEnv("OTEL_TRACES_SAMPLER_ARG", t.SamplerArg))
	}
	e = appendInt(e, "CELLD_OTEL_FLUSH_MS", t.FlushMilliseconds)
	e = appendInt(e, "CELLD_OTEL_FLUSH_BYTES", t.FlushBytes)
	if t.HeadersSecretKeyRef != nil {
		e = append(e, secretEnv("OTEL_EXPORTER_OTLP_HEADERS", t.HeadersSecretKeyRef))
	}
	return e
}

// appendExport renders change export (seed 000's table). Omitted fields keep celld's defaults.
// The list settings are sets in the API, so they are sorted: reordering them in the spec must
// not roll the fleet.
func appendExport(e []corev1.EnvVar, x *v1.ExportSpec) []corev1.EnvVar {
	if x == nil {
		return e
	}
	sink := x.Sink
	if sink == "" {
		sink = v1.ExportSinkBucket
	}
	e = append(e, valueEnv("CELLD_EXPORT", "1"), valueEnv("CELLD_EXPORT_SINK", strings.ToLower(string(sink))))
	e = appendList(e, "CELLD_EXPORT_CLASSES", x.Classes)
	e = appendList(e, "CELLD_EXPORT_TABLES", x.ExcludeTables)
	e = appendInt(e, "CELLD_EXPORT_MAX_TX_BYTES", x.MaxTransactionBytes)
	e = appendInt(e, "CELLD_EXPORT_MAX_RECORD_BYTES", x.MaxRecordBytes)
	e = appendInt(e, "CELLD_EXPORT_QUEUE_BYTES", x.QueueBytes)
	if b := x.Bucket; b != nil {
		if b.Name != "" {
			e = append(e, valueEnv("CELLD_EXPORT_BUCKET", b.Name))
		}
		e = appendInt(e, "CELLD_EXPORT_FLUSH_MS", b.FlushMilliseconds)
		e = appendInt(e, "CELLD_EXPORT_FLUSH_BYTES", b.FlushBytes)
		if b.RetentionDays != nil {
			e = append(e, valueEnv("CELLD_EXPORT_RETENTION", itoa(int64(*b.RetentionDays))+"d"))
		}
	}
	if k := x.Kafka; k != nil {
		e = appendList(e, "CELLD_EXPORT_KAFKA_BROKERS", k.Brokers)
		if k.Topic != "" {
			e = append(e, valueEnv("CELLD_EXPORT_TOPIC", k.Topic))
		}
		e = appendInt(e, "CELLD_EXPORT_RETRY_MS", k.RetryMilliseconds)
		if r := k.PropertiesSecretKeyRef; r != nil {
			e = append(e, valueEnv("CELLD_EXPORT_KAFKA_PROPERTIES", exportPath+"/"+r.Key))
		}
	}
	return e
}

// shutdownSeconds and graceSeconds read lifecycle, falling back to the API defaults so a fleet
// that skipped Default renders like one that did rather than panicking the reconciler.
func shutdownSeconds(f *v1.CelldFleet) int32 {
	if l := f.Spec.Lifecycle; l != nil && l.ShutdownSeconds > 0 {
		return l.ShutdownSeconds
	}
	return v1.DefaultShutdownSeconds
}

func graceSeconds(f *v1.CelldFleet) int32 {
	if l := f.Spec.Lifecycle; l != nil && l.TerminationGraceSeconds > 0 {
		return l.TerminationGraceSeconds
	}
	return v1.DefaultTerminationGraceSeconds
}

func bucketURL(s *v1.StorageSpec) string {
	if s.Prefix == "" {
		return "s3://" + s.Bucket
	}
	return "s3://" + s.Bucket + "/" + s.Prefix
}

func appendInt[T int32 | int64](e []corev1.EnvVar, name string, v *T) []corev1.EnvVar {
	if v == nil {
		return e
	}
	return append(e, valueEnv(name, itoa(int64(*v))))
}

func appendList(e []corev1.EnvVar, name string, items []string) []corev1.EnvVar {
	if len(items) == 0 {
		return e
	}
	sorted := slices.Clone(items)
	slices.Sort(sorted)
	return append(e, valueEnv(name, strings.Join(sorted, ",")))
}

func valueEnv(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
	}}
}

func secretEnv(name string, r *v1.SecretKeyRef) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Key: r.Key},
	}}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func port(p int32) string { return itoa(int64(p)) }
