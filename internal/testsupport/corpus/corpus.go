package corpus

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/celld/celld-operator/api/v1alpha1"
)

// Image is a digest-pinned placeholder image. The host is in the reserved .invalid domain.
const Image = "images.example.invalid/celld/celld@sha256:94f35ba6973942eb4aaad2830ee8ebe431e2a125940acf380e74782602980a2a"

// Case is one admission check. Message is set for a CEL rule: both sides must report it, and
// Path is the field the refusal names (the rule's fieldPath, as the API server reports it).
// Field is set for a schema rule (pattern, range, enum): both sides must refuse the object and
// name the field. A case with neither must be accepted.
type Case struct {
	Name    string
	Mutate  func(*v1.CelldFleet)
	Message string
	Path    string
	Field   string
}

// Accepted reports whether the case expects the object to be admitted.
func (c Case) Accepted() bool { return c.Message == "" && c.Field == "" }

// UpdateCase is one transition check: Create, then apply Mutate as an update. Message and
// Path are as in Case.
type UpdateCase struct {
	Name    string
	Base    func() *v1.CelldFleet
	Mutate  func(*v1.CelldFleet)
	Message string
	Path    string
}

// Persistent returns a minimal valid PersistentFleet.
func Persistent() *v1.CelldFleet {
	return &v1.CelldFleet{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "CelldFleet"},
		ObjectMeta: metav1.ObjectMeta{Name: "f"},
		Spec: v1.CelldFleetSpec{
			Profile:            v1.ProfilePersistentFleet,
			RuntimeImage:       Image,
			ServiceAccountName: "celld-runtime",
			Storage:            v1.StorageSpec{Bucket: "acme-bucket", Region: "us-east-1", StorageClassName: new("gp3")},
			Placement:          v1.PlacementSpec{Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}, AZCount: 3},
		},
	}
}

// Bucket returns a minimal valid Bucket fleet.
func Bucket() *v1.CelldFleet {
	f := Persistent()
	f.Spec.Profile = v1.ProfileBucket
	f.Spec.Storage.StorageClassName = nil
	return f
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func telemetry() *v1.TelemetrySpec {
	return &v1.TelemetrySpec{CollectorURL: "http://otel.observability.svc:4318", Egress: v1.EgressTarget{PodLabels: map[string]v1.LabelValue{"app": "otel"}, Namespace: "observability"}}
}

func routing() *v1.RoutingSpec {
	return &v1.RoutingSpec{
		Hostnames: []string{"app.example.com"},
		Source:    v1.RoutingSource{Namespace: "edge", PodLabels: map[string]v1.LabelValue{"app": "gw"}},
		Gateway:   &v1.GatewayRouting{Name: "public", Namespace: "edge"},
	}
}

// withSourceLabels routes the fleet with labels selecting the data-plane Pods.
func withSourceLabels(labels map[string]v1.LabelValue) func(*v1.CelldFleet) {
	return func(f *v1.CelldFleet) {
		r := routing()
		r.Source.PodLabels = labels
		f.Spec.Routing = r
	}
}

// withIngressAnnotations routes the fleet through an nginx Ingress with annotations.
func withIngressAnnotations(annotations map[string]string) func(*v1.CelldFleet) {
	return func(f *v1.CelldFleet) {
		r := routing()
		r.Gateway = nil
		r.Ingress = &v1.IngressRouting{ClassName: "nginx", Annotations: annotations}
		f.Spec.Routing = r
	}
}

// withEgressLabels sends telemetry to the Pods labels select.
func withEgressLabels(labels map[string]v1.LabelValue) func(*v1.CelldFleet) {
	return func(f *v1.CelldFleet) {
		t := telemetry()
		t.Egress.PodLabels = labels
		f.Spec.Telemetry = t
	}
}

func kafka() *v1.ExportSpec {
	return &v1.ExportSpec{Sink: v1.ExportSinkKafka, Kafka: &v1.ExportKafka{
		Brokers: []string{"b-1.kafka:9092"}, Topic: "changes", Egress: v1.EgressTarget{CIDR: "10.0.0.0/16"},
	}}
}

func env(name string, value *string, ref *v1.SecretKeyRef) []v1.EnvVar {
	return []v1.EnvVar{{Name: name, Value: value, SecretKeyRef: ref}}
}

// Create lists the creation cases, each applied to a fresh Persistent fleet unless Mutate
// replaces the profile.
func Create() []Case {
	bucket := func(f *v1.CelldFleet) { *f = *Bucket() }
	return []Case{
		{Name: "minimal persistent fleet", Mutate: func(*v1.CelldFleet) {}},
		{Name: "minimal bucket fleet", Mutate: bucket},
		{Name: "ordered bucket fleet", Mutate: func(f *v1.CelldFleet) { bucket(f); f.Spec.BucketWorkload = v1.BucketWorkloadOrdered }},
		{Name: "name of 40 characters", Mutate: func(f *v1.CelldFleet) { f.Name = strings.Repeat("a", 40) }},
		{Name: "name of 41 characters", Mutate: func(f *v1.CelldFleet) { f.Name = strings.Repeat("a", 41) }, Message: v1.MsgFleetName, Path: "metadata"},
		{Name: "name with a dot", Mutate: func(f *v1.CelldFleet) { f.Name = "a.b" }, Message: v1.MsgFleetName, Path: "metadata"},
		{Name: "replicas below azCount", Mutate: func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(2)) }, Message: v1.MsgReplicasBelowAZCount, Path: "spec.replicas"},
		{Name: "replicas above 100", Mutate: func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(101)) }, Field: "spec.replicas"},
		{Name: "zone outside the region", Mutate: func(f *v1.CelldFleet) { f.Spec.Placement.Zones[2] = "us-west-2c" }, Message: v1.MsgZonesOutsideRegion, Path: "spec.placement.zones"},
		{Name: "duplicate zones", Mutate: func(f *v1.CelldFleet) { f.Spec.Placement.Zones[2] = "us-east-1a" }, Field: "spec.placement.zones"},
		{Name: "azCount differs from zones", Mutate: func(f *v1.CelldFleet) { f.Spec.Placement.AZCount = 2 }, Message: v1.MsgAZCountMismatch, Path: "spec.placement.azCount"},
		{Name: "image by tag", Mutate: func(f *v1.CelldFleet) { f.Spec.RuntimeImage = "images.example.invalid/celld/celld:v1" }, Field: "spec.runtimeImage"},
		{Name: "image without registry", Mutate: func(f *v1.CelldFleet) { f.Spec.RuntimeImage = "celld@sha256:" + strings.Repeat("a", 64) }, Field: "spec.runtimeImage"},
		{Name: "ordered persistent fleet", Mutate: func(f *v1.CelldFleet) { f.Spec.BucketWorkload = v1.BucketWorkloadOrdered }, Message: v1.MsgOrderedRequiresBucket, Path: "spec.bucketWorkload"},
		{Name: "persistent fleet without storage class", Mutate: func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = nil }, Message: v1.MsgStorageClassRequired, Path: "spec.storage.storageClassName"},
		// Found by tests/admissionfuzz: a name no StorageClass can have was admitted, and every
		// reconcile failed reading it and retried forever without a condition.
		{Name: "storage class name that is not a DNS subdomain", Mutate: func(f *v1.CelldFleet) { f.Spec.Storage.StorageClassName = new("ebs/gp3") }, Field: "spec.storage.storageClassName"},
		{Name: "bucket fleet with storage class", Mutate: func(f *v1.CelldFleet) { bucket(f); f.Spec.Storage.StorageClassName = new("gp3") }, Message: v1.MsgStorageClassForbidden, Path: "spec.storage.storageClassName"},
		{Name: "preview prefix on persistent fleet", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Storage.Prefix = "pr-1"
			f.Spec.Storage.PreviewFleetRef = &v1.FleetReference{Name: "p", UID: "u"}
		}, Message: v1.MsgPreviewStorageRequiresBucket, Path: "spec.storage"},
		{Name: "preview prefix without a fleet ref", Mutate: func(f *v1.CelldFleet) { bucket(f); f.Spec.Storage.Prefix = "pr-1" }, Message: v1.MsgPrefixWithoutRef, Path: "spec.storage"},
		{Name: "bucket name too short", Mutate: func(f *v1.CelldFleet) { f.Spec.Storage.Bucket = "ab" }, Field: "spec.storage.bucket"},
		{Name: "bad region", Mutate: func(f *v1.CelldFleet) { f.Spec.Storage.Region = "useast1" }, Field: "spec.storage.region"},
		{Name: "cpu limit below request", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Execution = &v1.ExecutionSpec{CPURequest: q("500m"), CPULimit: q("250m")}
		}, Message: v1.MsgCPULimitBelowRequest, Path: "spec.execution.cpuLimit"},
		{Name: "memory limit below request", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Execution = &v1.ExecutionSpec{MemoryRequest: q("2Gi"), MemoryLimit: q("1Gi")}
		}, Message: v1.MsgMemoryLimitBelowRequest, Path: "spec.execution.memoryLimit"},
		{Name: "shutdown above 25 with the default grace", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 40}
		}, Message: v1.MsgGraceTooShort, Path: "spec.lifecycle.terminationGraceSeconds"},
		{Name: "shutdown 40 with grace 45", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 40, TerminationGraceSeconds: 45}
		}},
		{Name: "grace set alone below 25", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Lifecycle = &v1.LifecycleSpec{TerminationGraceSeconds: 20}
		}, Message: v1.MsgGraceTooShort, Path: "spec.lifecycle.terminationGraceSeconds"},
		{Name: "env value", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_LOG", new("info"), nil) }},
		{Name: "env empty value", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_LOG", new(""), nil) }},
		{Name: "env secret", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Env = env("CELLD_KEY", nil, &v1.SecretKeyRef{Name: "s", Key: "k"})
		}},
		{Name: "env with both sources", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Env = env("CELLD_KEY", new("x"), &v1.SecretKeyRef{Name: "s", Key: "k"})
		}, Message: v1.MsgEnvValueSource, Path: "spec.env[0]"},
		{Name: "env literal values totalling 4096 characters", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Env = append(env("CELLD_A", new(strings.Repeat("a", 2048)), nil), env("CELLD_B", new(strings.Repeat("\u00e9", 2048)), nil)...)
		}},
		{Name: "env literal values totalling 4097 characters", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Env = append(env("CELLD_A", new(strings.Repeat("a", 2048)), nil),
				append(env("CELLD_B", new(strings.Repeat("b", 2048)), nil), env("CELLD_C", new("c"), nil)...)...)
		}, Message: v1.MsgEnvValuesTotal, Path: "spec.env"},
		{Name: "env with no source", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_KEY", nil, nil) }, Message: v1.MsgEnvValueSource, Path: "spec.env[0]"},
		{Name: "env operator-owned name", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_NODE", new("x"), nil) }, Message: v1.MsgEnvOperatorOwned, Path: "spec.env[0].name"},
		{Name: "env reserved prefix", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_OTEL_SINK", new("x"), nil) }, Message: v1.MsgEnvReservedPrefix, Path: "spec.env[0].name"},
		{Name: "env strict prefix", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_STRICT_X", new("x"), nil) }, Message: v1.MsgEnvReservedPrefix, Path: "spec.env[0].name"},
		{Name: "env removed name", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_OUTPUT_GATE", new("1"), nil) }, Message: v1.MsgEnvRemoved, Path: "spec.env[0].name"},
		{Name: "env removed CELLD_VAR_ name", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_VAR_GREETING", new("hi"), nil) }, Message: v1.MsgEnvRemoved, Path: "spec.env[0].name"},
		{Name: "env removed name from a Secret", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Env = env("CELLD_VARS_FILE", nil, &v1.SecretKeyRef{Name: "s", Key: "k"})
		}, Message: v1.MsgEnvRemoved, Path: "spec.env[0].name"},
		{Name: "env CELLD_WORKER_LOADER set", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_WORKER_LOADER", new("v8"), nil) }, Message: v1.MsgEnvRemoved, Path: "spec.env[0].name"},
		{Name: "env CELLD_WORKER_LOADER empty", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_WORKER_LOADER", new(""), nil) }},
		{Name: "env name like a removed one", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_VARIANT", new("x"), nil) }},
		{Name: "env name not CELLD_", Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("AWS_REGION", new("x"), nil) }, Field: "spec.env[0].name"},
		{Name: "33 env entries", Mutate: func(f *v1.CelldFleet) {
			for i := range 33 {
				f.Spec.Env = append(f.Spec.Env, v1.EnvVar{Name: "CELLD_X" + strings.Repeat("A", i), Value: new("v")})
			}
		}, Field: "spec.env"},
		{Name: "telemetry to labelled pods", Mutate: func(f *v1.CelldFleet) { f.Spec.Telemetry = telemetry() }},
		{Name: "telemetry to an IP", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "https://10.0.0.5:4318/v1", Egress: v1.EgressTarget{CIDR: "10.0.0.5/32"}}
		}},
		{Name: "telemetry cidr is another IP", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "https://10.0.0.5:4318", Egress: v1.EgressTarget{CIDR: "10.0.0.6/32"}}
		}, Message: v1.MsgTelemetryCIDRHost, Path: "spec.telemetry.egress.cidr"},
		{Name: "telemetry cidr is a network", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Telemetry = &v1.TelemetrySpec{CollectorURL: "http://otel:4318", Egress: v1.EgressTarget{CIDR: "10.0.0.0/24"}}
		}, Message: v1.MsgTelemetryCIDRSingle, Path: "spec.telemetry.egress.cidr"},
		{Name: "telemetry egress with both", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.Egress.CIDR = "10.0.0.5/32"
			f.Spec.Telemetry = t
		}, Message: v1.MsgEgressExactlyOne, Path: "spec.telemetry.egress"},
		{Name: "telemetry URL with credentials", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.CollectorURL = "http://user:pw@otel:4318"
			f.Spec.Telemetry = t
		}, Field: "spec.telemetry.collectorURL"},
		// Found by tests/admissionfuzz: the CRD's collectorURL pattern admits any host
		// character but / ? # @ : [ ], while Validate also parses the URL (net/url), which
		// refuses spaces, control characters, bad % escapes and { } in a host name, so the
		// reconciler refused an admitted fleet with InvalidConfiguration.
		{Name: "telemetry URL with a space in the host", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.CollectorURL = "http://otel collector:4318"
			f.Spec.Telemetry = t
		}, Field: "spec.telemetry.collectorURL"},
		{Name: "telemetry URL with a NUL in the host", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.CollectorURL = "http://otel\x00collector:4318"
			f.Spec.Telemetry = t
		}, Field: "spec.telemetry.collectorURL"},
		{Name: "telemetry URL with a bad escape in the host", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.CollectorURL = "http://otel%zz:4318"
			f.Spec.Telemetry = t
		}, Field: "spec.telemetry.collectorURL"},
		{Name: "telemetry port out of range", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.CollectorURL = "http://otel:70000"
			f.Spec.Telemetry = t
		}, Field: "spec.telemetry.collectorURL"},
		{Name: "ratio sampler without arg", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.Sampler = "traceidratio"
			f.Spec.Telemetry = t
		}, Message: v1.MsgSamplerArg, Path: "spec.telemetry.samplerArg"},
		{Name: "ratio sampler with arg", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.Sampler, t.SamplerArg = "traceidratio", "0.25"
			f.Spec.Telemetry = t
		}},
		{Name: "arg without ratio sampler", Mutate: func(f *v1.CelldFleet) {
			t := telemetry()
			t.Sampler, t.SamplerArg = "always_on", "0.25"
			f.Spec.Telemetry = t
		}, Message: v1.MsgSamplerArg, Path: "spec.telemetry.samplerArg"},
		{Name: "kafka export", Mutate: func(f *v1.CelldFleet) { f.Spec.Export = kafka() }},
		{Name: "kafka sink without kafka", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{Sink: v1.ExportSinkKafka}
		}, Message: v1.MsgExportKafka, Path: "spec.export.sink"},
		{Name: "bucket sink with kafka", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.Sink = v1.ExportSinkBucket
			f.Spec.Export = e
		}, Message: v1.MsgExportBucketSink, Path: "spec.export.sink"},
		{Name: "export to the fleet bucket", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{Bucket: &v1.ExportBucket{Name: "acme-bucket"}}
		}, Message: v1.MsgExportBucketIsFleetBucket, Path: "spec.export.bucket.name"},
		{Name: "export record above queue", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{MaxRecordBytes: new(int64(10)), QueueBytes: new(int64(5))}
		}, Message: v1.MsgExportRecordBytes, Path: "spec.export.maxRecordBytes"},
		{Name: "export record above the default queue", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{MaxRecordBytes: new(int64(v1.DefaultExportQueueBytes + 1))}
		}, Message: v1.MsgExportRecordBytes, Path: "spec.export.maxRecordBytes"},
		{Name: "export record at the default queue", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{MaxRecordBytes: new(int64(v1.DefaultExportQueueBytes))}
		}},
		{Name: "kafka record above Kafka's limit", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.MaxRecordBytes, e.QueueBytes = new(int64(v1.MaxKafkaRecordBytes+1)), new(int64(2_000_000_000))
			f.Spec.Export = e
		}, Message: v1.MsgExportKafkaRecordBytes, Path: "spec.export.maxRecordBytes"},
		{Name: "kafka record at Kafka's limit", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.MaxRecordBytes, e.QueueBytes = new(int64(v1.MaxKafkaRecordBytes)), new(int64(2_000_000_000))
			f.Spec.Export = e
		}},
		{Name: "export internal class", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Export = &v1.ExportSpec{Classes: []string{"Orders", "__Workflow.step"}}
		}, Message: v1.MsgExportClasses, Path: "spec.export.classes"},
		{Name: "kafka broker port 0", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.Kafka.Brokers = []string{"b-1.kafka:0"}
			f.Spec.Export = e
		}, Message: v1.MsgKafkaBrokerPort, Path: "spec.export.kafka.brokers"},
		{Name: "gateway routing", Mutate: func(f *v1.CelldFleet) { f.Spec.Routing = routing() }},
		{Name: "routing with both modes", Mutate: func(f *v1.CelldFleet) {
			r := routing()
			r.Ingress = &v1.IngressRouting{ClassName: "nginx"}
			f.Spec.Routing = r
		}, Message: v1.MsgRoutingMode, Path: "spec.routing"},
		{Name: "routing to an IP", Mutate: func(f *v1.CelldFleet) {
			r := routing()
			r.Hostnames = []string{"10.0.0.1"}
			f.Spec.Routing = r
		}, Message: v1.MsgRoutingHostnameIP, Path: "spec.routing.hostnames"},
		{Name: "wildcard hostname", Mutate: func(f *v1.CelldFleet) {
			r := routing()
			r.Hostnames = []string{"*.example.com"}
			f.Spec.Routing = r
		}},
		{Name: "ingress with reserved annotation", Mutate: withIngressAnnotations(map[string]string{"kubernetes.io/ingress.class": "nginx"}), Message: v1.MsgIngressAnnotationReserved, Path: "spec.routing.ingress.annotations"},
		{Name: "ingress with oversized annotation", Mutate: withIngressAnnotations(map[string]string{"x/y": strings.Repeat("v", 4097)}), Message: v1.MsgIngressAnnotationSize, Path: "spec.routing.ingress.annotations"},
		{Name: "ingress annotation key with a space", Mutate: withIngressAnnotations(map[string]string{"nginx.ingress.kubernetes.io/proxy body": "1m"}), Message: v1.MsgIngressAnnotationKey, Path: "spec.routing.ingress.annotations"},
		{Name: "ingress annotation key with a Kelvin sign (only ASCII is lower-cased)", Mutate: withIngressAnnotations(map[string]string{"example.com/\u212Aeep": "1"}), Message: v1.MsgIngressAnnotationKey, Path: "spec.routing.ingress.annotations"},
		{Name: "ingress annotation key with an upper-case prefix (the API server lower-cases it)", Mutate: withIngressAnnotations(map[string]string{"Example.COM/Proxy_Body.size": "1m"})},
		{Name: "routing source label value of 64 characters", Mutate: withSourceLabels(map[string]v1.LabelValue{"app.kubernetes.io/component": v1.LabelValue(strings.Repeat("a", 64))}), Field: "spec.routing.source.podLabels"},
		{Name: "routing source label value ending in a dash", Mutate: withSourceLabels(map[string]v1.LabelValue{"app": "gw-"}), Field: "spec.routing.source.podLabels"},
		{Name: "routing source label key with two slashes", Mutate: withSourceLabels(map[string]v1.LabelValue{"a/b/c": "gw"}), Message: v1.MsgLabelKey, Path: "spec.routing.source.podLabels"},
		{Name: "routing source label key with a name of 64 characters", Mutate: withSourceLabels(map[string]v1.LabelValue{"example.com/" + strings.Repeat("n", 64): "gw"}), Message: v1.MsgLabelKey, Path: "spec.routing.source.podLabels"},
		{Name: "routing source label key with a prefix of 254 characters", Mutate: withSourceLabels(map[string]v1.LabelValue{strings.Repeat("p", 63) + "." + strings.Repeat("p", 63) + "." + strings.Repeat("p", 63) + "." + strings.Repeat("p", 62) + "/app": "gw"}), Message: v1.MsgLabelKey, Path: "spec.routing.source.podLabels"},
		{Name: "routing source labels at their limits: a 253-character prefix, a 63-character name and value, an empty value", Mutate: withSourceLabels(map[string]v1.LabelValue{
			strings.Repeat("p", 63) + "." + strings.Repeat("p", 63) + "." + strings.Repeat("p", 63) + "." + strings.Repeat("p", 61) + "/" + strings.Repeat("N", 63): v1.LabelValue(strings.Repeat("V", 63)),
			"Tier_1.x": "",
		})},
		{Name: "telemetry egress label key with an upper-case prefix", Mutate: withEgressLabels(map[string]v1.LabelValue{"Example.com/app": "otel"}), Message: v1.MsgLabelKey, Path: "spec.telemetry.egress.podLabels"},
		{Name: "telemetry egress label value with a slash", Mutate: withEgressLabels(map[string]v1.LabelValue{"app": "otel/collector"}), Field: "spec.telemetry.egress.podLabels"},
		{Name: "istio mesh", Mutate: func(f *v1.CelldFleet) { f.Spec.Mesh = &v1.MeshSpec{Istio: &v1.IstioMeshSpec{}} }},
		{Name: "capacity policy", Mutate: func(f *v1.CelldFleet) { f.Spec.Capacity = &v1.CapacityPolicy{Mode: v1.CapacityExternal} }},
		{Name: "capacity min above max", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{MinReplicas: 5, MaxReplicas: 4}
		}, Message: v1.MsgCapacityMinMax, Path: "spec.capacity.minReplicas"},
		{Name: "capacity min below azCount", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{MinReplicas: 2}
		}, Message: v1.MsgCapacityMinBelowAZCount, Path: "spec.capacity.minReplicas"},
		{Name: "capacity cpu low not below high", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{CPUHighMillicores: 100, CPULowMillicores: 100}
		}, Message: v1.MsgCapacityCPU, Path: "spec.capacity.cpuLowMillicores"},
		{Name: "capacity sample interval above max age", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{SampleIntervalSeconds: 60, MaxAgeSeconds: 30}
		}, Message: v1.MsgCapacitySampling, Path: "spec.capacity.sampleIntervalSeconds"},
		{Name: "previews on a separate bucket", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}}
		}},
		{Name: "previews on the fleet bucket", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-bucket"}}
		}, Message: v1.MsgPreviewBucketIsFleetBucket, Path: "spec.previews.storage.bucket"},
		{Name: "capacity memory low not below high", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{MemoryHighMiB: 512, MemoryLowMiB: 600}
		}, Message: v1.MsgCapacityMemory, Path: "spec.capacity.memoryLowMiB"},
		{Name: "capacity averaging window bounds reversed", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Capacity = &v1.CapacityPolicy{MinWindowSeconds: 30, MaxWindowSeconds: 10}
		}, Message: v1.MsgCapacityWindow, Path: "spec.capacity.minWindowSeconds"},
		{Name: "kafka egress cidr that is not a CIDR", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.Kafka.Egress.CIDR = "10.0.0.0/33"
			f.Spec.Export = e
		}, Message: v1.MsgEgressCIDR, Path: "spec.export.kafka.egress.cidr"},
		{Name: "kafka egress namespace without pod labels", Mutate: func(f *v1.CelldFleet) {
			e := kafka()
			e.Kafka.Egress.Namespace = "kafka"
			f.Spec.Export = e
		}, Message: v1.MsgEgressNamespace, Path: "spec.export.kafka.egress.namespace"},
		{Name: "storage endpoint on a fleet that is not a preview", Mutate: func(f *v1.CelldFleet) {
			bucket(f)
			f.Spec.Storage.Endpoint = &v1.StorageEndpoint{URL: "https://s3.example.invalid", CredentialsSecretName: "s3-keys"}
		}, Message: v1.MsgEndpointWithoutRef, Path: "spec.storage.endpoint"},
		{Name: "preview routing with both modes", Mutate: func(f *v1.CelldFleet) {
			r := routing()
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}, Routing: &v1.PreviewRouting{
				BaseDomain: "previews.example.com", Source: r.Source, Gateway: r.Gateway, Ingress: &v1.IngressRouting{ClassName: "nginx"}}}
		}, Message: v1.MsgPreviewRoutingMode, Path: "spec.previews.routing"},
		{Name: "restart token of 129 characters", Mutate: func(f *v1.CelldFleet) {
			f.Spec.Maintenance = &v1.MaintenanceSpec{RestartToken: strings.Repeat("t", 129)}
		}, Field: "spec.maintenance.restartToken"},
	}
}

// Update lists the transition cases.
func Update() []UpdateCase {
	return []UpdateCase{
		{Name: "replicas may change", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.Replicas = new(int32(5)) }},
		{Name: "image may change", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.RuntimeImage = strings.Replace(Image, "94f3", "0000", 1) }},
		{Name: "env may change", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.Env = env("CELLD_LOG", new("debug"), nil) }},
		{Name: "lifecycle may change", Base: Persistent, Mutate: func(f *v1.CelldFleet) {
			f.Spec.Lifecycle = &v1.LifecycleSpec{ShutdownSeconds: 10, TerminationGraceSeconds: 30}
		}},
		{Name: "profile is fixed", Base: Bucket, Mutate: func(f *v1.CelldFleet) {
			f.Spec.Profile = v1.ProfilePersistentFleet
			f.Spec.Storage.StorageClassName = new("gp3")
		}, Message: v1.MsgProfileImmutable, Path: "spec.profile"},
		{Name: "bucket workload is fixed", Base: Bucket, Mutate: func(f *v1.CelldFleet) { f.Spec.BucketWorkload = v1.BucketWorkloadOrdered }, Message: v1.MsgBucketWorkloadImmutable, Path: "spec.bucketWorkload"},
		{Name: "service account is fixed", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.ServiceAccountName = "other" }, Message: v1.MsgServiceAccountImmutable, Path: "spec.serviceAccountName"},
		{Name: "storage is fixed", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.Storage.SizeGiB = 50 }, Message: v1.MsgStorageImmutable, Path: "spec.storage"},
		{Name: "placement is fixed", Base: Persistent, Mutate: func(f *v1.CelldFleet) { f.Spec.Placement.Mode = v1.PlacementRelaxed }, Message: v1.MsgPlacementImmutable, Path: "spec.placement"},
		{Name: "previews may be added", Base: Persistent, Mutate: func(f *v1.CelldFleet) {
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}}
		}},
		{Name: "previews cannot change once added", Base: func() *v1.CelldFleet {
			f := Persistent()
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}}
			return f
		}, Mutate: func(f *v1.CelldFleet) { f.Spec.Previews.Zone = "us-east-1a" }, Message: v1.MsgPreviewsAddOnce, Path: "spec.previews"},
		{Name: "previews cannot be removed", Base: func() *v1.CelldFleet {
			f := Persistent()
			f.Spec.Previews = &v1.FleetPreviewsSpec{Storage: v1.PreviewStorage{Bucket: "acme-previews"}}
			return f
		}, Mutate: func(f *v1.CelldFleet) { f.Spec.Previews = nil }, Message: v1.MsgPreviewsAddOnce, Path: "spec.previews"},
	}
}
